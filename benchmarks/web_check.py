"""The page of `rnnsearch export --format web` against the CLI, on a test set: the page opened from
disk in headless Chromium (Playwright, Debian's chromium), every test sentence translated there,
and the translations compared with `rnnsearch translate --beam 1`'s (identical lines counted, BLEU
of each); attention rows checked to sum to 1; the folder's size and the page's seconds.

    python -m benchmarks.web_check --model runs/multi30k_de_en_cpu --web site/ \
        --src data/multi30k/test_2016_flickr.de.gz --ref data/multi30k/test_2016_flickr.en.gz

`--web` is the exported folder (written there first if absent, with `--quantize`; onnxruntime-web
from `--registry` or as the export fetches it). Prints one JSON object (docs/export.md).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
import time
from pathlib import Path

import torch

import rnnsearch
from benchmarks.common import cpu_features, cpu_name, print_result
from rnnsearch.engine.decode.evaluate import score_corpus
from rnnsearch.io import read_lines
from rnnsearch.tools.browser import export_web


def page_translate(site: Path, texts: list[str], chunk: int = 50) -> tuple[list[dict], float, float]:
    """The page's translations of `texts`, the seconds it took to load, and to translate."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            start = time.perf_counter()
            page.goto((site / "index.html").resolve().as_uri())
            page.wait_for_function("window.rnnsearchWeb && !document.getElementById('go').disabled",
                                   timeout=600_000)
            loaded = time.perf_counter() - start
            start, found = time.perf_counter(), []
            for k in range(0, len(texts), chunk):
                found += page.evaluate("texts => window.rnnsearchWeb.translate(texts)", texts[k:k + chunk])
            return found, loaded, time.perf_counter() - start
        finally:
            browser.close()


def manifest(site: Path) -> dict:
    """The export's manifest, from the page's model.js (``window.RNNSEARCH.model = {...};``)."""
    text = (site / "model.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("=") + 1:].rstrip().rstrip(";"))["manifest"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--web", required=True, type=Path)
    p.add_argument("--src", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--quantize", choices=["none", "int8"], default="none", help="of an export written here")
    p.add_argument("--registry", help="of an export written here (default: as rnnsearch export)")
    p.add_argument("--sentences", type=int, default=0, help="the first N test sentences (0: all)")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if not args.web.exists():
        export_web(args.model, args.web, quantize=args.quantize, registry=args.registry, progress=False)
    src, refs = read_lines(args.src), read_lines(args.ref)
    if args.sentences:
        src, refs = src[:args.sentences], refs[:args.sentences]
    start = time.perf_counter()
    want = [t.text for t in rnnsearch.load(args.model, device="cpu").translate(src, beam=1, precision="fp32")]
    cli_seconds = time.perf_counter() - start
    found, loaded, seconds = page_translate(args.web, src)
    got = [t["text"] for t in found]
    sums = [sum(row) for t in found for row in (t["attention"] or [])]
    files = {str(f.relative_to(args.web)): f.stat().st_size for f in sorted(args.web.rglob("*"))
             if f.is_file()}
    differing = [{"line": k + 1, "cli": b, "page": a} for k, (a, b) in enumerate(zip(got, want)) if a != b]
    result = {
        "date": datetime.date.today().isoformat(), "cpu": cpu_name(), "cpu_features": cpu_features(),
        "model": args.model, "quantize": manifest(args.web)["quantize"],
        "sentences": len(src), "identical": sum(a == b for a, b in zip(got, want)),
        "differing": differing[:20],
        "bleu": {"cli": round(score_corpus(want, refs)["bleu"], 2),
                 "page": round(score_corpus(got, refs)["bleu"], 2)},
        "attention_row_sum": {"min": round(min(sums), 6), "max": round(max(sums), 6)} if sums else None,
        "seconds": {"page_load": round(loaded, 2), "page_translate": round(seconds, 2),
                    "cli_translate": round(cli_seconds, 2)},
        "folder_bytes": sum(files.values()), "files": files,
        "command": "python -m benchmarks.web_check " + " ".join(argv or sys.argv[1:]),
    }
    print_result(result, *([args.out] if args.out else []), ensure_ascii=False)


if __name__ == "__main__":
    main()
