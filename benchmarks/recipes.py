"""Training recipes on Multi30k De→En compared at equal wall-clock: BLEU against minutes (JSON out).

    python -m benchmarks.recipes --minutes 2 5 --variant paper model.init=paper \
        --variant uniform model.init=uniform --work runs/recipes > recipes.json

Every variant starts from the side-by-side benchmark's model (common.BENCH_CONFIG: emb,
hidden and alignment 256, maxout 512, BPE 8k, Adam 1e-3, batches of 64 sentences, no dropout)
with its own ``KEY=VALUE`` overrides, and trains in a process of its own with `--threads`
threads and no validation. At each of `--minutes` (training wall-clock, accumulated over
``rnnsearch train --resume``) training pauses and the model so far translates test_2016_flickr
with beam 5 (sacrebleu, cased); decoding time is not training time. Variants run one after
another, so each has the machine to itself (give each torch process its own cores).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import BENCH_CONFIG, DEFAULT_MULTI30K, cpu_name, find, has_multi30k, print_result
from rnnsearch.config import merge_dicts


def run(cmd: list[str], log: Path, threads: int) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    with open(log, "a", encoding="utf-8") as f:
        done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=f, text=True)
    if done.returncode != 0:
        raise SystemExit(f"recipes: {' '.join(cmd)} failed (exit {done.returncode}); see {log}")
    return done.stdout


def variant(name: str, overrides: list[str], args, corpus: Path) -> dict:
    work = Path(args.work) / name
    model = work / "model"
    work.mkdir(parents=True, exist_ok=True)
    cfg = merge_dicts(BENCH_CONFIG, {
        "model_dir": str(model),
        "data": {"train_src": str(find(corpus, "train.de")), "train_tgt": str(find(corpus, "train.en")),
                 "max_len": 80},
        "train": {"max_epochs": 0, "valid_every": 0, "log_every": 50, "progress": False, "tensorboard": False,
                  "threads": args.threads, "seed": args.seed},
    })
    path = work / "config.yaml"
    path.write_text(json.dumps(cfg, indent=1))  # JSON is YAML
    sets = [x for kv in overrides for x in ("--set", kv)]
    test = [find(corpus, "test_2016_flickr.de"), find(corpus, "test_2016_flickr.en")]
    points = []
    for k, minutes in enumerate(args.minutes):
        limit = ["--set", f"train.max_minutes={minutes}"]
        resume = ["--resume", str(model)] if k else []
        run([sys.executable, "-m", "rnnsearch", "train", str(path), *resume, *sets, *limit],
            work / "train.log", args.threads)
        state = json.loads((model / "DONE").read_text())
        report = json.loads(run([sys.executable, "-m", "rnnsearch", "evaluate", "--model", str(model),
                                 "--src", str(test[0]), "--ref", str(test[1]), "--beam", "5",
                                 "--device", "cpu"],
                                work / "evaluate.log", args.threads))
        points.append({"minutes": minutes, "steps": state["step"], "bleu": report["bleu"]})
        print(f"{name}: {minutes} min, {state['step']} steps, BLEU {report['bleu']}", file=sys.stderr)
    return {"overrides": overrides, "points": points}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", nargs="+", action="append", required=True, metavar=("NAME", "KEY=VALUE"),
                    help="a name and its overrides of the benchmark model; repeat for each variant")
    ap.add_argument("--minutes", type=float, nargs="+", default=[2, 5, 10],
                    help="training wall-clock points at which the model is scored (ascending)")
    ap.add_argument("--corpus", default=str(DEFAULT_MULTI30K), help="a Multi30k folder (default %(default)s)")
    ap.add_argument("--work", default="runs/recipes")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.minutes != sorted(args.minutes):
        ap.error("--minutes must be ascending")
    corpus = Path(args.corpus)
    if not has_multi30k(corpus):
        raise SystemExit(f"recipes: {corpus} holds no Multi30k (run: rnnsearch data get multi30k, "
                         "or give --corpus / set RNNSEARCH_DATA)")
    started = time.time()
    results = {name: variant(name, overrides, args, corpus) for name, *overrides in args.variant}
    print_result({"machine": cpu_name(), "date": time.strftime("%Y-%m-%d"), "threads": args.threads,
                  "seed": args.seed, "base": BENCH_CONFIG, "command": " ".join(sys.argv),
                  "seconds": round(time.time() - started), "variants": results})


if __name__ == "__main__":
    main()
