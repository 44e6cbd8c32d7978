"""`rnnsearch demo` over seeds and thread counts: steps, wall time, every figure and check (JSON).

    python -m benchmarks.demo_seeds --seeds 1 2 3 --threads 1 --work runs/demo_seeds > demo_1t.json

Each run is a separate `rnnsearch demo` process with OMP_NUM_THREADS and train.threads set to the
thread count; runs are sequential (give each torch process its own cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import cpu_name, print_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--work", default="runs/demo_seeds", help="one demo output folder per run under here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to rnnsearch demo")
    ap.add_argument("--steps", type=int, help="passed to rnnsearch demo (default: the demo's)")
    args = ap.parse_args()
    runs = []
    for threads in args.threads:
        for seed in args.seeds:
            out = Path(args.work) / f"seed{seed}_t{threads}"
            cmd = [sys.executable, "-m", "rnnsearch", "demo", "--seed", str(seed), "--out", str(out),
                   "--no-progress", "--set", f"train.threads={threads}"]
            cmd += [x for kv in args.set for x in ("--set", kv)]
            if args.steps is not None:
                cmd += ["--steps", str(args.steps)]
            t0 = time.time()
            subprocess.run(cmd, check=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)},
                           stdout=subprocess.DEVNULL)
            r = json.loads((out / "results.json").read_text(encoding="utf-8"))
            r.update(wall_seconds=round(time.time() - t0, 1), command=" ".join(cmd[1:]))
            runs.append(r)
            print(f"seed {seed} threads {threads}: {r['steps']} steps, {r['wall_seconds']} s, "
                  f"BLEU {r['test_bleu']}, content {r['content_word_accuracy']}, AER {r['aer']}, "
                  f"all checks {all(r['checks'].values())}", file=sys.stderr)
    print_result({"machine": cpu_name(), "date": time.strftime("%Y-%m-%d"), "runs": runs}, ensure_ascii=False)


if __name__ == "__main__":
    main()
