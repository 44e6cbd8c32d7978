"""`rnnsearch translate` and `evaluate`: using models."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Optional

from rnnsearch.cli.common import add_batching, add_links, add_quantize, flag, links_of, read_input
from rnnsearch.config import DECODE_PRECISIONS, ConfigError
from rnnsearch.engine.align.links import format_pharaoh, format_soft, hard_links, read_lexicon
from rnnsearch.io import DataError, atomic_write_text, check_aligned, read_aligned, read_lines

log = logging.getLogger("rnnsearch")


def add_translate(sub) -> None:
    p = sub.add_parser("translate", help="translate lines from stdin or a file")
    p.add_argument("--model", required=True, action="append",
                   help="model directory; repeat it (or join directories by commas) for an ensemble: the "
                   "models' probabilities averaged at every step (docs/decoding.md, \"Ensembles\")")
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's decode.beam)")
    p.add_argument("--n-best", type=int,
                   help="print N hypotheses per line as index<TAB>score<TAB>text (default: decode.n_best)")
    p.add_argument("--sample", type=int, metavar="N",
                   help="draw N translations a line from the model instead of searching (printed as "
                   "--n-best prints; engine/decode/sampling.py; default: decode.sample, 0: search)")
    p.add_argument("--temperature", type=float, help="--sample: p^(1/T), renormalised (default 1)")
    p.add_argument("--top-k", type=int, help="--sample: only the K most probable words (default 0: all)")
    p.add_argument("--top-p", type=float, help="--sample: only the nucleus of mass P (default 1: all)")
    p.add_argument("--seed", type=int, help="--sample: the draws' seed (default 0)")
    p.add_argument("--length-penalty", choices=["power", "gnmt"],
                   help="hypotheses ranked by log p / len**alpha (power) or GNMT's ((5 + len) / 6)**alpha")
    p.add_argument("--coverage", type=float, metavar="BETA",
                   help="GNMT's coverage penalty β Σ_j log min(Σ_i α_ij, 1) in the ranking (default 0: none)")
    p.add_argument("--prefix", metavar="FILE",
                   help="line k: the words translation k must start with (as many lines as the input)")
    p.add_argument("--constraints", metavar="FILE",
                   help="line k: the phrases translation k must contain, tab-separated (an empty line: "
                   "none), by dynamic beam allocation (engine/decode/constraints.py; best with --beam above "
                   "the number of constraint pieces)")
    add_batching(p)
    p.add_argument("--attention", metavar="FILE.jsonl",
                   help="write attention of the best hypotheses as JSON lines")
    p.add_argument("--beam-trace", metavar="FILE.json",
                   help="also write each line's search step by step (the beam's hypotheses, scores, "
                   "parents, attention) as JSON; rnnsearch explore --beam-trace draws it (docs/decoding.md)")
    p.add_argument("--alignment", nargs="?", const="hard", choices=["hard", "soft"],
                   help="append ' ||| ' and the links to every output line: hard (the default), "
                   "Pharaoh i-j pairs, source word i, target word j, 0-based, one per target word; "
                   "soft, j:i=w,i=w groups of attention weights (docs/alignment.md)")
    add_links(p, "the links (--alignment, --format html, --replace-unk)")
    p.add_argument("--alignment-shift", type=int, choices=[0, 1],
                   help="1: link target word y_i by alpha_{i+1} instead of alpha_i; also for --replace-unk "
                   "(default: the model's train.guided_alignment_shift, 0 for an unguided model: better "
                   "on the Hansards trial sentences; docs/alignment.md)")
    p.add_argument("--subwords", action="store_true",
                   help="with --alignment: link subword pieces (indices over pieces), not words")
    p.add_argument("--replace-unk", action="store_true",
                   help="replace each unknown output word (<unk>, or sentencepiece's ⁇) by the "
                   "--lexicon translation of its linked source word, else that word copied")
    p.add_argument("--lexicon", metavar="FILE.tsv",
                   help="with --replace-unk: source_word<TAB>target_word<TAB>probability lines (the "
                   "lexicon.tsv of rnnsearch data align); the most probable target is used")
    p.add_argument("--format", choices=["text", "html"], default="text",
                   help="html: the input lines may hold inline tags (<b>, <a href=...>, <br/>, entities); "
                   "each tag pair is put around the target words aligned to the words it enclosed, "
                   "the output always well-formed (engine/decode/markup.py)")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=list(DECODE_PRECISIONS),
                   help="bf16 matrix products; auto: bf16 only where it measures faster here (default: "
                   "decode.precision)")
    add_quantize(p)
    p.set_defaults(func=cmd_translate)


def cmd_translate(args) -> None:
    from rnnsearch.engine.decode.beamtrace import beam_traces, write_beam_traces
    from rnnsearch.engine.decode.loading import load
    from rnnsearch.engine.decode.translator import write_attention_jsonl

    if args.lexicon and not args.replace_unk:
        raise ConfigError("translate: --lexicon is the table of --replace-unk: give both")
    if args.subwords and not args.alignment:
        raise ConfigError("translate: --subwords chooses the units of --alignment: give both")
    lexicon = read_lexicon(args.lexicon) if args.lexicon else None
    links = links_of(args, "translate")
    model = load(args.model, device=args.device, quantize=args.quantize, cuda_graphs=args.cuda_graphs,
                     shortlist=args.shortlist, plain=args.plain)
    options = model.options(name=flag, beam=args.beam, n_best=args.n_best, batch_size=args.batch_size,
                            workers=args.workers, precision=args.precision, links=links,
                            sample=args.sample, temperature=args.temperature, top_k=args.top_k,
                            top_p=args.top_p, seed=args.seed, length_penalty=args.length_penalty,
                            coverage=args.coverage)
    linked = args.alignment or args.replace_unk or args.format == "html"  # these read the attention
    if linked and model.cfg.model.arch != "rnnsearch":
        flag_ = "--alignment" if args.alignment else "--replace-unk" if args.replace_unk else "--format html"
        raise ConfigError(f"translate: {flag_} reads the attention, and {args.model[0]} is an RNNencdec "
                          "model: it has none")
    lines = read_input(args.input)
    if args.beam_trace and (args.format == "html" or options.sample or args.prefix or args.constraints):
        raise ConfigError("translate: --beam-trace records the beam search of plain lines: not with "
                          "--format html, --sample, --prefix or --constraints")
    if args.format == "html" and (args.prefix or args.constraints):
        raise ConfigError("translate: --format html translates the text between tags: not with --prefix "
                          "or --constraints")
    traces = beam_traces(model, lines, options) if args.beam_trace else None  # a too long line: before output
    if args.format == "html":
        return write_output(args.output, translate_html(model, lines, args, lexicon, options))
    nbests = model.translate_n_best(lines, options, attention=bool(args.attention or linked),
                                    prefixes=read_prefixes(args.prefix, len(lines)) if args.prefix else None,
                                    constraints=read_constraints(args.constraints, len(lines))
                                    if args.constraints else None)
    n_best = options.sample or options.n_best
    if args.replace_unk:
        nbests = [[t.replace_unk(lexicon, args.alignment_shift, model.cfg.data.lowercase) for t in nb]
                  for nb in nbests]
    out = []
    for i, nb in enumerate(nbests):
        for t in nb:
            line = t.text
            if args.alignment:
                line += " ||| " + alignment_text(t, args.alignment, args.subwords, args.alignment_shift)
            out.append(f"{i}\t{t.score:.4f}\t{line}" if n_best > 1 else line)
    write_output(args.output, out)
    if args.attention:
        write_attention_jsonl(args.attention, [nb[0] for nb in nbests])
    if traces is not None:
        write_beam_traces(args.beam_trace, traces)


def read_prefixes(path: str, count: int) -> list[Optional[str]]:
    """--prefix FILE: one line per input line, none of them empty."""
    prefixes = read_lines(path)
    if len(prefixes) != count:
        raise DataError(f"{path}: {len(prefixes):,} prefix lines for {count:,} input lines: one a line")
    blank = next((k for k, line in enumerate(prefixes) if not line.strip()), None)
    if blank is not None:
        raise DataError(f"{path}, line {blank + 1}: an empty prefix (each line starts its translation)")
    return list(prefixes)


def read_constraints(path: str, count: int) -> list[Optional[list[str]]]:
    """--constraints FILE: one line per input line, its phrases tab-separated (an empty line: none)."""
    lines = read_lines(path)
    if len(lines) != count:
        raise DataError(f"{path}: {len(lines):,} constraint lines for {count:,} input lines: one a line")
    out: list[Optional[list[str]]] = []
    for k, line in enumerate(lines, 1):
        phrases = line.split("\t") if line.strip() else []
        empty = next((n for n, p in enumerate(phrases, 1) if not p.strip()), None)
        if empty is not None:
            raise DataError(f"{path}, line {k}: phrase {empty} is empty (phrases are separated by one tab)")
        out.append([p.strip() for p in phrases])
    return out


def write_output(path: Optional[str], lines: list[str]) -> None:
    """The output lines to `path` (atomically) or to stdout."""
    text = "\n".join(lines) + ("\n" if lines else "")
    if path:
        atomic_write_text(path, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def translate_html(model, lines: list[str], args, lexicon, options) -> list[str]:
    """``translate --format html``: the lines' text translated, their tags carried across by the
    translation's word links (engine/decode/markup.py); --replace-unk applies to the text."""
    from rnnsearch.engine.decode.markup import translate_markup

    if options.n_best > 1 or options.sample > 1 or args.alignment or args.attention or args.prefix:
        raise ConfigError("translate: --format html writes one translated line per input line; it does "
                          "not combine with --n-best, --sample, --alignment, --attention or --prefix")

    def translate(plain: list[str]) -> list[tuple[str, list[tuple[int, int]]]]:
        results = model.translate(plain, options, attention=True)
        if args.replace_unk:
            lowercase = model.cfg.data.lowercase
            results = [t.replace_unk(lexicon, args.alignment_shift, lowercase) for t in results]
        return [(t.text, t.links(shift=args.alignment_shift) or []) for t in results]

    return translate_markup(lines, translate)


def alignment_text(t, kind: str, subwords: bool, shift: int | None) -> str:
    """What follows " ||| " on a line of ``translate --alignment``: Pharaoh links (hard) or
    alignment.format_soft's groups (soft); empty where the translation has no attention.
    `shift` None: the model's (Translation.shift)."""
    rows = t.alignment_weights(subwords, shift)
    if rows is None:
        return ""
    if kind == "soft":
        return format_soft(rows)
    return format_pharaoh(hard_links(rows))


def add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate",
                       help="translate a test set and score it with sacrebleu (BLEU, chrF, TER, by length; "
                       "paired significance tests between systems)")
    p.add_argument("--model", action="append",
                   help="model directory (repeat to compare systems); directories joined by commas are "
                   "one system, their ensemble (A,B)")
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--hyp", action="append", help="score this hypothesis file instead (repeatable)")
    p.add_argument("--label", action="append", help="names of the systems, in order (models first)")
    p.add_argument("--beam", type=int, help="beam size (default: each model's decode.beam)")
    add_batching(p)
    p.add_argument("--tokenize", help="sacrebleu tokenizer (default: the model's data.bleu_tokenize, "
                   "else 13a; zh for Chinese)")
    p.add_argument("--by-length", action="store_true",
                   help="BLEU per source-length bucket (paper Figure 2)")
    p.add_argument("--buckets", default="10,20,30,40,50,60", help="bucket edges in source words")
    p.add_argument("--no-unk", action="store_true",
                   help="score only the sentences whose source and reference have no unknown word (paper "
                   "Table 1, 'No UNK'): no word outside a word vocabulary, no <unk> piece of a sentencepiece "
                   "model; the first --model's vocabulary picks them for every system")
    p.add_argument("--out", help="with --by-length: write by_length.csv/.json/.png here")
    p.add_argument("--output", help="write the translations here (one --model)")
    p.add_argument("--seed", type=int,
                   help="seed of the paired significance tests run with two or more systems (default "
                   "12345, sacrebleu's)")
    p.add_argument("--paired-bs-n", type=int,
                   help="paired bootstrap resamples (default 1000, sacrebleu's)")
    p.add_argument("--paired-ar-n", type=int,
                   help="approximate randomisation trials (default 10000, sacrebleu's)")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=list(DECODE_PRECISIONS),
                   help="bf16 matrix products while decoding (auto: where faster here)")
    add_quantize(p)
    p.set_defaults(func=cmd_evaluate)


def _model_systems(args, src: list[str], ref: list[str]) -> tuple[list[tuple[dict, list[str]]], str | None,
                                                                     list[int] | None]:
    """Each --model's translations of `src` with its entry; the BLEU tokenizer; with --no-unk, the
    positions of the sentences without an unknown word by the first model's vocabulary."""
    import time

    from rnnsearch.engine.decode.evaluate import no_unk_subset, score_corpus
    from rnnsearch.engine.decode.loading import load, model_dirs

    systems = []
    tokenize = args.tokenize  # default: the first model's data.bleu_tokenize (13a, or zh for Chinese)
    keep = None
    for model_dir in args.model or []:
        model = load(model_dir, device=args.device, quantize=args.quantize, cuda_graphs=args.cuda_graphs,
                     shortlist=args.shortlist, plain=args.plain)
        tokenize = tokenize or model.cfg.data.bleu_tokenize
        if args.no_unk and keep is None:
            keep = no_unk_subset(src, ref, model.source_ids, model.target_ids)
            log.info("--no-unk: %s of %s sentences have no unknown word in source or reference (by the "
                     "vocabulary of %s)", f"{len(keep):,}", f"{len(src):,}", model_dir)
        options = model.options(name=flag, beam=args.beam, batch_size=args.batch_size,
                                workers=args.workers, precision=args.precision, n_best=1)
        start = time.time()
        translations = model.translate(src, options, attention=False)
        seconds = time.time() - start
        hyp = [t.text for t in translations]
        entry = {"label": "+".join(d.name for d in model_dirs(model_dir)), "model": str(model_dir),
                 "beam": options.beam,
                 "precision": model.precision.resolve(options.precision), "quantize": args.quantize,
                 "shortlist": args.shortlist, "translate_seconds": round(seconds, 3),
                 "sentences_per_second": round(len(src) / max(seconds, 1e-9), 2)}
        if model.cfg.vocab.kind == "word" and not args.no_unk:  # the No-UNK score beside the full one
            own = no_unk_subset(src, ref, model.source_ids, model.target_ids)
            sub = score_corpus([hyp[i] for i in own], [ref[i] for i in own], tokenize)
            entry.update(bleu_no_unk=sub["bleu"], sentences_no_unk=len(own))
        systems.append((entry, hyp))
    return systems, tokenize, keep


def cmd_evaluate(args) -> None:
    from rnnsearch.engine.decode.evaluate import bleu_by_length, paired_significance, score_corpus
    from rnnsearch.tools.plotting import write_by_length

    src, ref = read_aligned(args.src, args.ref)
    if not args.model and not args.hyp:
        raise DataError("evaluate: give --model DIR or --hyp FILE (either may repeat)")
    if args.no_unk and not args.model:
        raise DataError("evaluate: --no-unk needs a --model: its vocabulary decides which words are unknown")
    labels = list(args.label or [])
    paired = _paired_options(args, len(args.model or []) + len(args.hyp or []))
    hyps = [(hyp_path, read_lines(hyp_path)) for hyp_path in args.hyp or []]
    for hyp_path, hyp in hyps:  # before any model translates
        check_aligned((hyp_path, hyp), (args.ref, ref))
    systems, tokenize, keep = _model_systems(args, src, ref)
    systems += [({"label": Path(hyp_path).name, "hyp": str(hyp_path)}, hyp) for hyp_path, hyp in hyps]
    results, scored = [], []
    for k, (entry, hyp) in enumerate(systems):
        if k < len(labels):
            entry["label"] = labels[k]
        s, h, r = (src, hyp, ref) if keep is None else ([x[i] for i in keep] for x in (src, hyp, ref))
        entry.update(score_corpus(h, r, tokenize), sentences=len(s))
        if keep is not None:
            entry.update(no_unk=True, sentences_total=len(src))
        if args.by_length:
            edges = [int(x) for x in args.buckets.split(",")]
            entry["by_length"] = bleu_by_length(s, h, r, edges, tokenize)
        results.append(entry)
        scored.append((entry["label"], h))
    if args.output:
        if len(systems) != 1:
            raise DataError("--output writes one system's translations: give one --model")
        atomic_write_text(args.output, "\n".join(systems[0][1]) + "\n")
    if args.by_length and args.out:
        for path in write_by_length(args.out, results):
            log.info("wrote %s", path)
    out: dict = {"systems": results}
    if paired is not None:  # each system against the first, on the sentences scored
        refs = ref if keep is None else [ref[i] for i in keep]
        out["significance"] = paired_significance(scored, refs, tokenize, **paired)
    print(json.dumps(results[0] if len(results) == 1 else out, indent=2, ensure_ascii=False))


def _paired_options(args, n_systems: int) -> dict | None:
    """paired_significance's options from --seed, --paired-bs-n and --paired-ar-n (those not given:
    its defaults, sacrebleu's); None for one system, a DataError if one was given then."""
    given = {"--seed": args.seed, "--paired-bs-n": args.paired_bs_n, "--paired-ar-n": args.paired_ar_n}
    given = {k: v for k, v in given.items() if v is not None}
    if n_systems < 2:
        if given:
            raise DataError(f"evaluate: {', '.join(given)} {'sets' if len(given) == 1 else 'set'} the paired "
                            "significance tests, which compare systems: give two or more --model/--hyp "
                            "(got one)")
        return None
    for name, value in given.items():
        if value < 1:
            why = " (sacrebleu takes 0 for unseeded)" if name == "--seed" else ""
            raise ConfigError(f"evaluate: {name} {value}: give 1 or more{why}")
    keys = {"--seed": "seed", "--paired-bs-n": "bs_samples", "--paired-ar-n": "ar_samples"}
    return {keys[k]: v for k, v in given.items()}


def add_shortlist(sub) -> None:
    p = sub.add_parser("shortlist", help="build a lexical shortlist: faster decoding "
                       "(engine/accel/shortlist.py)")
    p.add_argument("action", choices=["build"])
    p.add_argument("--model", required=True, help="the model directory (its training data is counted)")
    p.add_argument("--out", help="output file (default MODEL/shortlist.npz, which --shortlist auto reads)")
    p.add_argument("--frequent", type=int, default=1000, help="most frequent target pieces, always in")
    p.add_argument("--per-source", type=int, default=20, help="likeliest translations of each source piece")
    p.add_argument("--cooccurrence", action="store_true",
                   help="count co-occurrence even where `rnnsearch data align` made token links")
    p.set_defaults(func=cmd_shortlist)


def cmd_shortlist(args) -> None:
    from rnnsearch.engine.accel.shortlist import FILE_NAME, build_shortlist

    if args.frequent < 0 or args.per_source < 0:
        raise ConfigError("shortlist: --frequent and --per-source must be >= 0")
    shortlist = build_shortlist(args.model, args.frequent, args.per_source,
                                use_links=False if args.cooccurrence else None)
    out = Path(args.out) if args.out else Path(args.model) / FILE_NAME
    shortlist.save(out)
    filled = int((shortlist.table >= 0).sum(1).mean()) if shortlist.table.size else 0
    print(f"{out}: {len(shortlist.frequent)} frequent target pieces, about {filled} translations for each "
          f"of {shortlist.table.shape[0]} source pieces (from {shortlist.meta['source']})")
