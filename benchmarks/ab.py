"""Decoding speed of two source trees of rnnsearch, side by side on one model: the before and
after of a speed change.

    git worktree add /tmp/before HEAD~1
    python -m benchmarks.ab --before /tmp/before/src --after src --model MODEL \
        --src data/multi30k/test_2016_flickr.de.gz [--quantize int8] [--rounds 6]

Each round starts one fresh process per tree (the tree's `src` first on PYTHONPATH), the order
alternating, and each process loads the model, warms up on a few sentences, then decodes the
test sentences greedy and with beam 5 (batches of --batch). Speed is the median round; the
translations of the two trees are compared (a speed change should not change them). Prints one
JSON object: sentences/s per tree and beam, after/before ratios, whether the outputs are equal.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import cpu_name, print_result
from rnnsearch.config import ConfigError, parse_override

BEAMS = (1, 5)

# one tree's process: argv = model, source file, quantize, threads, batch, sentences, options (JSON)
_DECODE = """
import json, sys, time, torch, rnnsearch
from rnnsearch.io import read_lines
model, path, quantize, threads, batch, n, options = sys.argv[1:]
torch.set_num_threads(int(threads))
src = read_lines(path)[: int(n) or None]
m = rnnsearch.load(model, device="cpu", quantize=quantize)
options = json.loads(options)
m.translate(src[:50], beam=5, batch_size=int(batch), attention=False, **options)
out = {}
for beam in (1, 5):
    start = time.perf_counter()
    done = m.translate(src, beam=beam, batch_size=int(batch), attention=False, **options)
    out[beam] = [len(src) / (time.perf_counter() - start), [t.text for t in done]]
print(json.dumps(out))
"""


def options(pairs: list[str]) -> dict:
    """KEY=VALUE decoding options, each value a YAML scalar as `--set` reads it (1, 2.0, fp32)."""
    out = {}
    for pair in pairs:
        try:
            keys, value = parse_override(pair)
        except ConfigError:
            raise SystemExit(f"ab: {pair!r}: give KEY=VALUE") from None
        out[".".join(keys)] = value
    return out


def decode(tree: str, args, extra: dict) -> dict:
    """One process decoding with `tree`'s rnnsearch: beam -> (sentences/s, translations)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
    argv = [args.model, args.src, args.quantize, str(args.threads), str(args.batch), str(args.sentences),
            json.dumps(extra)]
    done = subprocess.run([sys.executable, "-c", _DECODE, *argv], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ab: decoding with {tree} failed:\n{done.stderr[-2000:]}")
    return {int(beam): value for beam, value in json.loads(done.stdout.splitlines()[-1]).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the first tree's src directory")
    ap.add_argument("--after", required=True, help="the second tree's src directory")
    ap.add_argument("--model", required=True, help="a model directory written by rnnsearch train")
    ap.add_argument("--src", required=True, help="sentences to translate (plain or .gz)")
    ap.add_argument("--quantize", choices=["none", "int8"], default="none")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="sentences per decoding batch")
    ap.add_argument("--sentences", type=int, default=0, help="the first N (0: all)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a decoding option for both trees (translate's keywords: precision=fp32)")
    ap.add_argument("--after-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a decoding option for the second tree only (one the first may not know)")
    args = ap.parse_args()
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    both = options(args.option)
    extra = {"before": both, "after": {**both, **options(args.after_option)}}
    speed: dict = {(name, beam): [] for name in trees for beam in BEAMS}
    texts: dict = {}
    for r in range(args.rounds):
        for name in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
            for beam, (rate, out) in decode(trees[name], args, extra[name]).items():
                speed[name, beam].append(round(rate, 1))
                texts[name, beam] = out
    result: dict = {"model": args.model, "quantize": args.quantize, "threads": args.threads,
                    "batch": args.batch, "rounds": args.rounds, "trees": trees, "options": extra,
                    "machine": cpu_name(), "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv)}
    for beam in BEAMS:
        before, after = (statistics.median(speed[name, beam]) for name in trees)
        result[f"beam{beam}"] = {"before": {"median": before, "rounds": speed["before", beam]},
                                 "after": {"median": after, "rounds": speed["after", beam]},
                                 "ratio": round(after / before, 3),
                                 "identical_translations": texts["before", beam] == texts["after", beam]}
    print_result(result)


if __name__ == "__main__":
    main()
