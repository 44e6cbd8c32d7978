"""The Europarl it→en length curve and reversal at 20,000 steps a model, trained a few systems at
a time and merged into the published results.

    python -m benchmarks.europarl_20k --data DIR --only RNNsearch-50 [--threads 2] [--work DIR]
    python -m benchmarks.europarl_20k --data DIR --only RNNsearch-50 --only 'RNNsearch reversed' --jobs 2
    python -m benchmarks.europarl_20k --data DIR --publish-only [--work DIR]

Six models of about 2.5–4 CPU-hours each (docs/experiments.md, "Results on `europarl-it-en` at
20,000 steps a model") are more than one machine can train in one sitting, and a machine does not
always keep its models for the next run. So each run trains the systems it can finish (`--only`,
repeatable, labels of the two experiments: RNNencdec-30, RNNsearch-50, 'RNNencdec reversed',
'RNNsearch reversed', ...) with every core on them, and the systems it scores are merged into the
committed results in docs/experiments/*-europarl-it-en-20000-steps/ beside those of earlier runs
(kept as they were scored; the test set is the same seeded 3,000 sentences, which the merge checks
bucket by bucket). results.md and the plots are written again from the union.

DIR holds europarl_it_en/ as `rnnsearch data get europarl-it-en` and its split write it (the
development copy: $RNNSEARCH_DATA). The recipe below is the one the committed models had; only
the thread count differs between runs, and it is not part of a model's identity. Prints one
JSON object: each system now in the results, its BLEU and its 50–60 / 10–20 bucket ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT, print_result
from rnnsearch.tools.experiments import experiment_systems, write_results

EXPERIMENTS = ("length-curve", "reverse")
RECIPE = ["--corpus", "europarl-it-en", "--train-sentences", "0", "--test-sentences", "3000",
          "--budget-steps", "20000", "--set", "train.precision=auto", "--set", "train.save_every_minutes=10",
          "--set", "train.valid_every=2000", "--set", "model.emb=256", "--set", "model.hidden=256",
          "--set", "model.align=256", "--set", "model.maxout=256"]
PUBLISHED = ROOT / "docs" / "experiments"


def published_dir(name: str, docs: Path = PUBLISHED) -> Path:
    return docs / f"{name}-europarl-it-en-20000-steps"


def train(data: Path, work: Path, only: list[str], threads: int | None = None, jobs: int = 1) -> None:
    """`rnnsearch experiment length-curve reverse` with the recipe, for the systems in `only`,
    `jobs` of them at once with `threads` threads each (None: the experiment shares the cores out)."""
    cmd = [sys.executable, "-m", "rnnsearch", "experiment", *EXPERIMENTS, *RECIPE, "--data", str(data),
           "--out", str(work), "--jobs", str(jobs)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    if threads:
        cmd += ["--set", f"train.threads={threads}"]
        env["OMP_NUM_THREADS"] = str(threads)
    for label in only:
        cmd += ["--only", label]
    subprocess.run(cmd, check=True, env=env)


def merge(name: str, scored: dict, published: dict, rewrite) -> dict:
    """The published results of experiment `name` with the systems `scored` adds (a results.json
    of a later run), in the experiment's order. A system scored before keeps that score."""
    if scored["test_sentences"] != published["test_sentences"] or \
            scored["steps_per_model"] != published["steps_per_model"]:
        raise SystemExit(f"{name}: the new results are of another test set or budget "
                         f"({scored['test_sentences']} sentences, {scored['steps_per_model']} steps)")
    have = {s["label"]: s for s in published["systems"]}
    sizes = [b["sentences"] for b in published["systems"][0]["by_length"]] if published["systems"] else None
    for s in scored["systems"]:
        if s["label"] in have:
            continue
        s = json.loads(rewrite(json.dumps(s)))
        if sizes is not None and [b["sentences"] for b in s["by_length"]] != sizes:
            raise SystemExit(f"{name}: {s['label']} was scored on other length buckets than the published "
                             f"systems ({[b['sentences'] for b in s['by_length']]} against {sizes})")
        have[s["label"]] = {**s, "scored_on": scored["scored_on"]}
    labels = list(experiment_systems(name))
    merged = {**published, "systems": [have[label] for label in labels if label in have]}
    merged["not_trained"] = [label for label in labels if label not in have]
    if not merged["not_trained"]:
        del merged["not_trained"]
    return merged


def publish(work: Path, data: Path, docs: Path = PUBLISHED) -> dict:
    """Merge what `work` has scored into the published results; returns a summary per system."""
    def rewrite(text: str) -> str:  # the paths the published results use
        text = text.replace(str(data.resolve()), "data")
        return text.replace(str(work.resolve()), "experiments/europarl-it-en")

    summary = {}
    for name in EXPERIMENTS:
        new_file = work / name / "results.json"
        if not new_file.exists():
            continue
        target = published_dir(name, docs)
        published = json.loads((target / "results.json").read_text())
        merged = merge(name, json.loads(new_file.read_text()), published, rewrite)
        write_results(merged, target)
        for s in merged["systems"]:
            b = {x["bucket"]: x["bleu"] for x in s["by_length"]}
            long, short = b.get("50-60"), b.get("10-20")
            ratio = round(long / short, 3) if long is not None and short else None
            summary[s["label"]] = {"bleu": s["bleu"], "ratio_50_60_to_10_20": ratio,
                                   "train_hours": round(s["train_seconds"] / 3600, 2),
                                   "scored_on": s.get("scored_on", merged["scored_on"])}
        summary[f"{name}: not trained"] = merged.get("not_trained", [])
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("RNNSEARCH_DATA", "data"),
                    help="directory holding europarl_it_en/ (default $RNNSEARCH_DATA, else ./data)")
    ap.add_argument("--work", default=str(ROOT / ".dev" / "europarl-it-en"),
                    help="models, data and results (default .dev/europarl-it-en)")
    ap.add_argument("--only", action="append", default=[], metavar="SYSTEM",
                    help="system to train (repeatable)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="systems trained at once, each a process of its own (default 1). On 2 cores two "
                         "1-thread RNNsearch-50 processes make 1.2x the steps of one 2-thread process "
                         "(docs/experiments.md), so --jobs 2 when two systems are left")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of each training process (default: the cores shared out among the jobs)")
    ap.add_argument("--publish-only", action="store_true", help="train nothing: merge what --work has scored")
    args = ap.parse_args()
    data, work = Path(args.data), Path(args.work)
    if not args.publish_only:
        if not args.only:
            ap.error("name the systems to train with --only (or give --publish-only)")
        if not (data / "europarl_it_en").is_dir():
            raise SystemExit(f"{data / 'europarl_it_en'}: not found; give --data (or set RNNSEARCH_DATA)")
        train(data, work, args.only, args.threads, args.jobs)
    print_result(publish(work, data))


if __name__ == "__main__":
    main()
