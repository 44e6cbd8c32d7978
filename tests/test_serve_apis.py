"""`rnnsearch serve` as the clients people already have see it: LibreTranslate's (libretranslatepy,
deep-translator) and DeepL's official SDK, driven through their own calls against a live server on
127.0.0.1, over two models; then keys, limits, metrics, CORS and the SIGTERM drain."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
pytest.importorskip("uvicorn", reason="serve needs uvicorn (pip install -e '.[test]')")
libre_client = pytest.importorskip("libretranslatepy", reason="pip install -e '.[test]'")
deepl = pytest.importorskip("deepl", reason="pip install -e '.[test]'")
deep_translator = pytest.importorskip("deep_translator", reason="pip install -e '.[test]'")
pytest.importorskip("prometheus_client", reason="pip install -e '.[test]'")
requests = pytest.importorskip("requests", reason="pip install -e '.[test]'")

from conftest import toy_config  # noqa: E402
from serving import LiveServer, Slow  # noqa: E402

from rnnsearch.engine.decode.loading import load  # noqa: E402
from rnnsearch.engine.train.trainer import train  # noqa: E402
from rnnsearch.io import DataError  # noqa: E402
from rnnsearch.serve import Access, Limits, create_app  # noqa: E402
from rnnsearch.serve.app import drain_and_exit  # noqa: E402
from rnnsearch.serve.guard import Guard, read_keys  # noqa: E402
from rnnsearch.serve.hosted import model_languages, parse_model_spec  # noqa: E402

deepl.http_client.max_network_retries = 0  # a 429 is asserted, not retried for a minute


@pytest.fixture(scope="module")
def de_en(reverse_model):
    return load(reverse_model, device="cpu")


@pytest.fixture(scope="module")
def fr_en(tmp_path_factory):
    """A second model whose source words are v0..v9 (the first's are w0..w9): one epoch, enough to
    tell which model answered."""
    cfg = toy_config(tmp_path_factory.mktemp("fr_en"), "model", max_epochs=1)
    for key in ("train_src", "valid_src"):
        path = Path(getattr(cfg.data, key))
        path.write_text(path.read_text().replace("w", "v"))
    return load(train(cfg), device="cpu")


def server(models, **access):
    limits = Limits(max_wait_ms=5, max_sentences=8, max_chars=200)
    return LiveServer(create_app(models, limits, access=Access(**access)))


@pytest.fixture(scope="module")
def two(de_en, fr_en):
    with server({"de-en": de_en, "fr-en": fr_en}, metrics=True) as live:
        yield live


def best(translator, text: str) -> str:
    return translator.translate([text], attention=False)[0].text


# ------------------------------------------------------------------------------ LibreTranslate

def test_libretranslatepy_translates_detects_and_lists(two, de_en, fr_en):
    lt = libre_client.LibreTranslateAPI(two.url)
    assert lt.translate("w1 w2 w3", "de", "en") == best(de_en, "w1 w2 w3") == "w3 w2 w1"
    assert lt.translate("v1 v2 v3", "fr", "en") == best(fr_en, "v1 v2 v3")
    assert lt.translate("w1 w2 w3", "auto", "en") == "w3 w2 w1"
    assert lt.detect("w4 w5 w6")[0] == {"confidence": 100.0, "language": "de"}
    assert lt.detect("v4 v5 v6")[0]["language"] == "fr"
    assert lt.languages() == [{"code": "de", "name": "German", "targets": ["en"]},
                              {"code": "en", "name": "English", "targets": []},
                              {"code": "fr", "name": "French", "targets": ["en"]}]


def test_libretranslatepy_unsupported_language_is_a_400(two):
    lt = libre_client.LibreTranslateAPI(two.url)
    with pytest.raises(urllib.error.HTTPError) as e:
        lt.translate("w1 w2", "de", "xx")
    assert e.value.code == 400 and json.loads(e.value.read()) == {"error": "xx is not supported"}
    with pytest.raises(urllib.error.HTTPError) as e:
        lt.translate("w1 w2", "en", "de")
    assert json.loads(e.value.read()) == {"error": "en is not supported"}
    with pytest.raises(urllib.error.HTTPError) as e:
        lt.translate("w1 w2", "de", "fr")
    assert json.loads(e.value.read()) == {
        "error": "French (fr) is not available as a target language from German (de)"}


def test_deep_translator_one_and_many(two, de_en):
    from deep_translator import LibreTranslator
    from deep_translator.exceptions import ServerException

    client = LibreTranslator(source="de", target="en", api_key="any", custom_url=two.url + "/")
    assert client.translate("w5 w6 w7") == best(de_en, "w5 w6 w7")
    assert client.translate_batch(["w1 w2", "w3 w4 w5"]) == [best(de_en, "w1 w2"), best(de_en, "w3 w4 w5")]
    with pytest.raises(ServerException):  # Spanish: a language deep-translator knows, no model here
        LibreTranslator(source="de", target="es", api_key="any", custom_url=two.url + "/").translate("w1")


def test_json_list_auto_alternatives_and_lines(two, de_en, fr_en):
    """Mastodon's way: JSON with a list q; source auto per text; n-best alternatives; line breaks."""
    status, _, body = two.request("/translate", {"q": ["w1 w2 w3", "v1 v2", "w4\n\nw5 w6"],
                                                 "source": "auto", "target": "en", "alternatives": 2})
    assert status == 200
    assert body["translatedText"] == [best(de_en, "w1 w2 w3"), best(fr_en, "v1 v2"),
                                      best(de_en, "w4") + "\n\n" + best(de_en, "w5 w6")]
    assert [d["language"] for d in body["detectedLanguage"]] == ["de", "fr", "de"]
    n_best = de_en.translate_n_best(["w1 w2 w3"], beam=3, n_best=3, attention=False)[0]
    assert body["alternatives"][0] == [t.text for t in n_best[1:] if t.text != n_best[0].text]
    assert len(body["alternatives"]) == 3 and all(len(a) <= 2 for a in body["alternatives"])


def test_form_query_string_and_multipart_fields(two, de_en):
    expected = best(de_en, "w2 w3")
    fields = {"q": "w2 w3", "source": "de", "target": "en"}
    assert requests.post(two.url + "/translate", params=fields).json() == {"translatedText": expected}
    assert requests.post(two.url + "/translate", data=fields).json() == {"translatedText": expected}
    multipart = {k: (None, v) for k, v in fields.items()}
    assert requests.post(two.url + "/translate", files=multipart).json() == {"translatedText": expected}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    answer = requests.get(two.url + "/languages", data=b"", headers=form)
    assert answer.status_code == 200 and len(answer.json()) == 3


def test_libre_errors_and_html(two, de_en):
    post = lambda body: two.request("/translate", body)  # noqa: E731
    assert post({"q": "", "source": "de", "target": "en"})[2] == {
        "error": "Invalid request: missing q parameter"}
    assert post({"q": "w1", "target": "en"})[2] == {"error": "Invalid request: missing source parameter"}
    assert post({"q": "w1", "source": "de", "target": "en", "format": "pdf"})[2] == {
        "error": "pdf format is not supported"}
    assert post({"q": "w1 " * 100, "source": "de", "target": "en"})[2] == {
        "error": "Invalid request: request (300) exceeds text limit (200)"}
    assert post({"q": ["w1"] * 9, "source": "de", "target": "en"})[2] == {
        "error": "Invalid request: request (9) exceeds text limit (8)"}
    assert post({"q": "w1", "source": "de", "target": "en", "alternatives": "x"})[0] == 400
    status, _, body = post({"q": "w1 <b>w2</b> w3", "source": "de", "target": "en", "format": "html"})
    assert status == 200 and body["translatedText"] == "w3 <b>w2</b> w1"
    status, _, body = two.request("/detect", {"q": "w1 w2"})
    assert status == 200 and body[0]["language"] == "de"
    status, _, body = two.request("/frontend/settings")
    assert body["charLimit"] == 200 and body["language"]["source"] == {"code": "de", "name": "German"}


# --------------------------------------------------------------------------------------- DeepL

def test_deepl_sdk_translates_lists_languages_and_usage(two, de_en, fr_en):
    client = deepl.Translator("any-key", server_url=two.url)
    one = client.translate_text("w1 w2 w3", source_lang="DE", target_lang="EN-US")
    assert (one.text, one.detected_source_lang, one.billed_characters) == ("w3 w2 w1", "DE", 8)
    many = client.translate_text(["w4 w5", "v4 v5"], target_lang="EN-GB")
    assert [r.text for r in many] == [best(de_en, "w4 w5"), best(fr_en, "v4 v5")]
    assert [r.detected_source_lang for r in many] == ["DE", "FR"]
    html = client.translate_text("w1 <i>w2</i> w3", source_lang="DE", target_lang="EN-US",
                                 tag_handling="html")
    assert html.text == "w3 <i>w2</i> w1"
    assert [(lang.code, lang.name) for lang in client.get_source_languages()] == [("DE", "German"),
                                                                                   ("FR", "French")]
    assert [lang.code for lang in client.get_target_languages()] == ["EN-GB", "EN-US"]
    usage = client.get_usage()
    assert usage.character.count >= 8 + 10 + 11 and not usage.any_limit_reached
    with pytest.raises(deepl.DeepLException, match="target_lang"):
        client.translate_text("w1", target_lang="ES")


def test_deepl_keys_quota_and_rate(de_en):
    with server({"de-en": de_en}, keys={"k1", "k2"}, char_quota=10, req_limit=4) as live:
        with pytest.raises(deepl.AuthorizationException):
            deepl.Translator("wrong", server_url=live.url).translate_text("w1", target_lang="EN-US")
        ok = deepl.Translator("k1", server_url=live.url)
        assert ok.translate_text("w1 w2", target_lang="EN-US").text == best(de_en, "w1 w2")
        with pytest.raises(deepl.QuotaExceededException):
            ok.translate_text("w1 w2 w3 w4", target_lang="EN-US")  # 5 + 11 characters > 10
        assert ok.get_usage().character.count == 5 and ok.get_usage().character.limit == 10
        with pytest.raises(deepl.TooManyRequestsException):  # the 5th request of k1 this minute
            ok.get_usage()
        other = deepl.Translator("k2", server_url=live.url)  # a key of its own: its own minute
        assert other.translate_text("w3", target_lang="EN-US").text == best(de_en, "w3")


def test_deepl_form_body_and_mastodon_html_auto(two, de_en, fr_en):
    """DeepL's form encoding (repeated text=), and Mastodon's LibreTranslate call: a JSON list q of
    html, source auto, answered with a list of detected languages."""
    form = [("text", "w1 w2"), ("text", "v1 v2"), ("target_lang", "EN")]
    answer = requests.post(two.url + "/v2/translate", data=form,
                           headers={"Authorization": "DeepL-Auth-Key any"}).json()
    assert answer == {"translations": [
        {"detected_source_language": "DE", "text": best(de_en, "w1 w2"), "billed_characters": 5},
        {"detected_source_language": "FR", "text": best(fr_en, "v1 v2"), "billed_characters": 5}]}
    status, _, body = two.request("/translate", {"q": ["<p>w1 <b>w2</b> w3</p>", "<br>", ""],
                                                 "source": "auto", "target": "en", "format": "html"})
    assert status == 200 and body["translatedText"] == ["<p>w3 <b>w2</b> w1</p>", "<br>", ""]
    assert body["detectedLanguage"][0] == {"confidence": 100.0, "language": "de"}


# ---------------------------------------------------------------------- keys, rate, metrics, CORS

def test_keys_on_every_api(de_en):
    from deep_translator import LibreTranslator
    from deep_translator.exceptions import AuthorizationException

    with server({"de-en": de_en}, keys={"secret"}) as live:
        with pytest.raises(urllib.error.HTTPError) as e:
            libre_client.LibreTranslateAPI(live.url).translate("w1", "de", "en")
        assert e.value.code == 403 and "API key" in json.loads(e.value.read())["error"]
        with pytest.raises(urllib.error.HTTPError) as e:
            libre_client.LibreTranslateAPI(live.url, api_key="nope").detect("w1")
        assert e.value.code == 403 and json.loads(e.value.read()) == {"error": "Invalid API key"}
        assert libre_client.LibreTranslateAPI(live.url, api_key="secret").translate("w1 w2", "de", "en")
        with pytest.raises(AuthorizationException):
            LibreTranslator(source="de", target="en", api_key="nope",
                            custom_url=live.url + "/").translate("w1")
        status, _, body = live.request("/translate", {"text": "w1"})
        assert status == 403 and body["error"].startswith("Please contact")
        bearer = {"Authorization": "Bearer secret"}
        status, _, body = live.request("/translate", {"text": "w1"}, headers=bearer)
        assert status == 200
        assert live.request("/languages")[0] == 200  # listing languages needs no key, as LibreTranslate's


def test_rate_limit_answers_429_with_retry_after(de_en):
    with server({"de-en": de_en}, req_limit=2) as live:
        lt = libre_client.LibreTranslateAPI(live.url)
        lt.translate("w1", "de", "en")
        lt.translate("w2", "de", "en")
        with pytest.raises(urllib.error.HTTPError) as e:
            lt.translate("w3", "de", "en")
        assert e.value.code == 429 and 1 <= int(e.value.headers["Retry-After"]) <= 60
        assert json.loads(e.value.read()) == {"error": "Slowdown: 2 per 1 minute"}


def test_guard_window_slides_and_forgets():
    now = [0.0]
    guard = Guard(req_limit=2, clock=lambda: now[0])
    assert guard.admit(None, "a") is None and guard.admit(None, "a") is None
    denial = guard.admit(None, "a")
    assert denial.kind == "rate" and denial.retry_after == 60
    assert guard.admit(None, "b") is None  # another address
    now[0] = 45.0
    assert guard.admit(None, "a").retry_after == 15
    now[0] = 60.5
    assert guard.admit(None, "a") is None


def test_metrics_cors_and_info(two):
    two.request("/translate", {"text": "w1 w2", "model": "fr-en"})
    two.request("/nowhere")
    with urllib.request.urlopen(two.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
        assert r.headers["Access-Control-Allow-Origin"] == "*"
    assert 'rnnsearch_requests_total{route="/translate",status="200"}' in text
    assert 'rnnsearch_requests_total{route="other",status="404"}' in text
    assert 'rnnsearch_batch_sentences_count{model="fr-en"}' in text
    assert 'rnnsearch_queue_sentences{model="de-en"} 0.0' in text
    assert "rnnsearch_request_seconds_bucket" in text
    req = urllib.request.Request(two.url + "/translate", method="OPTIONS")
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200 and r.headers["Access-Control-Allow-Methods"] == "GET, POST"
    info = two.request("/info")[2]
    assert list(info["models"]) == ["de-en", "fr-en"]
    assert all(m["memory_bytes"] > 4 * m["parameters"] - 1 for m in info["models"].values())
    assert two.request("/translate", {"text": "w1", "model": "xx-en"})[2]["field"] == "model"


def test_metrics_token(de_en):
    with server({"de-en": de_en}, metrics=True, metrics_token="t0ken") as live:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(live.url + "/metrics", timeout=30)
        assert e.value.code == 401
        req = urllib.request.Request(live.url + "/metrics", headers={"Authorization": "Bearer t0ken"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert b"rnnsearch_requests_total" in r.read()


# ------------------------------------------------------------------------------------- the drain

def test_sigterm_drains_accepted_requests_and_refuses_new_ones(de_en):
    app = create_app({"de-en": Slow(de_en, 1.5)}, Limits(max_wait_ms=0))
    live = LiveServer(app, server_class=drain_and_exit(app, timeout=30))
    with live:
        answers = {}
        # three words: the fixture learns sentences of 3-7 (a 2-word one is outside what it saw)
        first = lambda: answers.update(first=live.request("/translate", {"text": "w1 w2 w3"}))  # noqa: E731
        slow = threading.Thread(target=first)
        slow.start()
        deadline = time.time() + 10
        while app.in_flight == 0:
            assert time.time() < deadline
            time.sleep(0.01)
        live.server.handle_exit(signal.SIGTERM, None)
        status, headers, body = live.request("/translate", {"text": "w3"})
        assert status == 503 and body == {"error": "server shutting down"} and headers["retry-after"] == "1"
        slow.join(timeout=20)
        assert answers["first"][0] == 200 and answers["first"][2]["translation"]["text"] == "w3 w2 w1"
        live.thread.join(timeout=20)
        assert not live.thread.is_alive()  # it stopped by itself once nothing was in flight


def test_serve_process_exits_0_on_sigterm(reverse_model, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# operators\nk1\n\nk2\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "rnnsearch", "serve", "--model",
                             f"de-en={reverse_model}", "--port", str(port), "--api-keys", str(keys),
                             "--metrics"],
                            env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                lt = libre_client.LibreTranslateAPI(f"http://127.0.0.1:{port}", api_key="k2")
                assert lt.translate("w1 w2 w3", "de", "en") == "w3 w2 w1"
                break
            except (ConnectionError, urllib.error.URLError):
                assert time.time() < deadline and proc.poll() is None, proc.stderr.read()
                time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert "drained and stopped" in proc.stderr.read()
    finally:
        proc.kill()


# ----------------------------------------------------------------------- names, keys files, specs

def test_model_names_and_languages(de_en, tmp_path):
    assert parse_model_spec("de-en=runs/a") == ("de-en", "runs/a")
    assert parse_model_spec("runs/a") == (None, "runs/a")
    with pytest.raises(DataError, match="SRC-TGT=DIR"):
        parse_model_spec("=runs/a")
    with pytest.raises(DataError, match="SRC-TGT"):
        model_languages("german-english", de_en.cfg, "runs/a")
    cfg = de_en.cfg
    saved = (cfg.data.train_src, cfg.data.train_tgt)
    try:
        cfg.data.train_src, cfg.data.train_tgt = "data/multi30k/train.de.gz", "data/multi30k/train.en.gz"
        assert model_languages(None, cfg, "runs/a") == ("de", "en")
        cfg.data.train_src, cfg.data.train_tgt = saved
        with pytest.raises(DataError, match="name them: --model de-en=runs/a"):
            model_languages(None, cfg, "runs/a")  # train.src / train.tgt say nothing
    finally:
        cfg.data.train_src, cfg.data.train_tgt = saved
    with pytest.raises(DataError, match="two models are named de-en"):
        create_app([("de-en", de_en), ("de-en", de_en)])


def test_keys_file_errors(tmp_path):
    path = tmp_path / "keys"
    path.write_text("good\nbad key\n")
    with pytest.raises(DataError, match=r"keys:2: a key may not contain spaces"):
        read_keys(str(path))
    path.write_text("# nothing\n\n")
    with pytest.raises(DataError, match="no keys"):
        read_keys(str(path))
    with pytest.raises(DataError, match="no such file"):
        read_keys(str(tmp_path / "absent"))
