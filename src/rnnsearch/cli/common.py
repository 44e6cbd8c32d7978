"""What several commands share: reading input lines, drawing attention in a terminal."""

from __future__ import annotations

import sys

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


def add_quantize(p) -> None:
    """--quantize, --cuda-graphs, --shortlist: decoding options of translate, evaluate and serve."""
    p.add_argument("--quantize", choices=["none", "int8"], default="none",
                   help="int8: the decoder's matrix products in int8, quantised at load (CPU only; the "
                   "model directory is unchanged; docs/benchmarks.md has its speed and BLEU)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="replay each decoding step from a CUDA graph: one launch a step instead of dozens "
                   "(GPUs only; engine/decode/graphs.py)")
    p.add_argument("--shortlist", metavar="PATH|auto",
                   help="the output layer over a lexical shortlist (engine/decode/shortlist.py): a file of "
                   "`rnnsearch shortlist build`, or auto (<model>/shortlist.npz, built when absent)")


def ascii_attention(tr) -> str:
    """A translation's attention as a block of shaded characters, one row per target word."""
    shades = " .:-=+*#%@"
    rows = [" " * 9 + " ".join(f"{s[:4]:>4}" for s in tr.source_tokens)]
    for word, weights in zip(tr.tokens + ["</s>"], tr.attention or []):
        cells = " ".join(f"{shades[min(9, int(w * 10))] * 4}" for w in weights)
        rows.append(f"  {word[:6]:>6} {cells}")
    return "\n".join(rows)
