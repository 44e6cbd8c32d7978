"""`rnnsearch data` and `serve`: corpora in, translations out over HTTP."""

from __future__ import annotations

import os

from rnnsearch.cli.common import add_quantize
from rnnsearch.config import ConfigError
from rnnsearch.io import DataError


def add_data(sub) -> None:
    p = sub.add_parser("data", help="download a standard corpus (verified by SHA-256), list them, "
                       "split line-aligned files into train/valid/test, prepare a config's training "
                       "corpus ahead of `rnnsearch train`, or align it word by word (eflomal)")
    p.add_argument("action", choices=["get", "list", "split", "prepare", "align"])
    p.add_argument("name", nargs="?", help="corpus: multi30k, wmt14-newstest, hansards-naacl2003, "
                   "hansards-csc401 (its training text), tatoeba-cmn-eng, tatoeba-fra-eng, europarl-it-en, "
                   "wmt14-en-fr (the paper's training data), wmt14-en-fr-full (see `rnnsearch data list`)")
    p.add_argument("--dir", default="data", help="where the corpus folder is written (default ./data)")
    p.add_argument("--cache", help="download cache (default $RNNSEARCH_CACHE or ~/.cache/rnnsearch)")
    p.add_argument("--mirror", help="fetch the same paths from this base URL (or set $RNNSEARCH_MIRROR)")
    p.add_argument("--allow-unpinned", action="store_true", help="accept files without a pinned SHA-256")
    p.add_argument("--retries", type=int, default=2, help="resume an interrupted download this many times")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--files", nargs="+",
                   help="split: line-aligned files, source first (all.en.gz all.zh.gz ...); written to --dir "
                        "as train/valid/test.<ext>, sentences with the same source in one split")
    p.add_argument("--valid", type=int, default=1000,
                   help="split: distinct source sentences held out for validation")
    p.add_argument("--test", type=int, default=1000,
                   help="split: distinct source sentences held out for test")
    p.add_argument("--seed", type=int, default=1, help="split: shuffling seed")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="prepare, align: config override, as for `rnnsearch train`")
    p.set_defaults(func=cmd_data)


def cmd_data(args) -> None:
    from rnnsearch.tools.download import describe, get, split

    if args.action == "list":
        print(describe())
        return
    if args.action == "prepare":
        prepare_config(args.name, args.set or [])
        return
    if args.action == "align":
        align_config(args.name, args.set or [])
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


def add_serve(sub) -> None:
    p = sub.add_parser("serve", help="HTTP APIs (native, LibreTranslate, DeepL) and the live attention "
                                     "explorer (GET /) over one or several models")
    p.add_argument("--model", required=True, action="append", metavar="[SRC-TGT=]DIR",
                   help="a model directory, named by its language pair (de-en=runs/a; unnamed: the "
                        "languages of its training files); repeat for several models")
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
    if args.beam is not None and not 1 <= args.beam <= limits.max_beam:
        raise ConfigError(f"serve: --beam must be from 1 to {limits.max_beam}, got {args.beam}")
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
          access=access, drain_timeout=args.drain_timeout)


def prepare_config(config: str | None, overrides: list[str]) -> None:
    """`rnnsearch data prepare CONFIG`: the vocabularies and the prepared training corpus of a
    fresh `rnnsearch train CONFIG`, made now, on every core."""
    from rnnsearch.config import load_config
    from rnnsearch.engine.data.pairs import prepare

    if not config:
        raise ConfigError("data prepare: give the CONFIG file that `rnnsearch train` will be given")
    data = prepare(load_config(config, overrides))
    total = sum(int(data.meta[k]) for k in ("src_tokens", "tgt_tokens"))
    print(f"{data.path}: {len(data):,} pairs, {total:,} tokens ({data.dropped_blank:,} blank and "
          f"{data.dropped_long:,} too long dropped); `rnnsearch train {config}` reads it")


def align_config(config: str | None, overrides: list[str]) -> None:
    """`rnnsearch data align CONFIG`: the prepared training corpus aligned word by word by eflomal
    (engine/align/eflomal.py), the links mapped onto the model's tokens, and a lexical table."""
    from rnnsearch.config import load_config
    from rnnsearch.engine.align import eflomal as aligner

    if not config:
        raise ConfigError("data align: give the CONFIG file that `rnnsearch train` will be given")
    aligner.require_eflomal()
    out = aligner.align_config(load_config(config, overrides))
    meta = out.meta
    print(f"{out.path}: {meta['pairs']:,} pairs, {meta['word_links']:,} word links, {meta['links']:,} "
          f"token links ({meta['unmapped']:,} pairs unmapped); links.txt, lexicon.tsv "
          f"({meta['lexicon_words']:,} source words)")
