"""Load of `rnnsearch serve` as LibreTranslate clients make it: throughput and p50/p99 latency at
1, 8 and 32 concurrent clients, with one model loaded and with two; prints JSON.

Each client sends one sentence a request in LibreTranslate's JSON ({"q", "source", "target"}),
as Mastodon does; with two models the clients alternate between the pairs, each sentence drawn
from its pair's --input file. The server runs as `rnnsearch serve` in a subprocess, one per
setting, decoding at --threads threads.

    python -m benchmarks.serve_clients --model de-en=runs/m30k --input de-en=test.de \\
        --model fr-en=runs/hansards --input fr-en=test.fr [--clients 1,8,32] [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.common import cpu_name, print_result
from benchmarks.serve_load import Server, post


def load(url: str, work: list[tuple[str, list[str]]], clients: int, per_client: int) -> dict:
    """`clients` threads, each `per_client` requests; work: (pair, sentences) to alternate over."""
    def client(k: int) -> list[tuple[int, float]]:
        rng = random.Random(k)
        out = []
        for i in range(per_client):
            pair, sentences = work[(k + i) % len(work)]
            source, target = pair.split("-")
            body = {"q": rng.choice(sentences), "source": source, "target": target}
            out.append(post(url + "/translate", json.dumps(body).encode())[:2])
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = [r for rs in pool.map(client, range(clients)) for r in rs]
    wall = time.perf_counter() - start
    ok = sorted(lat for status, lat in results if status == 200)

    def pct(p: float) -> float | None:
        return round(1000 * ok[min(len(ok) - 1, int(p / 100 * len(ok)))], 1) if ok else None

    return {"requests": len(results), "ok": len(ok), "wall_s": round(wall, 2),
            "requests_per_s": round(len(ok) / wall, 2),
            "latency_ms": {"p50": pct(50), "p99": pct(99),
                           "mean": round(1000 * statistics.mean(ok), 1) if ok else None}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, metavar="SRC-TGT=DIR")
    ap.add_argument("--input", action="append", required=True, metavar="SRC-TGT=FILE",
                    help="sentences of that pair's source language, one a line")
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--requests", type=int, default=40, help="requests per client")
    ap.add_argument("--sentences", type=int, default=500, help="first N lines of each input")
    ap.add_argument("--threads", type=int, default=1, help="OMP threads of the server")
    args = ap.parse_args()
    inputs = dict(spec.split("=", 1) for spec in args.input)
    pairs = [spec.split("=", 1)[0] for spec in args.model]
    work = []
    for pair in pairs:
        with open(inputs[pair], encoding="utf-8") as f:
            work.append((pair, [line.strip() for line in f if line.strip()][: args.sentences]))
    report = {"models": args.model, "requests_per_client": args.requests,
              "machine": {"cpus": os.cpu_count(), "processor": cpu_name()},
              "server_threads": args.threads, "date": time.strftime("%Y-%m-%d"), "runs": {}}
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    for n_models in range(1, len(pairs) + 1):
        flags = [f for spec in args.model[1:n_models] for f in ("--model", spec)]
        with Server(args.model[0], *flags) as server:
            load(server.url, work[:n_models], 2, 5)  # warm-up
            for clients in [int(c) for c in args.clients.split(",")]:
                run = load(server.url, work[:n_models], clients, args.requests)
                run["server_rss_mb"] = server.rss_mb()
                report["runs"][f"{n_models} model{'s' if n_models > 1 else ''}, {clients} clients"] = run
    print_result(report)


if __name__ == "__main__":
    main()
