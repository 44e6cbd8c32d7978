"""An exported model against the model it came from, on a test set: identical translations
counted, BLEU of each, and the seconds each took (one thread, one process, alternating).

    python -m benchmarks.export_check --model runs/multi30k_de_en_cpu --onnx exported/ \
        --src data/multi30k/test_2016_flickr.de.gz --ref data/multi30k/test_2016_flickr.en.gz

`--onnx` is a folder of `rnnsearch export --format onnx` (written there first if absent, with
`--quantize`). rnnsearch
decodes in fp32 (the exported graphs are fp32). Prints one JSON object (docs/export.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import rnnsearch_runtime
import torch

import rnnsearch
from benchmarks.common import cpu_features, cpu_name, print_result
from rnnsearch.engine.decode.evaluate import score_corpus
from rnnsearch.engine.export.onnx import export_onnx
from rnnsearch.io import read_lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--onnx", required=True, type=Path)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    p.add_argument("--quantize", choices=["none", "int8"], default="none", help="of an export written here")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if not args.onnx.exists():
        export_onnx(args.model, args.onnx, quantize=args.quantize)
    src, ref = read_lines(args.src), read_lines(args.ref)
    model, runtime = rnnsearch.load(args.model, device="cpu"), rnnsearch_runtime.load(args.onnx)
    rows = []
    for beam in args.beams:
        start = time.perf_counter()
        want = model.translate(src, beam=beam, precision="fp32", workers=1, attention=False)
        torch_s = time.perf_counter() - start
        start = time.perf_counter()
        got = runtime.translate(src, beam=beam, batch_size=64, attention=False)
        onnx_s = time.perf_counter() - start
        same = [w.text == g.text for w, g in zip(want, got)]
        diffs = [abs(w.score - g.score) for w, g, s in zip(want, got, same) if s]
        rows.append({"beam": beam, "identical": sum(same), "sentences": len(src),
                     "max_score_difference": max(diffs, default=0.0),
                     "bleu_rnnsearch": score_corpus([w.text for w in want], ref)["bleu"],
                     "bleu_runtime": score_corpus([g.text for g in got], ref)["bleu"],
                     "seconds_rnnsearch": round(torch_s, 2), "seconds_runtime": round(onnx_s, 2)})
    files = {f.name: f.stat().st_size for f in sorted(args.onnx.iterdir())}
    print_result({"benchmark": "export_check", "date": datetime.date.today().isoformat(), "cpu": cpu_name(),
                  "cpu_features": cpu_features(), "threads": 1, "model": str(args.model), "files": files,
                  "quantize": json.loads((args.onnx / "manifest.json").read_text()).get("quantize", "none"),
                  "rows": rows}, *([args.out] if args.out else []), ensure_ascii=False)


if __name__ == "__main__":
    main()
