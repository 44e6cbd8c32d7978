"""`rnnsearch export --format web` (tools/browser.py, web/app.js): onnxruntime-web fetched
from a registry on 127.0.0.1, verified and cached; the page, opened from disk in headless Chromium,
translates typed sentences as `rnnsearch translate --beam 1` does, with attention rows summing to 1."""

import contextlib
import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import torch
from conftest import browser_page

pytest.importorskip("onnxruntime", reason="export needs the onnx extra (pip install -e '.[test]')")
pytest.importorskip("onnxscript", reason="export needs the onnx extra (pip install -e '.[test]')")

import rnnsearch  # noqa: E402
from rnnsearch.cli import main  # noqa: E402
from rnnsearch.config import ModelConfig  # noqa: E402
from rnnsearch.engine.checkpoint import save_weights  # noqa: E402
from rnnsearch.engine.data.vocab import SentencePiece  # noqa: E402
from rnnsearch.nn.model import build_model  # noqa: E402
from rnnsearch.tools import browser  # noqa: E402

TARBALL = os.environ.get("RNNSEARCH_ORT_WEB_TGZ")
SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3",
           "w9 w9 w8 w7 w6 w5 w4 w3 w2 w1 w0 w1 w2"]


def tarball_or_skip() -> Path:
    if not TARBALL or not Path(TARBALL).is_file():
        where = f"={TARBALL} is no file" if TARBALL else " is not set"
        pytest.skip(f"the browser page needs onnxruntime-web and RNNSEARCH_ORT_WEB_TGZ{where}: `npm pack "
                    f"onnxruntime-web@{browser.ORT_WEB_VERSION}` fetches the tarball to point it at "
                    "(.ci/run does)")
    return Path(TARBALL)


@contextlib.contextmanager
def registry(tarball: Path, tmp: Path):
    """An npm registry on 127.0.0.1 serving `tarball` at onnxruntime-web's path; yields (URL, the
    paths asked for)."""
    root = tmp / "registry"
    (root / Path(browser.ORT_WEB.path).parent).mkdir(parents=True)
    shutil.copyfile(tarball, root / browser.ORT_WEB.path)
    asked: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    handler = functools.partial(Handler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def export_web(model_dir: Path, out: Path, url: str, cache: Path) -> None:
    assert main(["export", "--model", str(model_dir), "--format", "web", "--out", str(out),
                 "--registry", url, "--cache", str(cache)]) == 0


def page_translations(folder: Path, texts: list[str]) -> tuple[list[str], list[dict], str]:
    """What the page, opened from disk, shows for `texts` typed into its form; the translations
    window.rnnsearchWeb gives them; and what a click on the first sentence's second word says."""
    with browser_page((folder / "index.html").as_uri()) as page:
        page.wait_for_function("window.rnnsearchWeb && !document.getElementById('go').disabled",
                               timeout=120_000)
        page.fill("#input", "\n".join(texts))
        page.click("#go")
        page.wait_for_function(f"document.querySelectorAll('#translations li').length === {len(texts)}",
                               timeout=120_000)
        shown = page.eval_on_selector_all("#translations li", "items => items.map(li => li.textContent)")
        found = page.evaluate("texts => window.rnnsearchWeb.translate(texts)", texts)
        page.click('.tok[data-side="target"][data-index="1"]')
        return shown, found, page.inner_text("#detail")


def test_the_page_translates_typed_sentences_as_the_cli_does(reverse_model, tmp_path):
    with registry(tarball_or_skip(), tmp_path) as (url, asked):
        export_web(reverse_model, tmp_path / "site", url, tmp_path / "cache")
        export_web(reverse_model, tmp_path / "again", url, tmp_path / "cache")
    assert asked == ["/" + browser.ORT_WEB.path]  # downloaded once, then taken from the cache
    site = tmp_path / "site"
    assert {str(p.relative_to(site)) for p in site.rglob("*") if p.is_file()} == {
        "index.html", "app.js", "model.js", "lib/onnxruntime-web.js", "lib/tokenizer.js",
        "lib/onnxruntime-web.package.json"}
    assert "http" not in (site / "index.html").read_text().replace("http-equiv", "")  # nothing from outside
    want = rnnsearch.load(reverse_model, device="cpu").translate(SOURCES, beam=1, precision="fp32")
    shown, found, detail = page_translations(site, SOURCES)
    assert shown == [t.text for t in want]
    for w, g in zip(want, found):
        assert g["tokens"] == w.tokens and g["source_tokens"] == w.source_tokens
        rows = torch.tensor(g["attention"], dtype=torch.float64)
        assert rows.shape == (len(w.tokens) + 1, len(w.source_tokens))
        assert torch.allclose(rows.sum(1), torch.ones(len(rows), dtype=torch.float64), atol=1e-5)
        assert torch.allclose(rows, torch.tensor(w.attention, dtype=torch.float64), atol=1e-4)
    assert detail.startswith(f"“{want[0].tokens[1]}” attends to")


def sentencepiece_variant(reverse_model: Path, tmp: Path) -> Path:
    """The toy model's directory with BPE tokenisers built on text with accents and full-width
    forms (so the normaliser matters), the source reversed, long sources split, random weights."""
    out = tmp / "bpe"
    shutil.copytree(reverse_model, out, ignore=shutil.ignore_patterns("prepared", "*.safetensors", "*.txt"))
    text = ["Ein Mädchen läuft über die Straße .", "Zwei Männer spielen Fußball im Park .",
            "Ａｌｌｅ ﬁnden das Café schön !", "Der Hund schläft unter dem Baum ."] * 20
    src, tgt = SentencePiece.build(text, 60, "bpe"), SentencePiece.build([t.lower() for t in text], 50, "bpe")
    src.save(out / "src.spm.model")
    tgt.save(out / "tgt.spm.model")
    cfg = json.loads((out / "config.json").read_text())
    cfg["vocab"].update(kind="bpe", joint=False)
    cfg["data"]["reverse_source"] = True
    cfg["decode"]["max_source_len"] = 6
    (out / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(1)
    net = build_model(ModelConfig(**cfg["model"]), len(src), len(tgt))
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.4)
    save_weights(out / "model.safetensors", net)
    return out


def test_sentencepiece_models_reversed_and_split_sources_translate_alike(reverse_model, tmp_path):
    model_dir = sentencepiece_variant(reverse_model, tmp_path)
    with registry(tarball_or_skip(), tmp_path) as (url, _):
        export_web(model_dir, tmp_path / "site", url, tmp_path / "cache")
    texts = ["Ein Mädchen spielt im Café .", "ＺＷＥＩ Hunde\tschlafen  unter dem Baum und ﬁnden den Ball !",
             "Straße", "Der Park ist schön ."]
    want = rnnsearch.load(model_dir, device="cpu").translate(texts, beam=1, precision="fp32")
    shown, found, _ = page_translations(tmp_path / "site", texts)
    assert shown == [t.text for t in want]
    for w, g in zip(want, found):
        assert g["source_tokens"] == w.source_tokens and g["tokens"] == w.tokens
        assert torch.allclose(torch.tensor(g["attention"], dtype=torch.float64),
                              torch.tensor(w.attention, dtype=torch.float64), atol=1e-4)


def test_an_rnnencdec_page_translates_without_attention(reverse_model, tmp_path):
    out = tmp_path / "encdec"
    shutil.copytree(reverse_model, out, ignore=shutil.ignore_patterns("prepared", "*.safetensors"))
    cfg = json.loads((out / "config.json").read_text())
    cfg["model"].update(arch="rnnencdec", gru="cudnn")
    (out / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(2)
    words = [len((out / name).read_text().splitlines()) for name in ("src.vocab.txt", "tgt.vocab.txt")]
    net = build_model(ModelConfig(**cfg["model"]), *words)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.4)
    save_weights(out / "model.safetensors", net)
    with registry(tarball_or_skip(), tmp_path) as (url, _):
        export_web(out, tmp_path / "site", url, tmp_path / "cache")
    want = rnnsearch.load(out, device="cpu").translate(SOURCES[:3], beam=1, precision="fp32")
    with browser_page((tmp_path / "site" / "index.html").as_uri()) as page:
        page.wait_for_function("window.rnnsearchWeb && !document.getElementById('go').disabled",
                               timeout=120_000)
        found = page.evaluate("texts => window.rnnsearchWeb.translate(texts)", SOURCES[:3])
    assert [g["text"] for g in found] == [w.text for w in want]
    assert all(g["attention"] is None for g in found)


def test_a_tarball_that_fails_its_checksum_leaves_nothing(reverse_model, tmp_path, capsys):
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(b"not onnxruntime-web" * 1000)
    with registry(bad, tmp_path) as (url, _):
        assert main(["export", "--model", str(reverse_model), "--format", "web", "--out",
                     str(tmp_path / "site"), "--registry", url, "--cache", str(tmp_path / "cache")]) != 0
    err = capsys.readouterr().err
    assert f"expected {browser.ORT_WEB.size:,} bytes" in err and "removed" in err
    assert not (tmp_path / "site").exists() and not list((tmp_path / "cache").rglob("*.tgz*"))


def test_an_export_target_that_exists_or_a_folder_without_a_model_is_named(reverse_model, tmp_path, capsys):
    (tmp_path / "site").mkdir()
    assert main(["export", "--model", str(reverse_model), "--format", "web", "--out", str(tmp_path / "site"),
                 "--cache", str(tmp_path / "cache")]) != 0
    assert f"{tmp_path / 'site'} exists" in capsys.readouterr().err
    assert main(["export", "--model", str(tmp_path), "--format", "web", "--out", str(tmp_path / "new"),
                 "--cache", str(tmp_path / "cache")]) != 0
    assert "not an rnnsearch model directory" in capsys.readouterr().err
    assert not (tmp_path / "new").exists() and not (tmp_path / "cache").exists()
    assert main(["export", "--model", str(reverse_model), "--out", str(tmp_path / "new"),
                 "--lang", "zh"]) != 0
    assert "--lang only with --format web" in capsys.readouterr().err
