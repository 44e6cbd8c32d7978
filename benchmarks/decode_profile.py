"""Where a trained model's decoding time goes: the operator table of one translation of a test set.

    python -m benchmarks.decode_profile --model MODEL --src data/multi30k/test_2016_flickr.de.gz \
        --quantize int8 --beam 1 --threads 1 --workers 1 > profile.txt

It loads the model, warms up on 100 sentences, times one translation of --src with --workers
searches, then profiles a second with one search (the profiler sees the operations of the thread
it runs in) under torch.profiler; prints a header (the CPU, the settings, sentences/s) and the
table of operators by self CPU time. docs/history/benchmarks-2026-12-marian.md reads one.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

import rnnsearch
from benchmarks.common import cpu_name
from rnnsearch.io import read_lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a model directory written by rnnsearch train")
    ap.add_argument("--src", required=True, help="sentences to translate (plain or .gz)")
    ap.add_argument("--quantize", choices=["none", "int8"], default="none")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="sentences in flight")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1, help="searches side by side (decode.workers)")
    ap.add_argument("--rows", type=int, default=30, help="operators in the table")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    src = read_lines(args.src)
    model = rnnsearch.load(args.model, device="cpu", quantize=args.quantize)
    options = dict(beam=args.beam, batch_size=args.batch, attention=False, precision=args.precision,
                   workers=args.workers)
    model.translate(src[:100], **options)
    start = time.perf_counter()
    model.translate(src, **options)
    rate = len(src) / (time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model.translate(src, **{**options, "workers": 1})
    print(f"## {cpu_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}: {len(src)} sentences, "
          f"{args.quantize if args.quantize != 'none' else args.precision}, beam {args.beam}, batches of "
          f"{args.batch}, {args.threads} thread(s), {args.workers} search(es): {rate:.1f} sentences/s; "
          "the table: one search")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()
