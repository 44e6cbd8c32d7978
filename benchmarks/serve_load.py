"""Load test of `rnnsearch serve` on the loopback interface: throughput, latency percentiles,
overload and bad requests; prints JSON.

Starts the server as a subprocess for each setting, then C concurrent clients each send R
requests of one sentence (1-60 words: the built-in English→Chinese corpus's grammar with 1-5
clauses, unless --input) and we record throughput and latency percentiles. Settings compared
side by side in one run: server-side batching (--max-batch 32) against none (--max-batch 1);
then an overload phase with a small queue, where the only errors allowed are deliberate 503s
with Retry-After; then a battery of bad requests mixed into load, each of which must get its
expected status while the server stays healthy.

    python -m benchmarks.serve_load --model rnnsearch-demo
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from benchmarks.common import cpu_name, print_result
from rnnsearch.tools.apple_corpus import generate

BAD = [  # (body, expected status)
    (b"{not json", 400), (b"[1]", 422), (b"{}", 422), (b'{"text": 5}', 422), (b'{"text": ""}', 422),
    (b'{"texts": []}', 422), (b'{"texts": ["a", null]}', 422), (b'{"text": "a", "beam": 0}', 422),
    (b'{"text": "a", "beam": 99}', 422), (b'{"text": "a", "beam": "5"}', 422),
    (b'{"text": "a", "n_best": 9}', 422), (b'{"text": "a", "attention": 1}', 422),
    (b'{"text": "a", "colour": 1}', 422), (b'{"text": "\\ud800"}', 422),
    (b'{"text": "' + b"a " * 600_000 + b'"}', 413),
    (json.dumps({"text": "i ate 🍎 \u202eyesterday\u202c e\u0301 \x00 ."}).encode(), 200),
]


def post(url: str, raw: bytes, timeout: float = 120.0) -> tuple[int, float, dict]:
    """POST a JSON body; (status, seconds, headers). A server may answer an oversized body (413)
    and close before the client has sent all of it: the answer is read all the same."""
    start = time.perf_counter()
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        try:
            conn.request("POST", parts.path, body=raw, headers={"Content-Type": "application/json"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before reading the whole body
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - start, dict(response.headers)
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model: str, *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        pythonpath = os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")]))
        env = dict(os.environ, PYTHONPATH=pythonpath)
        self.proc = subprocess.Popen([sys.executable, "-m", "rnnsearch", "serve", "--model", model,
                                      "--port", str(self.port), *flags], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def __enter__(self):
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return self
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    stderr = self.proc.stderr.read().decode()[-2000:]
                    raise RuntimeError(f"server did not start: {stderr}") from None
                time.sleep(0.2)

    def rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
            return round(kb / 1024, 1)
        except (OSError, StopIteration):
            return None

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_load(url: str, sentences: list[str], clients: int, per_client: int, beam: int) -> dict:
    def client(k: int) -> list[tuple[int, float]]:
        rng = random.Random(k)
        return [post(url + "/translate",
                     json.dumps({"text": rng.choice(sentences), "beam": beam}).encode())[:2]
                for _ in range(per_client)]

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(client, range(clients)) for r in rs]
    wall = time.perf_counter() - start
    ok = sorted(lat for status, lat in results if status == 200)
    statuses: dict[str, int] = {}
    for status, _ in results:
        statuses[str(status)] = statuses.get(str(status), 0) + 1

    def pct(p: float) -> float | None:
        return round(1000 * ok[min(len(ok) - 1, int(p / 100 * len(ok)))], 1) if ok else None

    return {"requests": len(results), "statuses": statuses, "wall_s": round(wall, 2),
            "sentences_per_s": round(len(ok) / wall, 2), "latency_ms": {
                "p50": pct(50), "p95": pct(95), "p99": pct(99),
                "mean": round(1000 * statistics.mean(ok), 1) if ok else None}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", help="sentences to send, one a line (default: demo grammar, 1-5 clauses)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=50, help="requests per client")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batches", default="32,1", help="--max-batch settings to compare")
    args = ap.parse_args()

    if args.input:
        with open(args.input, encoding="utf-8") as f:
            sentences = [line.strip() for line in f if line.strip()]
    else:
        sentences = [" ".join(p.src) for p in generate(500, seed=99, min_clauses=1, max_clauses=5)]
    lengths = sorted(len(s.split()) for s in sentences)
    report = {"model": args.model, "clients": args.clients, "requests_per_client": args.requests,
              "beam": args.beam, "sentence_words": {"min": lengths[0], "median": lengths[len(lengths) // 2],
                                                   "max": lengths[-1]},
              "machine": {"cpus": os.cpu_count(), "processor": cpu_name(),
                          "python": platform.python_version()},
              "date": time.strftime("%Y-%m-%d"), "runs": {}}
    for batch in [int(b) for b in args.batches.split(",")]:
        with Server(args.model, "--max-batch", str(batch)) as server:
            post(server.url + "/translate", json.dumps({"text": sentences[0]}).encode())  # warm-up
            run = run_load(server.url, sentences, args.clients, args.requests, args.beam)
            run["server_rss_mb"] = server.rss_mb()
            report["runs"][f"max_batch={batch}"] = run
    if len(report["runs"]) >= 2:
        first, *rest = report["runs"].values()
        report["batching_speedup"] = round(first["sentences_per_s"] / rest[-1]["sentences_per_s"], 2)

    # overload: a queue of 8 sentences for 2x the clients; only deliberate 503s may appear
    with Server(args.model, "--max-queue", "8") as server:
        run = run_load(server.url, sentences, args.clients * 2, max(5, args.requests // 5), args.beam)
        report["overload_max_queue_8"] = run

    report["bad_requests"] = bad_requests(args.model, sentences, args.beam)
    print_result(report)


def bad_requests(model: str, sentences: list[str], beam: int) -> dict:
    """Every kind of bad request (BAD) ten times, interleaved with good load: each must get its
    status, and the server must stay up."""
    with Server(model) as server:
        expected_ok = True
        counts: dict[str, int] = {}
        with ThreadPoolExecutor(8) as pool:
            good = pool.submit(run_load, server.url, sentences, 4, 10, beam)
            for _ in range(10):
                for raw, want in BAD:
                    got = post(server.url + "/translate", raw)[0]
                    counts[str(got)] = counts.get(str(got), 0) + 1
                    expected_ok &= got == want
            load = good.result()
        with urllib.request.urlopen(server.url + "/health", timeout=10) as r:
            healthy = r.status == 200
        return {"sent": 10 * len(BAD), "kinds": len(BAD), "statuses": counts,
                "all_as_expected": expected_ok, "server_healthy_after": healthy,
                "concurrent_good_requests": load["statuses"], "server_rss_mb": server.rss_mb()}


if __name__ == "__main__":
    main()
