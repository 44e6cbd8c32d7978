"""`rnnsearch serve`: translations over HTTP (native, LibreTranslate and DeepL APIs; serve/)."""

from __future__ import annotations

import os

from rnnsearch.cli.common import add_quantize
from rnnsearch.config import ConfigError


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="HTTP APIs (native, LibreTranslate, DeepL) and the live attention "
                                     "explorer (GET /) over one or several models")
    p.add_argument("--model", required=True, action="append", metavar="[SRC-TGT=]DIR",
                   help="a model directory, named by its language pair (de-en=runs/a; unnamed: the "
                        "languages of its training files); repeat for several models; DIR,DIR,...: one "
                        "model that is their ensemble; with --backend onnx a folder of rnnsearch export")
    p.add_argument("--backend", choices=["torch", "onnx"], default="torch",
                   help="torch: model directories decoded by PyTorch; onnx: folders of `rnnsearch export "
                        "--format onnx` searched by onnxruntime (the runtime/ package) on the CPU, on "
                        "OMP_NUM_THREADS threads; no sampling, prefixes, constraints, /score, ensembles, "
                        "--quantize (an export is quantised when written) or --device")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--beam", type=int, help="default beam size (default: each model's decode.beam)")
    p.add_argument("--max-batch", type=int, default=32, help="sentences decoded together (1: no batching)")
    p.add_argument("--max-wait-ms", type=float, default=5.0,
                   help="how long a request waits for a batch to fill")
    p.add_argument("--max-queue", type=int, default=512,
                   help="queued sentences per model before answering 503")
    p.add_argument("--max-sentences", "--batch-limit", type=int, default=64, dest="max_sentences",
                   help="texts per request (LibreTranslate's --batch-limit)")
    p.add_argument("--max-chars", "--char-limit", type=int, default=2000, dest="max_chars",
                   help="characters per text (LibreTranslate's --char-limit)")
    p.add_argument("--api-keys", metavar="FILE",
                   help="one key a line: every translation request without one of them gets 403")
    p.add_argument("--req-limit", type=int, default=0,
                   help="requests a minute per key (else per client address); beyond, 429 (0: no limit)")
    p.add_argument("--char-quota", type=int, default=0,
                   help="characters per key (else per address) since the start; beyond, DeepL's 456")
    p.add_argument("--metrics", action="store_true", help="Prometheus metrics at GET /metrics")
    p.add_argument("--metrics-token", default=os.environ.get("RNNSEARCH_METRICS_TOKEN"),
                   help="/metrics wants `Authorization: Bearer TOKEN` (default $RNNSEARCH_METRICS_TOKEN)")
    p.add_argument("--drain-timeout", type=float, default=30.0,
                   help="seconds SIGTERM waits for requests in flight before the process exits")
    p.add_argument("--lang", default="en", choices=["en", "zh"], help="labels of the live page")
    p.add_argument("--device", default="auto")
    add_quantize(p)
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> None:
    from rnnsearch.serve import Access, Limits, serve
    from rnnsearch.serve.guard import read_keys

    limits = Limits(max_batch=args.max_batch, max_wait_ms=args.max_wait_ms, max_queue=args.max_queue,
                    max_sentences=args.max_sentences, max_chars=args.max_chars)
    for flag, value, low in (("--req-limit", args.req_limit, 0), ("--char-quota", args.char_quota, 0),
                             ("--max-sentences", args.max_sentences, 1), ("--max-chars", args.max_chars, 1)):
        if value < low:
            raise ConfigError(f"serve: {flag} must be {low} or more, got {value}")
    if args.metrics_token and not args.metrics:
        raise ConfigError("serve: --metrics-token without --metrics")
    access = Access(keys=read_keys(args.api_keys) if args.api_keys else None, req_limit=args.req_limit,
                    char_quota=args.char_quota, metrics=args.metrics, metrics_token=args.metrics_token)
    serve(args.model, host=args.host, port=args.port, beam=args.beam, device=args.device, limits=limits,
          lang=args.lang, quantize=args.quantize, cuda_graphs=args.cuda_graphs, shortlist=args.shortlist,
          access=access, drain_timeout=args.drain_timeout, plain=args.plain, backend=args.backend)
