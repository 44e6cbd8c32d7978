"""`rnnsearch export --format web`: a model live in the browser, offline, with no server.

The folder holds a page (the attention explorer of tools/explorer.py, with a form above it), the
model as ONNX graphs (onnx.py's, checked against PyTorch), onnxruntime-web, and a tokeniser
equal to sentencepiece (web/tokenizer.js). The page translates greedily, as the torch-free
runtime does with beam 1 (web/app.js): a typed sentence gets `rnnsearch translate --beam 1`'s
translation, and a click on a translated word shows where its attention fell.

Every file the page reads is a classic script (``window.RNNSEARCH.<part> = ...``; binary files as
base64), so the page also works opened from disk: a file:// page may load neither ES modules nor
files by fetch(). That costs a third more bytes than binary files would (docs/export.md: sizes).

onnxruntime-web comes from the npm registry at a pinned version whose tarball must have the
pinned size and SHA-256 (tools/download.py's fetch: cached under ``$RNNSEARCH_CACHE``, resumed,
verified); ``--registry URL`` (or ``$RNNSEARCH_NPM_REGISTRY``, or npm's own
``$npm_config_registry``) fetches the same path from another registry. It is never part of
rnnsearch's own files: only an export's folder holds it, its licence notice on its first lines.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from rnnsearch.config import ConfigError
from rnnsearch.engine.checkpoint import read_config
from rnnsearch.engine.data.vocab import load_tokenizers
from rnnsearch.engine.export.onnx import export_onnx
from rnnsearch.io import default_cache
from rnnsearch.tools.download import DownloadError, Remote, fetch
from rnnsearch.tools.explorer import explorer_html, vocabulary_font_text

ORT_WEB_VERSION = "1.31.1"
ORT_WEB = Remote(f"https://registry.npmjs.org/onnxruntime-web/-/onnxruntime-web-{ORT_WEB_VERSION}.tgz",
                 sha256="bdccdb9fbb9ab537247c0c734e9b1d2b1b338b4f2a09faa58f0dc1cfa27c312c", size=34_586_352)
# The ES module with its WebAssembly glue bundled in (nothing more to import; its first lines are
# the MIT licence notice), the SIMD binary it runs, and the package's description (version, licence).
ORT_FILES = {"module": "package/dist/ort.wasm.bundle.min.mjs",
             "wasm": "package/dist/ort-wasm-simd-threaded.wasm", "package": "package/package.json"}
ASSETS = Path(__file__).parent / "web"

# The page's scripts, in order: the labels, then each part, then the translator (web/app.js).
_SCRIPTS = """<script>window.RNNSEARCH = {labels: __LABELS__};</script>
<script src="lib/onnxruntime-web.js"></script>
<script src="lib/tokenizer.js"></script>
<script src="model.js"></script>
<script src="app.js"></script>"""


def default_registry() -> str | None:
    """Where onnxruntime-web is fetched from instead of npm's public registry, if anywhere."""
    return os.environ.get("RNNSEARCH_NPM_REGISTRY") or os.environ.get("npm_config_registry") or None


def onnxruntime_web(cache: Path, registry: str | None = None, progress: bool = True) -> dict[str, bytes]:
    """onnxruntime-web's files the page needs (ORT_FILES), from the verified, cached tarball."""
    tarball = fetch(ORT_WEB, cache, mirror=registry, progress=progress)
    out = {}
    with tarfile.open(tarball) as tar:
        for key, member in ORT_FILES.items():
            try:
                f = tar.extractfile(member)
            except KeyError:
                f = None
            if f is None:
                raise DownloadError(f"{tarball}: no {member} in onnxruntime-web {ORT_WEB_VERSION}'s tarball")
            out[key] = f.read()
    return out


def _script(path: Path, part: str, value) -> None:
    """A classic script that sets window.RNNSEARCH[part] to `value` (JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    path.write_text(f"window.RNNSEARCH.{part} = {text};\n", encoding="utf-8")


def export_web(model_dir: str | Path, out: str | Path, quantize: str = "none", registry: str | None = None,
               cache: str | Path | None = None, lang: str = "en", progress: bool = True) -> dict:
    """Write the static page for `model_dir`'s model into the new folder `out`; returns the
    folder's files and sizes. A folder that exists, a model that does not export, or an
    onnxruntime-web that does not download or verify leave nothing behind."""
    out, model_dir = Path(out), Path(model_dir)
    if out.exists():
        raise ConfigError(f"{out} exists: export writes a new folder (remove it or choose another)")
    if lang not in ("en", "zh"):
        raise ConfigError(f"export: --lang must be en or zh, got {lang!r}")
    cfg = read_config(model_dir)
    src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
    ort = onnxruntime_web(Path(cache) if cache else default_cache(), registry or default_registry(), progress)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        graphs, site = Path(tmp) / "onnx", Path(tmp) / "site"
        manifest = export_onnx(model_dir, graphs, quantize=quantize)
        _write_site(site, graphs, manifest, ort)
        fonts = vocabulary_font_text(src_tok, tgt_tok)
        page = explorer_html([], lang, live=True, font_text=fonts, default_beam=1, live_script=_SCRIPTS)
        (site / "index.html").write_text(page, encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        for path in [site, *site.rglob("*")]:  # a temporary folder is private; the page is not
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
        site.rename(out)
        site.mkdir()  # for TemporaryDirectory's cleanup
    files = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    return {"out": str(out), "bytes": sum(files.values()), "files": files, "quantize": quantize,
            "onnxruntime_web": ORT_WEB_VERSION}


def _write_site(site: Path, graphs: Path, manifest: dict, ort: dict[str, bytes]) -> None:
    """The page's scripts: onnxruntime-web, the tokeniser, the model (graphs and tokeniser files
    as base64, beside the manifest) and the translator."""
    (site / "lib").mkdir(parents=True)
    module, wasm = ort["module"].decode("utf-8"), base64.b64encode(ort["wasm"]).decode("ascii")
    _script(site / "lib" / "onnxruntime-web.js", "ort", {"module": module, "wasm": wasm})
    (site / "lib" / "onnxruntime-web.package.json").write_bytes(ort["package"])
    tokenizer = (ASSETS / "tokenizer.js").read_text(encoding="utf-8")
    _script(site / "lib" / "tokenizer.js", "tokenizer", tokenizer)
    tok = manifest["tokenizer"]
    names = dict.fromkeys([manifest["encoder"], manifest["step"], tok["source"], tok["target"]])
    files = {name: base64.b64encode((graphs / name).read_bytes()).decode("ascii") for name in names}
    _script(site / "model.js", "model", {"manifest": manifest, "files": files})
    shutil.copyfile(ASSETS / "app.js", site / "app.js")
