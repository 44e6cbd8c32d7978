"""The research-decoding measurements of docs/decoding.md, each on trained models and a test set,
one JSON object printed (and written to --out), with the machine:

    python -m benchmarks.research_decoding ensemble --model A --model B --model C --model D \
        --src data/multi30k/test_2016_flickr.de.gz --ref data/multi30k/test_2016_flickr.en.gz
    python -m benchmarks.research_decoding constraints --model A --src ... --ref ...
    python -m benchmarks.research_decoding penalties --model E --src ... --ref ... [--sentences 3000]

ensemble     each model alone, the first two and all of them as an ensemble: BLEU and seconds,
             greedy and beam 5, on one thread (an ensemble of N should cost at most N × one model).
constraints  per sentence one phrase of 1–3 words drawn (seeded) from its reference, as Post & Vilar
             (2018) test: the share of phrases present in the output, BLEU with and without, and
             the time of beam 5 unconstrained against constrained beam 5 (target ≤ 2×) and 10.
penalties    BLEU by source length (the paper's Figure 2 buckets) with the length penalty
             (power, GNMT) and the coverage penalty β on and off: under-translation of long inputs
             is what the coverage penalty is for.
"""

from __future__ import annotations

import argparse
import datetime
import random
import re
import sys
import time
from pathlib import Path

import torch

import rnnsearch
from benchmarks.common import cpu_features, cpu_name, log, print_result
from rnnsearch.engine.decode.evaluate import bleu_by_length, score_corpus
from rnnsearch.io import read_lines


def _timed(model, src: list[str], **options) -> tuple[list[str], float]:
    start = time.perf_counter()
    out = [t.text for t in model.translate(src, attention=False, workers=1, **options)]
    return out, round(time.perf_counter() - start, 2)


def ensemble(args, src, ref) -> dict:
    rows = []
    systems = [[m] for m in args.model] + [args.model[:2]] + ([args.model] if len(args.model) > 2 else [])
    for dirs in systems:
        model = rnnsearch.load(dirs, device="cpu")
        for beam in (1, 5):
            hyp, seconds = _timed(model, src, beam=beam, precision=args.precision)
            rows.append({"models": [Path(d).name for d in dirs], "beam": beam, "seconds": seconds,
                         "bleu": score_corpus(hyp, ref)["bleu"], "chrf": score_corpus(hyp, ref)["chrf"]})
            log(f"{rows[-1]}")
    for beam in (1, 5):
        alone = [r for r in rows if r["beam"] == beam and len(r["models"]) == 1]
        for r in rows:
            if r["beam"] == beam and len(r["models"]) > 1:
                members = [a for a in alone if a["models"][0] in r["models"]]
                r["bleu_gain_over_best_member"] = round(r["bleu"] - max(a["bleu"] for a in members), 2)
                r["time_over_sum_of_members"] = round(r["seconds"] / sum(a["seconds"] for a in members), 3)
    return {"rows": rows}


def reference_phrases(refs: list[str], seed: int) -> list[list[str]]:
    """One phrase of 1–3 consecutive words a reference (words with a letter or digit at each end),
    seeded."""
    rng = random.Random(seed)
    out = []
    for ref in refs:
        words = ref.split()
        n = rng.choice((1, 2, 3))
        spans = [words[i:i + n] for i in range(len(words) - n + 1)
                 if words[i][0].isalnum() and words[i + n - 1][-1].isalnum()]
        out.append([" ".join(rng.choice(spans))] if spans else [])
    return out


def constraints(args, src, ref) -> dict:
    model = rnnsearch.load(args.model[0], device="cpu")
    phrases = reference_phrases(ref, args.seed)
    rows = []
    for beam, given in ((5, None), (5, phrases), (10, phrases), (10, None)):
        start = time.perf_counter()
        out = model.translate(src, attention=False, workers=1, beam=beam, precision=args.precision,
                              constraints=given)
        seconds = round(time.perf_counter() - start, 2)
        rows.append({"beam": beam, "constraints": given is not None, "seconds": seconds,
                     "time_over_unconstrained_beam5": round(seconds / rows[0]["seconds"], 3) if rows else 1.0,
                     **_scores(model, out, ref, phrases)})
        log(f"{rows[-1]}")
    words = {str(n): sum(1 for p in phrases if p and len(p[0].split()) == n) for n in (1, 2, 3)}
    return {"phrases": sum(len(p) for p in phrases), "phrases_by_words": words, "rows": rows}


def _scores(model, translations, ref: list[str], phrases: list[list[str]]) -> dict:
    """BLEU, chrF, and how many phrases the output holds: as words of the text (not inside
    another word; punctuation may touch them) and as the model's pieces (what the search forces)."""
    hyp = [t.text for t in translations]
    words = sum(bool(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", h))
                for h, ps in zip(hyp, phrases) for p in ps)
    pieces = sum(_holds(t.tokens, model.tgt_tok.pieces(model.target_ids(p)))
                 for t, ps in zip(translations, phrases) for p in ps)
    total = sum(len(ps) for ps in phrases)
    s = score_corpus(hyp, ref)
    return {"bleu": s["bleu"], "chrf": s["chrf"], "phrases_in_words": words, "phrases_in_pieces": pieces,
            "phrases_in_pieces_share": round(pieces / max(total, 1), 4)}


def _holds(tokens: list[str], phrase: list[str]) -> bool:
    return any(tokens[i:i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


def penalties(args, src, ref) -> dict:
    model = rnnsearch.load(args.model[0], device="cpu")
    edges = [int(x) for x in args.buckets.split(",")]
    settings = [_setting(s) for s in args.setting] if args.setting else [
        dict(alpha=1.0), dict(alpha=1.0, coverage=0.2), dict(alpha=1.0, coverage=0.4),
        dict(alpha=0.6, length_penalty="gnmt"), dict(alpha=0.6, length_penalty="gnmt", coverage=0.2),
        dict(alpha=0.0)]
    rows = []
    for s in settings:
        start = time.perf_counter()
        hyp = [t.text for t in model.translate(src, attention=False, beam=5, precision=args.precision,
                                               workers=args.workers, **s)]
        seconds = round(time.perf_counter() - start, 2)
        ratio = sum(len(h.split()) for h in hyp) / max(1, sum(len(r.split()) for r in ref))
        rows.append({**s, "seconds": seconds, "bleu": score_corpus(hyp, ref)["bleu"],
                     "length_ratio": round(ratio, 4),
                     "by_length": [{k: b[k] for k in ("bucket", "sentences", "bleu") if k in b}
                                   for b in bleu_by_length(src, hyp, ref, edges)]})
        log(f"{s}: {rows[-1]['bleu']} {[b['bleu'] for b in rows[-1]['by_length']]}")
    return {"rows": rows}


def _setting(text: str) -> dict:
    """--setting alpha=0.6,length_penalty=gnmt -> {"alpha": 0.6, "length_penalty": "gnmt"}."""
    out: dict = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            out[key] = value
    return out


MEASURES = {"ensemble": ensemble, "constraints": constraints, "penalties": penalties}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["ensemble", "constraints", "penalties"])
    p.add_argument("--model", action="append", required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--sentences", type=int, default=0, help="the first N of the test set (0: all)")
    p.add_argument("--precision", default="auto")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--buckets", default="10,20,30,40,50,60")
    p.add_argument("--setting", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="penalties: the decoding options of one run (repeatable; default: the six above)")
    p.add_argument("--out", type=Path)
    p.add_argument("--note", default="", help="the run's conditions, kept in the record (e.g. what else ran)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    src, ref = read_lines(args.src), read_lines(args.ref)
    if args.sentences:
        src, ref = src[: args.sentences], ref[: args.sentences]
    result = {"benchmark": f"research_decoding {args.what}", "command": " ".join(sys.argv),
              "date": datetime.date.today().isoformat(), "cpu": cpu_name(), "cpu_features": cpu_features(),
              "threads": 1, "torch": torch.__version__, "sentences": len(src), "note": args.note,
              **MEASURES[args.what](args, src, ref)}
    print_result(result, *([args.out] if args.out else []), ensure_ascii=False)


if __name__ == "__main__":
    main()
