"""`rnnsearch score`: log p(target | source) of given translations (engine/decode/scoring.py)."""

from __future__ import annotations

import json
import sys

from rnnsearch.cli.common import flag
from rnnsearch.config import DECODE_PRECISIONS
from rnnsearch.io import DataError, atomic_write_text, read_lines


def add_score(sub) -> None:
    p = sub.add_parser("score", help="log p(target | source) of given translations, one JSON line a pair",
                       description="Forced decoding: each target line scored as the translation of its "
                       "source line. Prints per pair log_prob (summed over the target's pieces and </s>), "
                       "per_token (their mean), normalised (log_prob / tokens**alpha, the search's "
                       "ranking score) and tokens; --per-token adds each piece's log-probability.")
    p.add_argument("--model", required=True, help="a model directory written by rnnsearch train (A,B: "
                   "an ensemble, its per-token mixture)")
    p.add_argument("--src", required=True, help="source sentences, one a line (plain or .gz)")
    p.add_argument("--tgt", required=True, help="their translations, one a line, as many as --src")
    p.add_argument("--output", help="write the JSON lines here (default: standard output)")
    p.add_argument("--per-token", action="store_true", help="each target piece and its log-probability")
    p.add_argument("--attention", action="store_true", help="the attention rows, one a target piece")
    p.add_argument("--alpha", type=float, help="length normalisation of `normalised` (default: decode.alpha)")
    p.add_argument("--batch-size", type=int, default=64, help="pairs scored at once")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=list(DECODE_PRECISIONS),
                   help="bf16 matrix products; auto: bf16 only where it measures faster here (default: "
                   "decode.precision)")
    p.set_defaults(func=cmd_score)


def cmd_score(args) -> None:
    from rnnsearch.engine.decode.loading import load

    sources, targets = read_lines(args.src), read_lines(args.tgt)
    if len(sources) != len(targets):
        raise DataError(f"score: {args.src} has {len(sources):,} lines but {args.tgt} has {len(targets):,}: "
                        "each target line is the translation of the source line beside it")
    if args.batch_size < 1:
        raise DataError(f"score: --batch-size must be at least 1, got {args.batch_size}")
    model = load(args.model, device=args.device)
    options = model.options(name=flag, alpha=args.alpha, precision=args.precision)
    scores = model.score(sources, targets, options, per_token=args.per_token, attention=args.attention,
                         batch_size=args.batch_size)
    text = "".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in scores)
    if args.output:
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
