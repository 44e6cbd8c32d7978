"""`rnnsearch-runtime`: translate lines with an exported model, no PyTorch."""

from __future__ import annotations

import argparse
import sys

from rnnsearch_runtime.search import ModelError, load


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rnnsearch-runtime", description=__doc__)
    p.add_argument("--model", required=True, help="a folder written by rnnsearch export --format onnx")
    p.add_argument("--input", help="source lines (default: standard input)")
    p.add_argument("--beam", type=int, help="beam size (default: the model's)")
    p.add_argument("--n-best", type=int, default=1,
                   help="print N translations a line as index<TAB>score<TAB>text")
    p.add_argument("--batch-size", type=int, default=32, help="sentences searched at once")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads")
    args = p.parse_args(argv)
    try:
        model = load(args.model, args.threads)
        if args.input:
            with open(args.input, encoding="utf-8") as f:
                lines = f.read().splitlines()
        else:
            lines = sys.stdin.read().splitlines()
        found = model.translate_n_best(lines, beam=args.beam, n_best=args.n_best, batch_size=args.batch_size,
                                       attention=False)
    except (ModelError, ValueError, OSError) as e:
        print(f"rnnsearch-runtime: error: {e}", file=sys.stderr)
        return 2
    for k, n_best in enumerate(found):
        for t in n_best:
            print(f"{k}\t{t.score:.4f}\t{t.text}" if args.n_best > 1 else t.text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
