"""Run the commands docs/usage.md shows and write what they print into its "What the commands print".

    python docs/make_samples.py          # the full demo (about 3 minutes on 2 cores), then the rest

Every sample is real output: `rnnsearch demo`, then train, translate, evaluate, align and serve on
the demo's own corpus and model, each run in a scratch folder as a user would run it (paths as
they would type them). The demo's results.json is kept as docs/figures/demo.json, the record
README's Results quotes. tests/test_docs.py runs the same commands with a 40-step demo and checks
that every line the usage page shows still has the form the commands print today (numbers and the
translations themselves may differ), so a changed log line fails the test until this script is
rerun.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

USAGE = Path(__file__).resolve().parent / "usage.md"
RECORD = USAGE.parent / "figures" / "demo.json"  # the demo's results.json, for README's Results
BEGIN, END = "<!-- samples: begin (python docs/make_samples.py) -->", "<!-- samples: end -->"
SENTENCE = "i ate an apple yesterday ."


def _run(args: list[str], cwd: Path, env: dict) -> tuple[list[str], list[str]]:
    """stdout and stderr lines of `rnnsearch ARGS` in `cwd`; a failure stops the script."""
    done = subprocess.run([sys.executable, "-m", "rnnsearch", *args], cwd=cwd, env=env, text=True,
                          capture_output=True)
    if done.returncode:
        raise RuntimeError(f"rnnsearch {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout.splitlines(), done.stderr.splitlines()


def _pick(lines: list[str], *patterns: str) -> list[str]:
    """For each pattern in turn, the first line after the previous pick that matches it (re.search)."""
    picked, at = [], 0
    for p in patterns:
        hit = next((i for i in range(at, len(lines)) if re.search(p, lines[i])), None)
        if hit is None:
            raise RuntimeError(f"no line matches {p!r} in:\n" + "\n".join(lines[at:]))
        picked.append(lines[hit])
        at = hit + 1
    return picked


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until_up(port: int, seconds: float = 60.0) -> None:
    """The server logs its address just before it listens: poll /health until it answers."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _serve(cwd: Path, env: dict, port: int) -> tuple[list[str], list[str]]:
    """Start `rnnsearch serve` on the demo model, ask it for one translation, stop it (SIGTERM)."""
    args = ["serve", "--model", "rnnsearch-demo/model", "--port", str(port)]
    proc = subprocess.Popen([sys.executable, "-m", "rnnsearch", *args], cwd=cwd, env=env, text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    log = []
    try:
        for line in proc.stderr:
            log.append(line.rstrip("\n"))
            if "serving " in line:
                break
        _wait_until_up(port)
        body = json.dumps({"text": SENTENCE}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/translate", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as r:
            answer = json.loads(r.read())
        for t in [answer["translation"], *answer["translations"]]:
            t.pop("tokens", None)  # the pieces again: left out of the sample
        reply = json.dumps(answer, ensure_ascii=False)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
        log += (rest or "").splitlines()
    return _pick(log, r"serving "), [reply] + _pick(log, r"drained and stopped")


def run_samples(work: Path, demo_steps: int = 0, port: int = 0) -> list[tuple[str, list[str]]]:
    """[(the command as a user types it, the lines shown)] for each command, run in `work`."""
    env = dict(os.environ)  # threads as a user's run picks them (train.threads 0: the free cores)
    steps = ["--steps", str(demo_steps)] if demo_steps else []
    out, err = _run(["demo", "--no-progress", *steps], work, env)
    demo = ("rnnsearch demo", _pick(err, r"^rnnsearch: demo: ") + [x for x in out if x.strip()][:2]
            + _pick(out, r"^  i ate an apple", r"^  → ", r"training steps: ", r"^model in "))
    data = "rnnsearch-demo/data"
    train_steps = 300 if not demo_steps else 20
    train_args = ["train", "rnnsearch-demo/model/config.json", "--model-dir", "runs/again",
                  "--set", f"train.max_steps={train_steps}", "--set", "train.progress=false"]
    _, err = _run(train_args, work, env)
    train = (" ".join(["rnnsearch"] + train_args),
             _pick(err, r"model rnnsearch: ", r"step \d+ final ",
                   r"training stopped"))
    two = f"{SENTENCE}\nyou sold five old books yesterday afternoon .\n"
    (work / "two.en").write_text(two, encoding="utf-8")
    translate_args = ["translate", "--model", "rnnsearch-demo/model", "--alignment", "--input", "two.en"]
    out, _ = _run(translate_args, work, env)
    translate = (" ".join(["rnnsearch"] + translate_args), out)
    evaluate_args = ["evaluate", "--model", "rnnsearch-demo/model", "--src", f"{data}/test.en",
                     "--ref", f"{data}/test.zh", "--beam", "5", "--tokenize", "zh"]
    out, _ = _run(evaluate_args, work, env)
    result = json.loads("\n".join(out))
    keep = ("beam", "sentences_per_second", "bleu", "chrf", "bleu_signature")
    evaluate = (" ".join(["rnnsearch"] + evaluate_args) + "   # one JSON object; a few of its keys:",
                [f'  "{k}": {json.dumps(result[k], ensure_ascii=False)},' for k in keep if k in result])
    align_args = ["align", "--model", "rnnsearch-demo/model", "--src", f"{data}/test.en", "--tgt",
                  f"{data}/test.zh", "--gold", f"{data}/test.align"]
    out, _ = _run(align_args, work, env)
    scores = [x.strip() for x in out if x.strip() not in ("{", "}", "")]
    align = (" ".join(["rnnsearch"] + align_args), scores[:4])
    port = port or _free_port()
    serve_log, reply = _serve(work, env, port)
    serve = (f"rnnsearch serve --model rnnsearch-demo/model --port {port}", serve_log)
    body = json.dumps({"text": SENTENCE})
    ask = (f"curl -s localhost:{port}/translate -H 'Content-Type: application/json' -d '{body}'", reply)
    return [demo, train, translate, evaluate, align, serve, ask]


def render(samples: list[tuple[str, list[str]]], when: str) -> str:
    """The usage page's section between BEGIN and END."""
    parts = [BEGIN, "", f"Real output, {when}, written by `python docs/make_samples.py`; "
             "tests/test_docs.py fails when a line no longer has the form the command prints. "
             "Log lines go to standard error, results to standard output.", ""]
    for command, lines in samples:
        parts += ["```text", f"$ {command}", *lines, "```"]
    return "\n".join(parts + ["", END])


def section(page: str) -> str:
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[start:end]


def shown(page: str) -> list[tuple[str, list[str]]]:
    """[(command, lines)] of the usage page's sample blocks."""
    blocks = re.findall(r"```text\n\$ (.*?)\n(.*?)```", section(page), re.S)
    return [(cmd, body.splitlines()) for cmd, body in blocks]


def form(line: str) -> str:
    """What must stay the same in a sample line: numbers, translations and the demo's verdict vary."""
    line = re.sub(r"\"text\": \"[^\"]*\"", '"text": "…"', line)
    line = re.sub(r"^(\s*→ ).*", r"\1…", line)
    line = re.sub(r"^.* \|\|\| ", "… ||| ", line)
    line = re.sub(r"(training steps: ).*", r"\1…", line)
    line = re.sub(r"/tmp\S*?/|127\.0\.0\.1", "", line)
    line = re.sub(r"\d+(?:[.,]\d+)*", "#", line)
    return re.sub(r"#-#( #-#)*", "#-# …", line)


def main() -> None:
    info = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((x.split(":", 1)[1].strip() for x in info if x.startswith("model name")), "unknown CPU")
    flags = set(next((x.split(":", 1)[1] for x in info if x.startswith("flags")), "").split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"
    when = f"{time.strftime('%Y-%m-%d')}, {cpu} ({isa}), {os.cpu_count()} cores"
    with tempfile.TemporaryDirectory() as tmp:
        samples = run_samples(Path(tmp), port=8000)
        demo = json.loads((Path(tmp) / "rnnsearch-demo" / "results.json").read_text(encoding="utf-8"))
    demo = {"command": "rnnsearch demo", "machine": when, **demo}
    RECORD.write_text(json.dumps(demo, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    page = USAGE.read_text(encoding="utf-8")
    USAGE.write_text(page.replace(section(page), render(samples, when)), encoding="utf-8")
    print(f"wrote {USAGE} and {RECORD}")


if __name__ == "__main__":
    main()
