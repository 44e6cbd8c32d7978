"""`rnnsearch export`: a trained model out of PyTorch (engine/export/)."""

from __future__ import annotations

import json
from pathlib import Path

from rnnsearch.config import ConfigError


def add_export(sub) -> None:
    p = sub.add_parser("export", help="write a model as ONNX graphs a torch-free runtime translates with, "
                                      "or as a page that translates in the browser",
                       description="onnx: writes the encoder and the decoder step as ONNX graphs (dynamic "
                       "batch and source length), the tokenisers and manifest.json into a new folder, after "
                       "checking both graphs against PyTorch at several batch sizes and lengths; a model "
                       "that differs is not written. runtime/ (pip install ./runtime) translates with the "
                       "folder using numpy, onnxruntime and sentencepiece only. web: a static folder whose "
                       "index.html translates typed sentences in the browser (onnxruntime-web, fetched from "
                       "the npm registry at a pinned version and checksum) and shows their attention; it "
                       "works offline, opened from disk or from any static web host.")
    p.add_argument("--model", required=True, help="a model directory written by rnnsearch train")
    p.add_argument("--format", choices=["onnx", "web"], default="onnx", help="what to write (default onnx)")
    p.add_argument("--out", required=True, help="the folder to create (it must not exist)")
    p.add_argument("--quantize", choices=["none", "int8"], default="none",
                   help="int8: the checked graphs' matrix products quantised (onnxruntime dynamic "
                   "quantisation; docs/export.md has its BLEU and speed)")
    p.add_argument("--registry", help="web: the npm registry onnxruntime-web is fetched from (default "
                   "$RNNSEARCH_NPM_REGISTRY, then $npm_config_registry, then npm's public one)")
    p.add_argument("--cache", help="web: where the download is kept (default $RNNSEARCH_CACHE or "
                   "~/.cache/rnnsearch)")
    p.add_argument("--lang", choices=["en", "zh"], help="web: the page's labels (default en)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> None:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError as e:
        raise ConfigError(f"export: {e.name} is missing: pip install 'rnnsearch[onnx]'") from None
    web_only = [flag for flag, value in (("--registry", args.registry), ("--cache", args.cache),
                                         ("--lang", args.lang)) if value is not None]
    if args.format != "web" and web_only:
        raise ConfigError(f"export: {', '.join(web_only)} only with --format web")
    if args.format == "web":
        from rnnsearch.tools.browser import export_web

        written = export_web(args.model, args.out, quantize=args.quantize, registry=args.registry,
                             cache=args.cache, lang=args.lang or "en")
        shown = {"out": args.out, "open": str(Path(args.out) / "index.html"), "bytes": written["bytes"],
                 "files": written["files"]}
        print(json.dumps(shown, indent=1))
        return
    from rnnsearch.engine.export.onnx import export_onnx

    manifest = export_onnx(args.model, args.out, quantize=args.quantize)
    print(json.dumps({"out": args.out, "checked": manifest["checked"]}, indent=1))
