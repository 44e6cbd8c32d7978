"""`rnnsearch plot-attention`, `explore` and `align`: attention as pictures and alignments."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rnnsearch.cli.common import add_links, flag, links_of, read_input
from rnnsearch.config import ConfigError
from rnnsearch.io import DataError, atomic_write_text, check_aligned, read_aligned


def add_attention_views(sub) -> None:
    for name, help_text, out_help in (
            ("plot-attention", "heat maps of attention (paper Figure 3), PNG or SVG",
             "FILE.png or FILE.svg (FILE-N.ext for several sentences)"),
            ("explore", "interactive alignment explorer: one self-contained HTML page", "page.html")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--model", required=True)
        p.add_argument("--input", required=True, help="source sentences, one a line")
        p.add_argument("--out", required=True, help=out_help)
        p.add_argument("--lines", help="comma-separated 1-based line numbers (default: all non-empty)")
        p.add_argument("--target",
                       help="show attention while forced to these translations (teacher forcing)")
        p.add_argument("--beam", type=int, help="beam size (default: the model's decode.beam)")
        p.add_argument("--subwords", action="store_true",
                       help="keep subword pieces (default: merge to words)")
        p.add_argument("--device", default="auto")
        if name == "explore":
            p.add_argument("--lang", default="en", choices=["en", "zh"], help="page labels")
            p.add_argument("--beam-trace", action="store_true",
                           help="draw each sentence's beam search as a tree below, step by step "
                           "(subword pieces; engine/decode/beamtrace.py)")
        p.set_defaults(func=cmd_plot_attention if name == "plot-attention" else cmd_explore)


def attention_records(args) -> tuple[list[int], list[dict]]:
    """Attention of the chosen input lines (translated, or forced to --target), word-level
    unless --subwords. Returns (1-based line numbers, records in the SPEC JSON form)."""
    from rnnsearch.engine.align.links import merge_subwords
    from rnnsearch.engine.decode.loading import load
    from rnnsearch.io import read_lines

    model = load(args.model, device=args.device)
    sources = read_input(args.input)
    picked = _picked(args, sources)
    targets = None
    if args.target:
        targets = read_lines(args.target)
        check_aligned((args.input, sources), (args.target, targets))
    picked = [n for n in picked if sources[n - 1].strip()]
    if targets is not None:
        forced = model.force([sources[n - 1] for n in picked], [targets[n - 1] for n in picked])
        results = []
        for n, weights in zip(picked, forced):
            results.append((weights, *model.labels(sources[n - 1], targets[n - 1])))
    else:
        options = model.options(name=flag, beam=args.beam, n_best=1)
        translations = model.translate([sources[n - 1] for n in picked], options)
        results = [(t.attention, t.source_tokens, t.tokens + ["</s>"]) for t in translations]
    records = []
    for weights, src_tokens, tgt_tokens in results:
        if weights is None:
            raise DataError(f"{args.model}: an RNNencdec model has no attention to show")
        if not args.subwords:
            weights, src_tokens, tgt_tokens = merge_subwords(weights, src_tokens, tgt_tokens)
        records.append({"source": src_tokens, "target": tgt_tokens, "weights": weights})
    return picked, records


def _picked(args, sources: list[str]) -> list[int]:
    """The 1-based numbers of the lines --lines chooses (default: all non-empty)."""
    if args.lines:
        picked = [int(x) for x in args.lines.split(",")]
        bad = [n for n in picked if not 1 <= n <= len(sources)]
        if bad:
            raise DataError(f"{args.input}: --lines {bad[0]} is outside 1..{len(sources)}")
        return picked
    return [n for n in range(1, len(sources) + 1) if sources[n - 1].strip()]


def traced_records(args) -> list[dict]:
    """explore --beam-trace: the chosen lines' beam searches (engine/decode/beamtrace.py), each
    with the best translation's attention."""
    from rnnsearch.engine.decode.beamtrace import beam_traces
    from rnnsearch.engine.decode.loading import load

    if args.target:
        raise ConfigError("explore: --beam-trace draws the search for a translation, and --target gives "
                          "the translation: choose one")
    model = load(args.model, device=args.device)
    sources = read_input(args.input)
    picked = [n for n in _picked(args, sources) if sources[n - 1].strip()]
    records = beam_traces(model, [sources[n - 1] for n in picked], model.options(name=flag, beam=args.beam,
                                                                              n_best=1))
    for n, record in zip(picked, records):
        record["line"] = n
    return records


def cmd_plot_attention(args) -> None:
    from rnnsearch.tools.plotting import plot_attention

    picked, records = attention_records(args)
    out = Path(args.out)
    written = []
    for n, r in zip(picked, records):
        path = out if len(picked) == 1 else out.with_name(f"{out.stem}-{n}{out.suffix}")
        written.append(str(plot_attention(r["weights"], r["source"], r["target"], path)))
    print("\n".join(written))


def cmd_explore(args) -> None:
    from rnnsearch.tools.explorer import write_explorer

    records = traced_records(args) if args.beam_trace else attention_records(args)[1]
    try:
        print(write_explorer(args.out, records, args.lang))
    except ValueError as e:
        raise DataError(f"{args.input}: {e}") from None


def add_align(sub) -> None:
    p = sub.add_parser("align",
                       help="word alignments from attention (teacher forcing), Pharaoh out; AER vs gold")
    p.add_argument("--model", required=True, action="append", metavar="DIR",
                   help="the model; repeat it for an ensemble: the models' word-level weights are "
                        "averaged cell by cell before links are made (each may have its own tokenizer)")
    p.add_argument("--src", required=True, help="source sentences, whitespace-tokenised words")
    p.add_argument("--tgt", required=True, help="their translations, whitespace-tokenised words")
    p.add_argument("--method", default="argmax", choices=["argmax", "threshold"])
    p.add_argument("--threshold", type=float, default=0.3, help="threshold method: weight for a link")
    p.add_argument("--shift", type=int, choices=[0, 1],
                   help="1: link target word y_i by alpha_{i+1} (computed after the decoder read y_i) "
                        "instead of alpha_i (computed from s_{i-1}, before it); choose on held-out data "
                        "(default: the shift the models were guided with, train.guided_alignment_shift)")
    add_links(p, "the weights links are made from")
    p.add_argument("--reverse-model", metavar="DIR", action="append",
                   help="a model of the other direction (tgt->src): align both ways and symmetrise "
                        "(repeat it for an ensemble, as --model)")
    p.add_argument("--symmetrize", default="grow-diag-final-and",
                   choices=["intersection", "union", "grow-diag-final-and", "soft"],
                   help="with --reverse-model: how the two directions combine. The first three "
                        "combine each direction's hard links (--method); soft combines the "
                        "attention itself (geometric mean of the two weights of a link) and links "
                        "words that are each other's best, with --method threshold also every "
                        "weight over --threshold")
    p.add_argument("--gold", help="gold alignments: print AER, precision, recall")
    p.add_argument("--gold-format", default="pharaoh", choices=["pharaoh", "naacl"],
                   help="naacl: 'SENT EN FR S|P' lines, English first (source = French)")
    p.add_argument("--strip-accents", action="store_true",
                   help="remove accents (for accent-free training data)")
    p.add_argument("--out", help="write the Pharaoh alignments here (default: stdout unless --gold)")
    p.add_argument("--device", default="auto")
    p.set_defaults(func=cmd_align)


def _word_attention(model_dirs: list[str], sources: list[str], targets: list[str], args,
                    where: str) -> tuple[list, int]:
    """Teacher-forced word attention per pair, averaged over the models in `model_dirs`, and the
    row that links y_i in it: --shift, else the one the models were guided with (their
    Translator.link_shift, which must agree)."""
    from rnnsearch.engine.align.links import mean_weights, word_attention
    from rnnsearch.engine.decode.loading import load

    links, runs, shifts = links_of(args, "align"), [], set()
    for d in model_dirs:
        model = load(d, device=args.device)
        model.options(name=flag, links=links)  # a head the model lacks: named before any work
        runs.append(word_attention(model, sources, targets, where, links=links))
        shifts.add(model.link_shift(links))
    if args.shift is None and len(shifts) > 1:
        raise ConfigError(f"align: the models {', '.join(model_dirs)} were guided with different shifts "
                          "(train.guided_alignment_shift): give --shift")
    return mean_weights(runs), args.shift if args.shift is not None else shifts.pop()


def _plain(text: str) -> str:
    """The text without accents (combining marks removed after NFD)."""
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def cmd_align(args) -> None:
    from rnnsearch.engine.align.links import (
        aer,
        attention_links,
        flip,
        format_pharaoh,
        read_naacl,
        read_pharaoh_file,
        soft_links,
        symmetrize,
    )
    src, tgt = read_aligned(args.src, args.tgt)
    src_in, tgt_in = src, tgt
    if args.strip_accents:
        src_in, tgt_in = [_plain(s) for s in src], [_plain(t) for t in tgt]
    words, shift = _word_attention(args.model, src_in, tgt_in, args, args.src)
    hard = (args.method, args.threshold)
    back, back_shift = None, shift
    if args.reverse_model:
        back, back_shift = _word_attention(args.reverse_model, tgt_in, src_in, args, args.tgt)
    if back is None:
        links = [attention_links(w, *hard, shift) for w in words]
    elif args.symmetrize == "soft":
        links = [soft_links(f, b, *hard, shift, back_shift) for f, b in zip(words, back)]
    else:
        links = [symmetrize(attention_links(f, *hard, shift), flip(attention_links(b, *hard, back_shift)),
                            args.symmetrize) for f, b in zip(words, back)]
    text = "\n".join(format_pharaoh(x) for x in links) + "\n"
    if args.out:
        atomic_write_text(args.out, text)
    elif not args.gold:
        sys.stdout.write(text)
    if args.gold:
        read = read_naacl if args.gold_format == "naacl" else read_pharaoh_file
        sure, possible = read(args.gold, len(src))
        scores = aer(links, sure, possible)
        scores.update(method=args.method, shift=shift, sentences=len(src))
        if args.method == "threshold":
            scores["threshold"] = args.threshold
        if args.reverse_model:
            scores["symmetrize"] = args.symmetrize
        if len(args.model) > 1 or len(args.reverse_model or ()) > 1:
            scores["ensemble"] = [len(args.model), len(args.reverse_model or ())]
        chosen = links_of(args, "align")
        if chosen:
            scores["weights"] = {"saliency": "saliency", "mean": "attention+saliency"}.get(chosen, chosen)
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in scores.items()}
        print(json.dumps(shown, indent=2))
