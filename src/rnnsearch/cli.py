"""The ``rnnsearch`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .checkpoint import CheckpointError
from .config import ConfigError, load_config
from .io import DataError, atomic_write_text

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
    if args.resume is not None:
        overrides.append(f"model_dir={args.resume}")
        cfg_path = args.config if args.config is not None else Path(args.resume) / "config.json"
    else:
        cfg_path = args.config
    cfg = load_config(cfg_path, overrides)
    if args.resume is not None and args.config is not None:
        log.info("--resume: model, data and vocabulary settings come from %s/config.json; "
                 "only training limits and device are taken from %s", args.resume, args.config)
    train(cfg, resume=args.resume is not None)


def _read_input(path: str | None) -> list[str]:
    from .io import read_lines

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
    except DataError as e:
        if str(e).endswith("file is empty"):
            return []
        raise


def cmd_translate(args) -> None:
    from .translate import load, write_attention_jsonl

    model = load(args.model, device=args.device)
    lines = _read_input(args.input)
    results = model.translate(lines, beam=args.beam, n_best=args.n_best, batch_size=args.batch_size,
                              attention=args.attention is not None)
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

    from .io import read_lines
    from .translate import load
    from .evaluate import score_corpus

    src, ref = read_lines(args.src), read_lines(args.ref)
    if len(src) != len(ref):
        raise DataError(f"{args.src} ({len(src)} lines) and {args.ref} ({len(ref)} lines) have different line counts")
    model = None if args.hyp else load(args.model, device=args.device)
    start = time.time()
    if args.hyp:
        hyp = read_lines(args.hyp)
        if len(hyp) != len(ref):
            raise DataError(f"{args.hyp} ({len(hyp)} lines) and {args.ref} ({len(ref)} lines) have different line counts")
    else:
        hyp = [t.text for t in model.translate(src, beam=args.beam, batch_size=args.batch_size, attention=False)]
    seconds = time.time() - start
    result = score_corpus(hyp, ref)
    result.update(sentences=len(src), beam=args.beam, translate_seconds=round(seconds, 3),
                  sentences_per_second=round(len(src) / max(seconds, 1e-9), 2))
    if args.output:
        atomic_write_text(args.output, "\n".join(hyp) + "\n")
    print(json.dumps(result, indent=2, ensure_ascii=False))


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

    run_demo(args.out, seed=args.seed, n_train=args.sentences, minutes=args.minutes, epochs=args.epochs,
             overrides=args.set or [], progress=not args.no_progress)


def _ascii_attention(tr) -> str:
    shades = " .:-=+*#%@"
    rows = [" " * 9 + " ".join(f"{s[:4]:>4}" for s in tr.source_tokens)]
    for word, weights in zip(tr.tokens + ["</s>"], tr.attention or []):
        cells = " ".join(f"{shades[min(9, int(w * 10))] * 4}" for w in weights)
        rows.append(f"  {word[:6]:>6} {cells}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rnnsearch", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", nargs="?", help="YAML/JSON config file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override, e.g. --set model.hidden=256")
    p.add_argument("--model-dir", help="output directory (overrides model_dir)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
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
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("evaluate", help="translate a test set and score it with sacrebleu (BLEU, chrF)")
    p.add_argument("--model", help="model directory (not needed with --hyp)")
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--hyp", help="score this hypothesis file instead of translating")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--output", help="write the translations here")
    p.add_argument("--device", default="auto")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("params", help="print a model's parameter count (e.g. --preset paper)")
    p.add_argument("config", nargs="?")
    p.add_argument("--preset")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--src-vocab", type=int)
    p.add_argument("--tgt-vocab", type=int)
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("demo", help="English→Chinese demo: train, translate, show attention (under 5 minutes)")
    p.add_argument("--out", default="rnnsearch-demo", help="output directory (default ./rnnsearch-demo)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sentences", type=int, default=20000, help="training sentences to generate")
    p.add_argument("--minutes", type=float, default=3.5, help="training time budget")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a demo setting")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("quickstart", help="train a tiny RNNsearch to reverse sequences (about a minute)")
    p.add_argument("--out", default="rnnsearch-quickstart")
    p.add_argument("--sentences", type=int, default=6000)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)

    args = parser.parse_args(argv)
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
