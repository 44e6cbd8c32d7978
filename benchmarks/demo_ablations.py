"""Which demo settings make attention align? Train the demo with one setting changed at a time.

    python -m benchmarks.demo_ablations --jobs 2 --epochs 10 > ablations.json

Each variant runs `rnnsearch.tools.demo.run_demo` in its own process (so variants can run in
parallel on a many-core machine) for a fixed number of epochs, and reports test BLEU,
AER and the share of content words whose attention argmax is their gold source word.
Prints one JSON object: {"variants": [...], "machine": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAPER = ["model.readout=prev", "model.init_state=backward_first", "model.dropout_emb=0",
         "model.dropout_hidden=0", "model.dropout_readout=0", "model.word_dropout=0"]
VARIANTS = {
    "demo": [],
    "readout_prev": ["model.readout=prev"],
    "init_backward_first": ["model.init_state=backward_first"],
    "no_word_dropout": ["model.word_dropout=0"],
    "no_dropout": ["model.dropout_emb=0", "model.dropout_hidden=0", "model.dropout_readout=0",
                   "model.word_dropout=0"],
    "paper_defaults": PAPER,
    "hidden_64": ["model.hidden=64"],
    "gru_cudnn": ["model.gru=cudnn"],
}


def run_one(name: str, overrides: list[str], seed: int, epochs: int, threads: int, root: Path,
            sentences: int) -> dict:
    code = (
        "import json, sys, logging; logging.basicConfig(level=logging.WARNING)\n"
        "from rnnsearch.tools.demo import run_demo\n"
        f"r = run_demo({str(root / name)!r}, seed={seed}, n_train={sentences}, minutes=0, epochs={epochs}, "
        f"overrides={['train.threads=' + str(threads)] + overrides!r}, progress=False)\n"
        "print('RESULT ' + json.dumps(r, ensure_ascii=False))\n")
    return {"name": name, "overrides": overrides,
            "proc": subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--sentences", type=int, default=20000, help="training sentences")
    ap.add_argument("--jobs", type=int, default=1, help="variants trained at once")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per variant")
    ap.add_argument("--out", help="keep the runs here (default: a temporary directory)")
    args = ap.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="rnnsearch-ablations-"))
    todo, running, results = list(args.variants), [], []
    start = time.time()
    while todo or running:
        while todo and len(running) < args.jobs:
            name = todo.pop(0)
            running.append(run_one(name, VARIANTS[name], args.seed, args.epochs, args.threads, root,
                                   args.sentences))
        time.sleep(1)
        for job in list(running):
            if job["proc"].poll() is None:
                continue
            running.remove(job)
            out, err = job["proc"].communicate()
            line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
            entry = {"name": job["name"], "overrides": job["overrides"]}
            if line:
                r = json.loads(line[7:])
                entry.update({k: r[k] for k in ("test_bleu", "test_exact_match", "aer",
                                                 "content_word_accuracy", "alignment_precision",
                                                 "alignment_recall", "example_argmax",
                                                 "new_compositions_exact", "train_seconds")})
            else:
                entry["error"] = (err.strip().splitlines()[-1] if err.strip()
                                  else f"exit {job['proc'].returncode}")
            results.append(entry)
            print(json.dumps(entry, ensure_ascii=False), file=sys.stderr)
    order = {n: i for i, n in enumerate(args.variants)}
    results.sort(key=lambda e: order[e["name"]])
    print(json.dumps({"seed": args.seed, "epochs": args.epochs, "wall_seconds": round(time.time() - start, 1),
                      "machine": f"{platform.node()} {os.cpu_count()} cores, "
                                 f"{args.jobs} jobs x {args.threads} threads",
                      "date": time.strftime("%Y-%m-%d"), "variants": results}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
