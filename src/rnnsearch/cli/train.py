"""`rnnsearch train`, `params` and `quickstart`: making models."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rnnsearch.cli.common import ascii_attention
from rnnsearch.config import TRAIN_PRECISIONS, ConfigError, load_config
from rnnsearch.io import MissingFileError

log = logging.getLogger("rnnsearch")


def add_train(sub) -> None:
    p = sub.add_parser("train", help="train a model from a YAML config")
    p.add_argument("config", nargs="?", help="YAML/JSON config file")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override, e.g. --set model.hidden=256")
    p.add_argument("--model-dir", help="output directory (overrides model_dir)")
    p.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    p.add_argument("--precision", choices=list(TRAIN_PRECISIONS),
                   help="mixed precision (autocast): GPUs, and bf16 on CPUs with AVX512-BF16/AMX; auto (the "
                        "default for new configs): bf16 only where it measures faster here")
    p.set_defaults(func=cmd_train)


def cmd_train(args) -> None:
    from rnnsearch import train

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
        from rnnsearch.tools.download import fetch_hint

        hint = fetch_hint(e.path)
        if hint is None:
            raise
        raise MissingFileError(e.path, f"{e} (run: {hint})") from None


def add_average(sub) -> None:
    p = sub.add_parser("average", help="average a run's last checkpoints into a new model directory")
    p.add_argument("model", metavar="MODEL_DIR", help="a run trained with train.keep_last > 0")
    p.add_argument("--out", required=True, metavar="DIR", help="the new model directory (must not exist yet)")
    p.add_argument("--last", type=int, default=5, metavar="N",
                   help="average the N newest snapshots in MODEL_DIR/checkpoints (default 5)")
    p.add_argument("--weights", nargs="+", metavar="FILE",
                   help="average these weight files instead (e.g. MODEL_DIR/checkpoints/step-*.safetensors)")
    p.set_defaults(func=cmd_average)


def cmd_average(args) -> None:
    from rnnsearch.engine.checkpoint import CheckpointError, snapshots, write_averaged_model

    if args.weights:
        paths = [Path(w) for w in args.weights]
    else:
        if args.last < 1:
            raise CheckpointError(f"average: --last must be at least 1, got {args.last}")
        have = snapshots(Path(args.model))
        if len(have) < args.last:
            raise CheckpointError(f"{args.model}/checkpoints: {len(have)} snapshot(s), --last asks for "
                                  f"{args.last} (train with --set train.keep_last={args.last} to keep them)")
        paths = have[-args.last:]
    out = write_averaged_model(Path(args.model), paths, Path(args.out))
    log.info("averaged %d checkpoints (%s ... %s) into %s", len(paths), paths[0].name, paths[-1].name, out)


def add_params(sub) -> None:
    p = sub.add_parser("params", help="print a model's parameter count (e.g. --preset paper)")
    p.add_argument("config", nargs="?")
    p.add_argument("--preset")
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.add_argument("--src-vocab", type=int)
    p.add_argument("--tgt-vocab", type=int)
    p.set_defaults(func=cmd_params)


def cmd_params(args) -> None:
    from rnnsearch.nn.model import build_model

    overrides = list(args.set or [])
    if args.preset:
        overrides.append(f"preset={args.preset}")
    cfg = load_config(args.config, overrides)
    src_v = args.src_vocab or cfg.vocab.size
    tgt_v = args.tgt_vocab or cfg.vocab.size
    model = build_model(cfg.model, src_v, tgt_v)
    groups: dict[str, int] = {}
    for name, p in model.state_dict().items():  # named as the weights file names them
        groups[name.split(".")[0]] = groups.get(name.split(".")[0], 0) + p.numel()
    print(json.dumps({"arch": cfg.model.arch, "src_vocab": src_v, "tgt_vocab": tgt_v,
                      "parameters": model.num_parameters(), "by_module": groups}, indent=2))


def add_quickstart(sub) -> None:
    p = sub.add_parser("quickstart", help="train a tiny RNNsearch to reverse sequences (about a minute)")
    p.add_argument("--out", default="rnnsearch-quickstart")
    p.add_argument("--sentences", type=int, default=6000)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_quickstart)


def cmd_quickstart(args) -> None:
    from rnnsearch.config import config_from_dict
    from rnnsearch.engine.decode.loading import load
    from rnnsearch.engine.train.trainer import train
    from rnnsearch.tools.toy import write_toy_corpus

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
        print(ascii_attention(tr))
