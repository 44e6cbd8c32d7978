"""int8 decoding against fp32, side by side on one trained model: sentences/s and BLEU.

    python benchmarks/quantize.py --model runs/multi30k_de_en_cpu \
        --src data/multi30k/test_2016_flickr.de.gz --ref data/multi30k/test_2016_flickr.en.gz

The model is loaded twice (``rnnsearch.load(..., quantize="none" | "int8")``); each round decodes
the whole test set with both, alternating which goes first, greedy and beam 5, so that a noisy
machine slows both alike; the speed of each is its median over the rounds. BLEU (sacrebleu,
13a) is of the translations each produced. Prints one JSON object; docs/benchmarks.md, "int8
decoding", has the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from demo_seeds import cpu_model  # noqa: E402

import rnnsearch  # noqa: E402
from rnnsearch.engine.evaluate import score_corpus  # noqa: E402
from rnnsearch.io import read_aligned  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a model directory written by rnnsearch train")
    ap.add_argument("--src", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=0, help="first N test sentences (0: all)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    src, ref = read_aligned(args.src, args.ref)
    if args.sentences:
        src, ref = src[: args.sentences], ref[: args.sentences]
    systems = {kind: rnnsearch.load(args.model, device="cpu", quantize=kind) for kind in ("none", "int8")}
    seconds: dict = {(k, b): [] for k in systems for b in args.beams}
    hyps: dict = {}
    for r in range(args.rounds):
        order = list(systems) if r % 2 == 0 else list(systems)[::-1]
        for beam in args.beams:
            for kind in order:
                start = time.perf_counter()
                out = systems[kind].translate(src, beam=beam, attention=False, precision="fp32")
                seconds[kind, beam].append(time.perf_counter() - start)
                hyps[kind, beam] = [t.text for t in out]
    result: dict = {"model": args.model, "sentences": len(src), "threads": args.threads,
                    "rounds": args.rounds, "machine": cpu_model(), "torch": torch.__version__,
                    "quantized_engine": torch.backends.quantized.engine,
                    "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv)}
    for beam in args.beams:
        row = {}
        for kind, name in (("none", "fp32"), ("int8", "int8")):
            s = statistics.median(seconds[kind, beam])
            row[name] = {"sent_per_s": round(len(src) / s, 1),
                         "bleu": round(score_corpus(hyps[kind, beam], ref)["bleu"], 2)}
        row["speedup"] = round(row["int8"]["sent_per_s"] / row["fp32"]["sent_per_s"], 3)
        row["bleu_delta"] = round(row["int8"]["bleu"] - row["fp32"]["bleu"], 2)
        same = sum(a == b for a, b in zip(hyps["none", beam], hyps["int8", beam]))
        row["identical_translations"] = round(same / max(len(src), 1), 3)
        result[f"beam{beam}"] = row
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
