"""The ``rnnsearch`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .checkpoint import CheckpointError
from .config import ConfigError, load_config
from .io import DataError, MissingFileError, atomic_write_text

log = logging.getLogger("rnnsearch")


class _TqdmHandler(logging.Handler):
    """Log lines that do not tear through an active progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)


def _setup_logging(verbose: bool = False) -> None:
    handler = _TqdmHandler()
    handler.setFormatter(logging.Formatter("rnnsearch: %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False


def cmd_train(args) -> None:
    from .train import train

    if args.config is None and args.resume is None:
        raise ConfigError("train: give a CONFIG file, or --resume DIR")
    overrides = list(args.set or [])
    if args.model_dir:
        overrides.append(f"model_dir={args.model_dir}")
    if args.precision:
        overrides.append(f"train.precision={args.precision}")
    if args.resume is not None:
        overrides.append(f"model_dir={args.resume}")
        cfg_path = args.config if args.config is not None else Path(args.resume) / "config.json"
    else:
        cfg_path = args.config
    cfg = load_config(cfg_path, overrides)
    if args.resume is not None and args.config is not None:
        log.info("--resume: model, data and vocabulary settings come from %s/config.json; "
                 "only training limits and device are taken from %s", args.resume, args.config)
    try:
        train(cfg, resume=args.resume is not None)
    except MissingFileError as e:  # a standard corpus not fetched yet: say how to fetch it
        from .corpora import fetch_hint

        hint = fetch_hint(e.path)
        if hint is None:
            raise
        raise MissingFileError(e.path, f"{e} (run: {hint})") from None


def _read_input(path: str | None) -> list[str]:
    from .io import EmptyFileError, read_lines

    if path is None or path == "-":
        data = sys.stdin.buffer.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise DataError(f"<stdin>:{line}: invalid UTF-8") from None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return [ln.rstrip("\r") for ln in lines]
    try:
        return read_lines(path)
    except EmptyFileError:
        return []


def cmd_translate(args) -> None:
    from .translate import load, write_attention_jsonl

    model = load(args.model, device=args.device)
    beam = args.beam if args.beam is not None else model.cfg.decode.beam
    if beam < 1 or not 1 <= args.n_best <= beam:
        raise ConfigError(f"translate: need 1 <= --n-best <= --beam, got --n-best {args.n_best} --beam {beam}")
    lines = _read_input(args.input)
    results = model.translate(lines, beam=args.beam, n_best=args.n_best, batch_size=args.batch_size,
                              attention=args.attention is not None, precision=args.precision)
    if args.n_best > 1:
        out = [f"{i}\t{t.score:.4f}\t{t.text}" for i, nb in enumerate(results) for t in nb]
        best = [nb[0] for nb in results]
    else:
        out = [t.text for t in results]
        best = results
    text = "\n".join(out) + ("\n" if out else "")
    if args.output:
        atomic_write_text(args.output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if args.attention:
        write_attention_jsonl(args.attention, best)


def cmd_evaluate(args) -> None:
    import time

    from .evaluate import bleu_by_length, no_unk_subset, score_corpus, write_by_length
    from .io import read_lines
    from .translate import load

    src, ref = read_lines(args.src), read_lines(args.ref)
    if len(src) != len(ref):
        raise DataError(f"{args.src} ({len(src)} lines) and {args.ref} ({len(ref)} lines) have different line counts")
    if not args.model and not args.hyp:
        raise DataError("evaluate: give --model DIR or --hyp FILE (either may repeat)")
    labels = list(args.label or [])
    systems = []
    tokenize = args.tokenize  # default: the first model's data.bleu_tokenize (13a, or zh for Chinese)
    for model_dir in args.model or []:
        model = load(model_dir, device=args.device)
        tokenize = tokenize or model.cfg.data.bleu_tokenize
        start = time.time()
        hyp = [t.text for t in model.translate(src, beam=args.beam, batch_size=args.batch_size, attention=False,
                                               precision=args.precision)]
        seconds = time.time() - start
        entry = {"label": Path(model_dir).name, "model": str(model_dir), "beam": args.beam,
                 "precision": args.precision or model.cfg.decode.precision,
                 "translate_seconds": round(seconds, 3), "sentences_per_second": round(len(src) / max(seconds, 1e-9), 2)}
        if model.cfg.vocab.kind == "word":
            keep = no_unk_subset(src, ref, model.src_tok, model.tgt_tok)
            sub = score_corpus([hyp[i] for i in keep], [ref[i] for i in keep], tokenize)
            entry.update(bleu_no_unk=sub["bleu"], sentences_no_unk=len(keep))
        systems.append((entry, hyp))
    for hyp_path in args.hyp or []:
        hyp = read_lines(hyp_path)
        if len(hyp) != len(ref):
            raise DataError(f"{hyp_path} ({len(hyp)} lines) and {args.ref} ({len(ref)} lines) have different line counts")
        systems.append(({"label": Path(hyp_path).name, "hyp": str(hyp_path)}, hyp))
    results = []
    for k, (entry, hyp) in enumerate(systems):
        if k < len(labels):
            entry["label"] = labels[k]
        entry.update(score_corpus(hyp, ref, tokenize), sentences=len(src))
        if args.by_length:
            edges = [int(x) for x in args.buckets.split(",")]
            entry["by_length"] = bleu_by_length(src, hyp, ref, edges, tokenize)
        results.append(entry)
    if args.output:
        if len(systems) != 1:
            raise DataError("--output writes one system's translations: give one --model")
        atomic_write_text(args.output, "\n".join(systems[0][1]) + "\n")
    if args.by_length and args.out:
        for path in write_by_length(args.out, results):
            log.info("wrote %s", path)
    print(json.dumps(results[0] if len(results) == 1 else {"systems": results}, indent=2, ensure_ascii=False))


def _attention_records(args) -> tuple[list[int], list[dict]]:
    """Attention of the chosen input lines (translated, or forced to --target), word-level
    unless --subwords. Returns (1-based line numbers, records in the SPEC JSON form)."""
    from .alignment import merge_subwords
    from .io import read_lines
    from .translate import load

    model = load(args.model, device=args.device)
    sources = _read_input(args.input)
    if args.lines:
        picked = [int(x) for x in args.lines.split(",")]
        bad = [n for n in picked if not 1 <= n <= len(sources)]
        if bad:
            raise DataError(f"{args.input}: --lines {bad[0]} is outside 1..{len(sources)}")
    else:
        picked = [n for n in range(1, len(sources) + 1) if sources[n - 1].strip()]
    targets = None
    if args.target:
        targets = read_lines(args.target)
        if len(targets) != len(sources):
            raise DataError(f"{args.input} ({len(sources)} lines) and {args.target} ({len(targets)} lines) "
                            "have different line counts")
    picked = [n for n in picked if sources[n - 1].strip()]
    if targets is not None:
        forced = model.force([sources[n - 1] for n in picked], [targets[n - 1] for n in picked])
        results = []
        for n, weights in zip(picked, forced):
            results.append((weights, *model.labels(sources[n - 1], targets[n - 1])))
    else:
        translations = model.translate([sources[n - 1] for n in picked], beam=args.beam)
        results = [(t.attention, t.source_tokens, t.tokens + ["</s>"]) for t in translations]
    records = []
    for weights, src_tokens, tgt_tokens in results:
        if weights is None:
            raise DataError(f"{args.model}: an RNNencdec model has no attention to show")
        if not args.subwords:
            weights, src_tokens, tgt_tokens = merge_subwords(weights, src_tokens, tgt_tokens)
        records.append({"source": src_tokens, "target": tgt_tokens, "weights": weights})
    return picked, records


def cmd_plot_attention(args) -> None:
    from .plotting import plot_attention

    picked, records = _attention_records(args)
    out = Path(args.out)
    written = []
    for n, r in zip(picked, records):
        path = out if len(picked) == 1 else out.with_name(f"{out.stem}-{n}{out.suffix}")
        written.append(str(plot_attention(r["weights"], r["source"], r["target"], path)))
    print("\n".join(written))


def cmd_explore(args) -> None:
    from .explorer import write_explorer

    _, records = _attention_records(args)
    try:
        print(write_explorer(args.out, records, args.lang))
    except ValueError as e:
        raise DataError(f"{args.input}: {e}") from None


def cmd_align(args) -> None:
    from .alignment import (aer, argmax_links, format_pharaoh, merge_subwords, read_naacl, read_pharaoh_file,
                            threshold_links)
    from .io import read_lines
    from .translate import load

    src, tgt = read_lines(args.src), read_lines(args.tgt)
    if len(src) != len(tgt):
        raise DataError(f"{args.src} ({len(src)} lines) and {args.tgt} ({len(tgt)} lines) have different line counts")
    model = load(args.model, device=args.device)
    if args.strip_accents:
        import unicodedata

        def plain(text):
            return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        src_in, tgt_in = [plain(s) for s in src], [plain(t) for t in tgt]
    else:
        src_in, tgt_in = src, tgt
    forced = model.force(src_in, tgt_in)
    links = []
    for n, (weights, s, t) in enumerate(zip(forced, src_in, tgt_in), 1):
        if weights is None:
            raise DataError(f"{args.model}: an RNNencdec model has no attention to align with")
        words, src_words, tgt_words = merge_subwords(weights, *model.labels(s, t))
        words = words[: len(tgt_words) - 1]  # the </s> row aligns nothing
        if len(src_words) != len(s.split()) or len(words) != len(t.split()):
            raise DataError(f"{args.src}:{n}: the tokenizer does not keep whitespace words "
                            "(needed for word alignment)")
        links.append(argmax_links(words) if args.method == "argmax" else threshold_links(words, args.threshold))
    text = "\n".join(format_pharaoh(x) for x in links) + "\n"
    if args.out:
        atomic_write_text(args.out, text)
    elif not args.gold:
        sys.stdout.write(text)
    if args.gold:
        if args.gold_format == "naacl":
            sure, possible = read_naacl(args.gold, len(src))
        else:
            sure, possible = read_pharaoh_file(args.gold, len(src))
        scores = aer(links, sure, possible)
        scores.update(method=args.method, sentences=len(src))
        if args.method == "threshold":
            scores["threshold"] = args.threshold
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in scores.items()}, indent=2))


def cmd_params(args) -> None:
    from .model import build_model

    overrides = list(args.set or [])
    if args.preset:
        overrides.append(f"preset={args.preset}")
    cfg = load_config(args.config, overrides)
    src_v = args.src_vocab or cfg.vocab.size
    tgt_v = args.tgt_vocab or cfg.vocab.size
    model = build_model(cfg.model, src_v, tgt_v)
    groups: dict[str, int] = {}
    for name, p in model.named_parameters():
        groups[name.split(".")[0]] = groups.get(name.split(".")[0], 0) + p.numel()
    print(json.dumps({"arch": cfg.model.arch, "src_vocab": src_v, "tgt_vocab": tgt_v,
                      "parameters": model.num_parameters(), "by_module": groups}, indent=2))


def cmd_quickstart(args) -> None:
    from .config import config_from_dict
    from .toy import write_toy_corpus
    from .train import train
    from .translate import load

    out = Path(args.out)
    data = write_toy_corpus(out / "data", task="reverse", n_train=args.sentences, seed=args.seed)
    cfg = config_from_dict({
        "preset": "tiny", "model_dir": str(out / "model"),
        "data": dict(data, max_len=20),
        "model": {"emb": 48, "hidden": 64, "align": 64, "maxout": 64},
        "train": {"max_epochs": args.epochs, "valid_every": 0, "seed": args.seed, "log_every": 20},
        "decode": {"beam": 5},
    })
    train(cfg)
    model = load(out / "model", device="cpu")
    examples = ["w1 w2 w3 w4 w5", "w7 w3 w9 w9 w0 w12 w5", "w19 w18 w17 w16 w15 w14 w13 w12"]
    for src, tr in zip(examples, model.translate(examples, beam=5)):
        print(f"\n  source: {src}\n  output: {tr.text}   (reversed: {' '.join(src.split()[::-1])})")
        print(_ascii_attention(tr))


def cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(args.out, seed=args.seed, n_train=args.sentences, steps=args.steps, minutes=args.minutes,
             epochs=args.epochs, overrides=args.set or [], progress=not args.no_progress)


def cmd_figure(args) -> None:
    from .figures import format_matrix, structure_figure

    r = structure_figure(args.out, seed=args.seed, epochs=args.epochs)
    print(format_matrix(r["untrained_attention"], "untrained attention (rows ≈ 1/7 ≈ 0.143):"))
    print(f"  mean {r['untrained_mean']:.3f}, largest deviation from 1/7: {r['untrained_max_deviation']:.3f}\n")
    for key, label in (("access_rnnencdec", "RNNencdec ‖∂c_i/∂h_j‖ (only the last state reaches the decoder):"),
                       ("access_rnnsearch", "RNNsearch ‖∂c_i/∂h_j‖ (every state reaches every step):")):
        print(format_matrix(r[key], label) + "\n")
    print(format_matrix(r["trained_reverse_attention"], "after training to reverse (anti-diagonal):"))
    print(f"\nwrote {Path(args.out) / 'structure.png'} and structure.json")


def cmd_experiment(args) -> None:
    from .experiments import run_experiment

    r = run_experiment(args.name, corpus=args.corpus, minutes=args.budget_minutes, out_dir=args.out,
                       data_root=args.data, train_sentences=args.train_sentences, seed=args.seed,
                       test_sentences=args.test_sentences, overrides=args.set or [], steps=args.budget_steps)
    from .experiments import results_markdown

    print(results_markdown(r))


def cmd_data(args) -> None:
    from .corpora import describe, get, split

    if args.action == "list":
        print(describe())
        return
    if args.action == "split":
        if not args.files or args.name:
            raise DataError("data split: give the line-aligned files with --files A B [...] (source first)")
        counts = split(args.files, args.dir, valid=args.valid, test=args.test, seed=args.seed)
        print(f"{args.dir}/: " + ", ".join(f"{k} {v:,} pairs" for k, v in counts.items()))
        return
    if not args.name:
        raise DataError("data get: name a corpus (see `rnnsearch data list`)")
    out = get(args.name, out_dir=args.dir, cache=args.cache, mirror=args.mirror,
              allow_unpinned=args.allow_unpinned, retries=args.retries, progress=not args.no_progress)
    print(f"{args.name}: verified and written to {out}/")


def cmd_serve(args) -> None:
    from .serve import Limits, serve

    limits = Limits(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                    max_sentences=args.max_sentences, max_chars=args.max_chars)
    if args.beam is not None and not 1 <= args.beam <= limits.max_beam:
        raise ConfigError(f"serve: --beam must be from 1 to {limits.max_beam}, got {args.beam}")
    serve(args.model, host=args.host, port=args.port, beam=args.beam, device=args.device, limits=limits,
          lang=args.lang)


def _ascii_attention(tr) -> str:
    shades = " .:-=+*#%@"
    rows = [" " * 9 + " ".join(f"{s[:4]:>4}" for s in tr.source_tokens)]
    for word, weights in zip(tr.tokens + ["</s>"], tr.attention or []):
        cells = " ".join(f"{shades[min(9, int(w * 10))] * 4}" for w in weights)
        rows.append(f"  {word[:6]:>6} {cells}")
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every subcommand and its flags."""
    parser = argparse.ArgumentParser(prog="rnnsearch", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", nargs="?", help="YAML/JSON config file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override, e.g. --set model.hidden=256")
    p.add_argument("--model-dir", help="output directory (overrides model_dir)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"], help="mixed precision (autocast): GPUs, and bf16 on CPUs with AVX512-BF16")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("translate", help="translate lines from stdin or a file")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--input", help="input file (default: stdin)")
    p.add_argument("--output", help="output file (default: stdout)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's decode.beam)")
    p.add_argument("--n-best", type=int, default=1, help="print N hypotheses per line as index<TAB>score<TAB>text")
    p.add_argument("--batch-size", type=int, help="sentences per batch")
    p.add_argument("--attention", metavar="FILE.jsonl", help="write attention of the best hypotheses as JSON lines")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=["fp32", "bf16"],
                   help="bf16 matrix products (faster on CPUs with AVX512-BF16; on GPUs fp32 decodes faster; "
                   "default: decode.precision)")
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="translate a test set and score it with sacrebleu (BLEU, chrF, by length)")
    p.add_argument("--model", action="append", help="model directory (repeat to compare systems)")
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--hyp", action="append", help="score this hypothesis file instead (repeatable)")
    p.add_argument("--label", action="append", help="names of the systems, in order (models first)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--tokenize", help="sacrebleu tokenizer (default: the model's data.bleu_tokenize, else 13a; "
                   "zh for Chinese)")
    p.add_argument("--by-length", action="store_true", help="BLEU per source-length bucket (paper Figure 2)")
    p.add_argument("--buckets", default="10,20,30,40,50,60", help="bucket edges in source words")
    p.add_argument("--out", help="with --by-length: write by_length.csv/.json/.png here")
    p.add_argument("--output", help="write the translations here (one --model)")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", choices=["fp32", "bf16"], help="bf16 matrix products while decoding")
    p.set_defaults(func=cmd_evaluate)

    for name, help_text, out_help in (
            ("plot-attention", "heat maps of attention (paper Figure 3), PNG or SVG",
             "FILE.png or FILE.svg (FILE-N.ext for several sentences)"),
            ("explore", "interactive alignment explorer: one self-contained HTML page", "page.html")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--model", required=True)
        p.add_argument("--input", required=True, help="source sentences, one a line")
        p.add_argument("--out", required=True, help=out_help)
        p.add_argument("--lines", help="comma-separated 1-based line numbers (default: all non-empty)")
        p.add_argument("--target", help="show attention while forced to these translations (teacher forcing)")
        p.add_argument("--beam", type=int, default=5)
        p.add_argument("--subwords", action="store_true", help="keep subword pieces (default: merge to words)")
        p.add_argument("--device", default="auto")
        if name == "explore":
            p.add_argument("--lang", default="en", choices=["en", "zh"], help="page labels")
        p.set_defaults(func=cmd_plot_attention if name == "plot-attention" else cmd_explore)

    p = sub.add_parser("align", help="word alignments from attention (teacher forcing), Pharaoh out; AER vs gold")
    p.add_argument("--model", required=True)
    p.add_argument("--src", required=True, help="source sentences, whitespace-tokenised words")
    p.add_argument("--tgt", required=True, help="their translations, whitespace-tokenised words")
    p.add_argument("--method", default="argmax", choices=["argmax", "threshold"])
    p.add_argument("--threshold", type=float, default=0.3, help="threshold method: weight for a link")
    p.add_argument("--gold", help="gold alignments: print AER, precision, recall")
    p.add_argument("--gold-format", default="pharaoh", choices=["pharaoh", "naacl"],
                   help="naacl: 'SENT EN FR S|P' lines, English first (source = French)")
    p.add_argument("--strip-accents", action="store_true", help="remove accents (for accent-free training data)")
    p.add_argument("--out", help="write the Pharaoh alignments here (default: stdout unless --gold)")
    p.add_argument("--device", default="auto")
    p.set_defaults(func=cmd_align)

    p = sub.add_parser("params", help="print a model's parameter count (e.g. --preset paper)")
    p.add_argument("config", nargs="?")
    p.add_argument("--preset")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--src-vocab", type=int)
    p.add_argument("--tgt-vocab", type=int)
    p.set_defaults(func=cmd_params)

    from .demo import DEMO_STEPS, DEMO_TARGET_LOSS

    p = sub.add_parser("demo", help="English→Chinese demo: train, translate, show attention (under 5 minutes)")
    p.add_argument("--out", default="rnnsearch-demo", help="output directory (default ./rnnsearch-demo)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sentences", type=int, default=20000, help="training sentences to generate")
    p.add_argument("--steps", type=int, default=DEMO_STEPS,
                   help=f"most training steps (default {DEMO_STEPS}); training stops sooner, at the validation "
                        f"loss {DEMO_TARGET_LOSS} (2,500-4,100 steps, 2-4 minutes on 2 cores). A slower machine "
                        "takes longer and trains the same model")
    p.add_argument("--minutes", type=float, default=0.0, help="optional wall-clock cap on training (0: none)")
    p.add_argument("--epochs", type=int, default=0, help="optional cap on epochs (0: none)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a demo setting")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("figure", help="seed 000's notebook experiment: untrained/trained attention, access maps")
    p.add_argument("name", choices=["structure"])
    p.add_argument("--out", default="figures")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=12, help="training epochs for the reversal panel")
    p.set_defaults(func=cmd_figure)

    p = sub.add_parser("experiment", help="reproduce a claim: length-curve, reverse, scores")
    p.add_argument("name", choices=["length-curve", "reverse", "scores"])
    p.add_argument("--corpus", default="synthetic", choices=["synthetic", "europarl-it-en", "multi30k-de-en"])
    p.add_argument("--budget-minutes", type=float, default=3.0, help="training minutes per model")
    p.add_argument("--budget-steps", type=int, default=0,
                   help="training steps per model instead of minutes: the same budget on a busy or a faster machine")
    p.add_argument("--out", help="directory shared by the experiments on a corpus (default experiments/CORPUS): "
                   "data, models/ (finished ones are reused), NAME/ results")
    p.add_argument("--data", default="data", help="directory holding the real corpora, as `rnnsearch data get` "
                   "writes them (default ./data)")
    p.add_argument("--train-sentences", type=int, default=30000,
                   help="synthetic: sentences to generate; real corpora: seeded subsample (0: all)")
    p.add_argument("--test-sentences", type=int, default=1000,
                   help="synthetic: test sentences to generate; real corpora: seeded subsample of the test split "
                        "(0: all); the validation split is capped at 1,000 the same way")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override for every model, e.g. --set model.hidden=512 --set train.device=cuda")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("data", help="download a standard corpus (verified by SHA-256), list them, "
                       "or split line-aligned files into train/valid/test")
    p.add_argument("action", choices=["get", "list", "split"])
    p.add_argument("name", nargs="?", help="corpus: multi30k, wmt14-newstest, hansards-naacl2003, "
                   "tatoeba-cmn-eng, tatoeba-fra-eng, europarl-it-en")
    p.add_argument("--dir", default="data", help="where the corpus folder is written (default ./data)")
    p.add_argument("--cache", help="download cache (default $RNNSEARCH_CACHE or ~/.cache/rnnsearch)")
    p.add_argument("--mirror", help="fetch the same paths from this base URL (or set $RNNSEARCH_MIRROR)")
    p.add_argument("--allow-unpinned", action="store_true", help="accept files without a pinned SHA-256")
    p.add_argument("--retries", type=int, default=2, help="resume an interrupted download this many times")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--files", nargs="+", help="split: line-aligned files, source first (all.en.gz all.zh.gz ...); "
                   "written to --dir as train/valid/test.<ext>, sentences with the same source in one split")
    p.add_argument("--valid", type=int, default=1000, help="split: distinct source sentences held out for validation")
    p.add_argument("--test", type=int, default=1000, help="split: distinct source sentences held out for test")
    p.add_argument("--seed", type=int, default=1, help="split: shuffling seed")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("serve", help="HTTP API (POST /translate) and the live attention explorer (GET /)")
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--beam", type=int, help="default beam size (default: the model's decode.beam)")
    p.add_argument("--max-batch", type=int, default=32, help="sentences decoded together (1: no batching)")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="how long a request waits for a batch to fill")
    p.add_argument("--max-queue", type=int, default=512, help="queued sentences before answering 503")
    p.add_argument("--max-sentences", type=int, default=64, help="sentences per request")
    p.add_argument("--max-chars", type=int, default=2000, help="characters per sentence")
    p.add_argument("--lang", default="en", choices=["en", "zh"], help="labels of the live page")
    p.add_argument("--device", default="auto")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("quickstart", help="train a tiny RNNsearch to reverse sequences (about a minute)")
    p.add_argument("--out", default="rnnsearch-quickstart")
    p.add_argument("--sentences", type=int, default=6000)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        args.func(args)
    except (ConfigError, DataError, CheckpointError, FloatingPointError) as e:
        print(f"rnnsearch: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rnnsearch: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
