"""Run the learners' notebook over seeds and thread counts; its asserts are the checks (JSON out).

    python -m benchmarks.notebook_seeds --seeds 1 2 3 --threads 1 2 > notebook_seeds.json
    python -m benchmarks.notebook_seeds --replace 'init="uniform")' 'init="paper")' ...  # a variant

Each run executes notebooks/bahdanau_attention.ipynb top to bottom in a fresh kernel with
SEED = N (the seed of every model it trains) and OMP_NUM_THREADS = T, sequentially. A run passes
when every cell, and so every assert, ran; its printed figures are kept for the record.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import nbclient
import nbformat

from benchmarks.common import ROOT, cpu_name, print_result

NOTEBOOK = ROOT / "notebooks" / "bahdanau_attention.ipynb"
SEED_LINE = "SEED = 1  #"


def run(seed: int, threads: int, replace: list[tuple[str, str]]) -> dict:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    for old, new in [(SEED_LINE, f"SEED = {seed}  #")] + replace:
        hits = [c for c in code if old in c.source]
        if not hits:
            raise SystemExit(f"{NOTEBOOK}: no code cell contains {old!r}")
        for c in hits:
            c.source = c.source.replace(old, new)
    os.environ["OMP_NUM_THREADS"] = str(threads)  # the kernel inherits it; the notebook's torch reads it
    started, error = time.time(), None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            nbclient.NotebookClient(nb, timeout=900, kernel_name="python3",
                                    resources={"metadata": {"path": tmp}}).execute()
        except nbclient.exceptions.CellExecutionError as e:
            error = str(e).strip().splitlines()[-1]
    printed = [line for c in nb.cells if c.cell_type == "code" for o in c.outputs
               for line in o.get("text", "").splitlines()]
    keep = ("exact match", "RNNencdec ", "RNNsearch ", "→", "了:", "trained:", "notebook ran in")
    return {"seed": seed, "threads": threads, "replaced": replace, "passed": error is None,
            "error": error, "seconds": round(time.time() - started, 1),
            "figures": [line for line in printed if any(k in line for k in keep)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--replace", nargs=2, action="append", default=[], metavar=("OLD", "NEW"),
                    help="run a variant: replace OLD by NEW in the notebook's code cells")
    args = ap.parse_args()
    runs = []
    for threads in args.threads:
        for seed in args.seeds:
            r = run(seed, threads, [tuple(x) for x in args.replace])
            runs.append(r)
            outcome = "passed" if r["passed"] else "FAILED " + str(r["error"])
            print(f"seed {seed} threads {threads}: {outcome} in {r['seconds']} s", file=sys.stderr)
    print_result({"machine": cpu_name(), "date": time.strftime("%Y-%m-%d"), "runs": runs}, ensure_ascii=False)


if __name__ == "__main__":
    main()
