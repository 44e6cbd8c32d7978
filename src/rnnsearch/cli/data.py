"""`rnnsearch data`: corpora downloaded, split, prepared and aligned."""

from __future__ import annotations

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
