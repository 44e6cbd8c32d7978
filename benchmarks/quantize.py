"""int8 (and bf16) decoding, and lexical shortlists, against fp32, side by side on one trained
model: sentences/s and BLEU.

    python -m benchmarks.quantize --model runs/multi30k_de_en_cpu \
        --src data/multi30k/test_2016_flickr.de.gz --ref data/multi30k/test_2016_flickr.en.gz \
        [--kinds fp32 int8 int8-x86 bf16 fp32+shortlist int8+shortlist] [--shortlist PATH|auto]

The model is loaded once per kind (``rnnsearch.load(..., quantize="none" | "int8")``; bf16 is
the fp32 model decoding under ``precision="bf16"``; ``int8-x86`` packs the int8 weights with
PyTorch's x86 engine instead of the one engine/accel/quantize.py chooses for this CPU); each round
decodes the whole test set with every kind, rotating which goes first, greedy and beam 5, so
that a noisy machine slows all alike; the speed of each is its median over the rounds. BLEU
(sacrebleu, 13a) is of the translations each produced; every kind is compared with fp32. A
"+shortlist" kind decodes over `--shortlist` (engine/accel/shortlist.py); its coverage is the share of
the reference's target pieces that are on their sentence's list, and its size the mean number of
ids a sentence's list holds. With `--peak-rss` each kind also decodes the test set once more per
beam in a process of its own (`rnnsearch evaluate`, as the side by side runs it), whose peak
resident memory is read while it runs: what a decoder with that kind needs. `--profile FILE`
decodes once more with each kind and beam under torch.profiler and writes their operator tables
to FILE. Prints one JSON object; docs/benchmarks.md, "int8 decoding" and "Lexical shortlists",
has the figures.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

import rnnsearch
from benchmarks.bench import rnnsearch_translate
from benchmarks.common import cpu_name, print_result
from rnnsearch.engine.accel.quantize import int8_engine
from rnnsearch.engine.decode.evaluate import score_corpus
from rnnsearch.io import read_aligned

# kind -> (what rnnsearch.load quantizes, the precision translate runs in, over the shortlist,
# the int8 engine: "" for the one chosen for this CPU)
KINDS = {"fp32": ("none", "fp32", False, ""), "int8": ("int8", "fp32", False, ""),
         "int8-x86": ("int8", "fp32", False, "x86"), "bf16": ("none", "bf16", False, ""),
         "fp32+shortlist": ("none", "fp32", True, ""), "int8+shortlist": ("int8", "fp32", True, "")}


def load(model: str, quantize: str, shortlist: str | None, engine: str):
    """rnnsearch.load, the int8 weights packed by `engine` where one is named."""
    with mock.patch.dict(os.environ, {"RNNSEARCH_INT8_ENGINE": engine} if engine else {}):
        return rnnsearch.load(model, device="cpu", quantize=quantize, shortlist=shortlist)


def coverage(translator, src: list[str], ref: list[str]) -> dict:
    """Share of the references' target pieces on their sentence's shortlist, and the lists' size."""
    from rnnsearch.engine.data.parallel import pad

    ids = [translator.source_ids(s) or [1] for s in src]
    batch = pad(ids)
    allowed = translator.shortlist.allowed(batch, batch != 0, len(translator.tgt_tok))
    hit = total = 0
    for k, r in enumerate(ref):
        wanted = translator.target_ids(r)
        hit += int(allowed[k, wanted].sum()) if wanted else 0
        total += len(wanted)
    size = float(allowed.sum(1).float().mean())
    return {"coverage": round(hit / max(total, 1), 4), "mean_ids": round(size, 1),
            "vocabulary": len(translator.tgt_tok)}


def peak_rss_mb(model: str, kind: str, beam: int, src: list[str], ref: list[str], shortlist: str,
                threads: int, work: Path) -> float:
    """Peak RSS (MB) of `rnnsearch evaluate` decoding src with `kind` in a process of its own."""
    quantize, precision, short, engine = KINDS[kind]
    files = [work / "src.txt", work / "ref.txt"]
    for path, lines in zip(files, (src, ref)):
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    env = {"OMP_NUM_THREADS": str(threads), **({"RNNSEARCH_INT8_ENGINE": engine} if engine else {})}
    done = rnnsearch_translate(model, files[0], files[1], work / "hyp.txt", beam, precision, quantize,
                               shortlist if short else None, batch=None, env=env)
    return round(done["peak_rss_mb"], 1)


def timed_rounds(loaded: dict, kinds: list[str], beams: list[int], rounds: int, src: list[str]):
    """Each round decodes src with every kind and beam, the kinds in rotating order: the seconds
    each took, per (kind, beam), and the last round's translations."""
    seconds: dict = {(k, b): [] for k in kinds for b in beams}
    hyps: dict = {}
    for r in range(rounds):
        order = kinds[r % len(kinds):] + kinds[: r % len(kinds)]  # each kind first in turn
        for beam in beams:
            for kind in order:
                quantize, precision, short, engine = KINDS[kind]
                start = time.perf_counter()
                out = loaded[quantize, short, engine].translate(src, beam=beam, attention=False,
                                                                precision=precision)
                seconds[kind, beam].append(time.perf_counter() - start)
                hyps[kind, beam] = [t.text for t in out]
    return seconds, hyps


def profile_kinds(loaded: dict, kinds: list[str], beams: list[int], src: list[str], path: str) -> None:
    """Each kind and beam decodes src once more under torch.profiler; the operator tables (by self
    CPU time) go to `path`, a section each."""
    from torch.profiler import ProfilerActivity, profile

    parts = []
    for beam in beams:
        for kind in kinds:
            quantize, precision, short, engine = KINDS[kind]
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                loaded[quantize, short, engine].translate(src, beam=beam, attention=False,
                                                          precision=precision)
            table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30)
            parts.append(f"## {kind}, beam {beam}, {len(src)} sentences\n{table}\n")
    Path(path).write_text("\n".join(parts), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a model directory written by rnnsearch train")
    ap.add_argument("--src", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sentences", type=int, default=0, help="first N test sentences (0: all)")
    ap.add_argument("--kinds", nargs="+", choices=list(KINDS), default=["fp32", "int8"],
                    help="what to decode with; fp32 is always among them (the baseline)")
    ap.add_argument("--shortlist", default="auto", help="for the +shortlist kinds: a file or auto")
    ap.add_argument("--profile", metavar="FILE",
                    help="operator tables of one more decode with each kind and beam")
    ap.add_argument("--peak-rss", action="store_true",
                    help="also each kind's peak resident memory, decoding in a process of its own")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    src, ref = read_aligned(args.src, args.ref)
    if args.sentences:
        src, ref = src[: args.sentences], ref[: args.sentences]
    kinds = ["fp32"] + [k for k in dict.fromkeys(args.kinds) if k != "fp32"]
    peaks = {}
    if args.peak_rss:
        with tempfile.TemporaryDirectory() as work:
            peaks = {(kind, beam): peak_rss_mb(args.model, kind, beam, src, ref, args.shortlist,
                                               args.threads, Path(work))
                     for beam in args.beams for kind in kinds}
    loaded = {(q, short, engine): load(args.model, q, args.shortlist if short else None, engine)
              for q, _, short, engine in {KINDS[k] for k in kinds}}
    seconds, hyps = timed_rounds(loaded, kinds, args.beams, args.rounds, src)
    if args.profile:
        profile_kinds(loaded, kinds, args.beams, src, args.profile)
    result: dict = {"model": args.model, "sentences": len(src), "threads": args.threads,
                    "rounds": args.rounds, "machine": cpu_name(), "torch": torch.__version__,
                    "quantized_engine": int8_engine()[0],
                    "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv)}
    short = next((t for (q, s, e), t in loaded.items() if s), None)
    if short is not None:
        result["shortlist"] = {**coverage(short, src, ref), "source": short.shortlist.meta["source"],
                               "frequent": short.shortlist.meta["frequent"],
                               "per_source": short.shortlist.meta["per_source"]}
    for beam in args.beams:
        row: dict = {}
        for kind in kinds:
            s = statistics.median(seconds[kind, beam])
            row[kind] = {"sent_per_s": round(len(src) / s, 1),
                         "bleu": round(score_corpus(hyps[kind, beam], ref)["bleu"], 2)}
        for kind in kinds[1:]:  # each against fp32: speed-up, BLEU difference, identical outputs
            same = sum(a == b for a, b in zip(hyps["fp32", beam], hyps[kind, beam]))
            row[kind].update(speedup=round(row[kind]["sent_per_s"] / row["fp32"]["sent_per_s"], 3),
                             bleu_delta=round(row[kind]["bleu"] - row["fp32"]["bleu"], 2),
                             identical_translations=round(same / max(len(src), 1), 3))
        for kind in kinds:
            if (kind, beam) in peaks:
                row[kind]["peak_rss_mb"] = peaks[kind, beam]
        result[f"beam{beam}"] = row
    print_result(result)


if __name__ == "__main__":
    main()
