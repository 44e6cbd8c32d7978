"""What several commands share: reading input lines, the decoding flags, drawing attention in a terminal."""

from __future__ import annotations

import sys

from rnnsearch.config import LINKS, QUANTIZE, ConfigError
from rnnsearch.io import DataError, EmptyFileError, read_lines


def read_input(path: str | None) -> list[str]:
    """The lines of `path`, or of standard input for None or "-" (UTF-8; an empty file: none)."""
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


def add_batching(p) -> None:
    """--batch-size, --workers: how translate and evaluate share the sentences out."""
    p.add_argument("--batch-size", type=int, help="sentences per batch (default: decode.batch_size)")
    p.add_argument("--workers", type=int, help="searches at once on a CPU, a core each (default: "
                   "decode.workers; 0: one per thread)")


def add_quantize(p) -> None:
    """--quantize, --cuda-graphs, --shortlist, --plain: the speed paths of translate, evaluate and serve."""
    p.add_argument("--quantize", choices=QUANTIZE, default="none",
                   help="int8: the decoder's matrix products in int8, quantised at load (CPU only; the "
                   "model directory is unchanged; docs/benchmarks.md has its speed and BLEU)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="replay each decoding step from a CUDA graph: one launch a step instead of dozens "
                   "(GPUs only; engine/accel/graphs.py)")
    p.add_argument("--shortlist", metavar="PATH|auto",
                   help="the output layer over a lexical shortlist (engine/accel/shortlist.py): a file of "
                   "`rnnsearch shortlist build`, or auto (<model>/shortlist.npz, built when absent)")
    p.add_argument("--plain", action="store_true",
                   help="the paper's plain code only (nn/): every speed path of engine/accel/ off, one "
                   "sentence searched at a time; the same translations, slower")


def ascii_attention(tr) -> str:
    """A translation's attention as a block of shaded characters, one row per target word."""
    shades = " .:-=+*#%@"
    rows = [" " * 9 + " ".join(f"{s[:4]:>4}" for s in tr.source_tokens)]
    for word, weights in zip(tr.tokens + ["</s>"], tr.attention or []):
        cells = " ".join(f"{shades[min(9, int(w * 10))] * 4}" for w in weights)
        rows.append(f"  {word[:6]:>6} {cells}")
    return "\n".join(rows)


def flag(key: str) -> str:
    """The command-line flag of a decoding option (config.DecodeConfig): n_best -> --n-best."""
    return "--" + key.replace("_", "-")


def add_links(p, rows: str) -> None:
    """--links (decode.links) and its older spelling --saliency [mean]."""
    p.add_argument("--links", choices=list(LINKS),
                   help=f"where {rows} come from: the attention; the alignment head (a model trained with "
                        "one); gradient x input saliency of each output word (far better from an unguided "
                        "model, docs/alignment.md; one backward pass per output word); or the mean of the "
                        "saliency and the attention (the head's where the model has one: with a guided "
                        "head, better than either). Default: the head where the model has one, else the "
                        "attention")
    p.add_argument("--saliency", nargs="?", const="alone", choices=["alone", "mean"],
                   help="the same as --links saliency (--saliency mean: --links mean)")


def links_of(args, command: str) -> str | None:
    """The --links a command was given (--saliency read as its alias), or None: the model's."""
    alias = {None: None, "alone": "saliency", "mean": "mean"}[args.saliency]
    if alias and args.links and alias != args.links:
        raise ConfigError(f"{command}: --saliency{' mean' if alias == 'mean' else ''} is --links {alias}, "
                          f"and --links {args.links} was given too: give one")
    return args.links or alias
