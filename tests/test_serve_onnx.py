"""`rnnsearch serve --backend onnx` (serve/exported.py): the toy model exported as tests/test_export.py
exports it, served beside the same model on the torch backend; every API answers as the torch one
does, what the runtime lacks is refused by name, and a folder that is no export says what to do."""

from __future__ import annotations

import json
import shutil
import urllib.request

import numpy as np
import pytest

pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
pytest.importorskip("uvicorn", reason="serve needs uvicorn (pip install -e '.[test]')")

from serving import LiveServer  # noqa: E402
from test_export import exported  # noqa: E402, F401 — the fixture: the toy model exported once

from rnnsearch.cli import main  # noqa: E402
from rnnsearch.config import ConfigError  # noqa: E402
from rnnsearch.engine.decode.loading import load  # noqa: E402
from rnnsearch.io import DataError  # noqa: E402
from rnnsearch.serve import Limits, create_app  # noqa: E402
from rnnsearch.serve.app import load_models  # noqa: E402

OFF = "not available with --backend onnx"
SENTENCES = ["w1 w2 w3", "w5 w6 w7 w8", "w9 w4", "w3 w3 w1 w7 w2 w6 w8"]


@pytest.fixture(scope="module")
def models(reverse_model, exported):  # noqa: F811
    """(torch Translator, onnx ExportedTranslator) of the same model, the latter loaded as serve
    loads a --model with --backend onnx."""
    [(name, onnx_model)] = load_models([f"de-en={exported}"], backend="onnx")
    assert name == "de-en"
    return load(reverse_model, device="cpu"), onnx_model


@pytest.fixture(scope="module")
def servers(models):
    """Live servers, torch and onnx, over the same model named de-en with the same limits."""
    limits = Limits(max_wait_ms=5, max_sentences=8, max_chars=200)
    with LiveServer(create_app({"de-en": models[0]}, limits)) as torch_live, \
            LiveServer(create_app({"de-en": models[1]}, limits)) as onnx_live:
        yield torch_live, onnx_live


def both(servers, path: str, body: dict | None) -> tuple[dict, dict]:
    """The torch server's and the onnx server's answers to one request, both asserted 200."""
    answers = [live.request(path, body) for live in servers]
    assert [a[0] for a in answers] == [200, 200], answers
    return answers[0][2], answers[1][2]


def assert_same_translation(got: dict, want: dict) -> None:
    """One native-API translation: text, tokens, links and n-best equal, score and attention close."""
    assert got["text"] == want["text"] and got["tokens"] == want["tokens"]
    assert got["score"] == pytest.approx(want["score"], abs=1e-4)
    assert got.get("alignment") == want.get("alignment")
    assert [e["text"] for e in got.get("n_best", [])] == [e["text"] for e in want.get("n_best", [])]
    assert [e.get("alignment") for e in got.get("n_best", [])] == [e.get("alignment")
                                                                  for e in want.get("n_best", [])]
    if "attention" in want:
        g, w = got["attention"], want["attention"]
        assert g["source"] == w["source"] and g["target"] == w["target"]
        assert np.allclose(np.array(g["weights"]), np.array(w["weights"]), atol=1e-4)


@pytest.mark.parametrize("settings", [dict(beam=1), dict(beam=3), dict(beam=4, n_best=3)],
                         ids=["greedy", "beam", "n_best"])
def test_native_answers_equal_the_torch_backends(servers, settings):
    want, got = both(servers, "/translate", {"texts": SENTENCES, "attention": True, "alignment": True,
                                             **settings})
    assert len(got["translations"]) == len(SENTENCES)
    for g, w in zip(got["translations"], want["translations"]):
        assert_same_translation(g, w)
    assert got["translations"][0]["alignment"] == [[0, 2], [1, 1], [2, 0]]  # the reversal's mirror
    want, got = both(servers, "/translate", {"text": "w1 w2 w3 w4", "attention": True, **settings})
    assert_same_translation(got["translation"], want["translation"])


def test_html_format_and_defaults_answer_as_torch(servers):
    want, got = both(servers, "/translate", {"text": "w1 <b>w2</b> w3", "format": "html"})
    assert got == want and got["translation"]["text"] == "w3 <b>w2</b> w1"
    want, got = both(servers, "/translate", {"texts": ["w4 w5 w6"], "prefixes": [None]})  # null: none
    assert got["translations"][0]["text"] == want["translations"][0]["text"] == "w6 w5 w4"


def test_libretranslate_and_deepl_answer_as_torch(servers):
    want, got = both(servers, "/translate", {"q": ["w1 w2 w3", "w4 w5\n\nw6 w7"], "source": "de",
                                             "target": "en", "alternatives": 2})
    assert got == want and got["translatedText"][0] == "w3 w2 w1"
    want, got = both(servers, "/translate", {"q": "w7 w8 w9", "source": "auto", "target": "en"})
    assert got == want and got["detectedLanguage"]["language"] == "de"
    want, got = both(servers, "/v2/translate", {"text": ["w1 w2 w3", "w5 w6"], "target_lang": "EN-US"})
    assert got == want and got["translations"][0]["text"] == "w3 w2 w1"


def test_info_says_onnx_and_the_live_page_is_served(servers, models, exported):  # noqa: F811
    torch_model, _ = models
    _, info = both(servers, "/info", None)
    assert info["backend"] == "onnx" and "backend" not in servers[0].request("/info")[2]
    assert info["quantize"] == "none" and info["device"] == "cpu" and info["arch"] == "rnnsearch"
    assert info["parameters"] == torch_model.parameters
    assert info["vocab"] == {"kind": "word", "source": len(torch_model.src_tok),
                             "target": len(torch_model.tgt_tok)}
    assert info["decode"] == {"beam": 3, "alpha": torch_model.cfg.decode.alpha,
                              "max_len_ratio": torch_model.cfg.decode.max_len_ratio}
    graphs = (exported / "encoder.onnx").stat().st_size + (exported / "step.onnx").stat().st_size
    assert info["models"]["de-en"]["memory_bytes"] == graphs
    with urllib.request.urlopen(servers[1].url + "/", timeout=30) as page:
        assert page.status == 200 and b"<html" in page.read()


REFUSED = [
    ({"text": "w1 w2", "sample": 2}, "sample"),
    ({"text": "w1 w2", "links": "head"}, "links"),
    ({"text": "w1 w2", "links": "saliency", "alignment": True}, "links"),
    ({"text": "w1 w2", "links": "mean"}, "links"),
    ({"text": "w1 w2", "length_penalty": "gnmt"}, "length_penalty"),
    ({"text": "w1 w2", "coverage": 0.2}, "coverage"),
    ({"text": "w1 w2", "prefix": "w2"}, "prefix"),
    ({"texts": ["w1 w2", "w3"], "prefixes": [None, "w3"]}, "prefixes"),
    ({"text": "w1 w2", "constraints": ["w2"]}, "constraints"),
]


@pytest.mark.parametrize("body, field", REFUSED, ids=[r[1] + str(k) for k, r in enumerate(REFUSED)])
def test_what_the_runtime_lacks_is_refused_by_name(servers, body, field):
    status, _, answer = servers[1].request("/translate", body)
    assert status == 422 and answer["field"] == field and OFF in answer["error"], answer
    if body.get("links") != "head":  # the torch backend has every other one (this model has no head)
        assert servers[0].request("/translate", body)[0] == 200


def test_score_is_refused_and_the_server_lives_on(servers):
    status, _, answer = servers[1].request("/score", {"source": "w1 w2", "target": "w2 w1"})
    assert status == 422 and answer["error"].startswith(f"score: {OFF}")
    assert servers[0].request("/score", {"source": "w1 w2", "target": "w2 w1"})[0] == 200
    assert servers[1].request("/health")[0] == 200


def test_unnamed_models_take_their_languages_from_the_manifest(models, exported, tmp_path):  # noqa: F811
    """As the torch backend: train.src/train.tgt say nothing (one model serves as src-tgt), while an
    export whose manifest records train.de/train.en serves as de-en."""
    torch_model, onnx_model = models
    assert set(create_app([(None, torch_model)]).state.models.by_name) == {"src-tgt"}
    assert set(create_app([(None, onnx_model)]).state.models.by_name) == {"src-tgt"}
    folder = shutil.copytree(exported, tmp_path / "named")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["data"] = {"train_src": "data/train.de.gz", "train_tgt": "data/train.en.gz"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    [(name, named)] = load_models([str(folder)], backend="onnx")
    assert name is None and set(create_app([(None, named)]).state.models.by_name) == {"de-en"}


def broken(exported, tmp_path, name: str, change) -> str:  # noqa: F811
    """A copy of the export, `change`d."""
    folder = shutil.copytree(exported, tmp_path / name)
    change(folder)
    return str(folder)


def with_manifest(**keys):
    def change(folder):
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest.update(keys)
        (folder / "manifest.json").write_text(json.dumps(manifest))
    return change


def test_folders_that_are_no_export_say_what_to_do(exported, reverse_model, tmp_path):  # noqa: F811
    (tmp_path / "empty").mkdir()
    cases = [
        (str(reverse_model), "a model directory of rnnsearch train, not an export; run `rnnsearch export"),
        (str(tmp_path / "empty"), "no manifest.json; --backend onnx serves a folder written by"),
        (str(tmp_path / "absent"), "absent: no such folder"),
        (f"{exported},{exported}", f"an ensemble is {OFF}"),
        (broken(exported, tmp_path, "json", lambda f: (f / "manifest.json").write_text("{")), "not JSON"),
        (broken(exported, tmp_path, "format", with_manifest(format=2)), "format 2; this runtime reads"),
        (broken(exported, tmp_path, "nodecode", with_manifest(decode=None)), "decode must be a mapping"),
        (broken(exported, tmp_path, "gnmt", with_manifest(decode={"beam": 3, "length_penalty": "gnmt"})),
         f"decode.length_penalty: {OFF}"),
        (broken(exported, tmp_path, "nostep", lambda f: (f / "step.onnx").unlink()), "step.onnx is missing"),
        (broken(exported, tmp_path, "badstep", lambda f: (f / "step.onnx").write_bytes(b"not a graph")),
         "onnxruntime cannot load its graphs"),
    ]
    for path, message in cases:
        with pytest.raises((DataError, ConfigError)) as e:
            load_models([path], backend="onnx")
        assert message in str(e.value), (path, str(e.value))


@pytest.mark.parametrize("argv, message", [
    ([], "a model directory of rnnsearch train, not an export"),
    (["--quantize", "int8"], f"--quantize int8: {OFF}; an export is quantised when written"),
    (["--device", "cuda"], f"--device cuda: {OFF}"),
    (["--plain"], f"--plain: {OFF}"),
])
def test_the_command_refuses_with_one_line(reverse_model, capsys, argv, message):
    assert main(["serve", "--backend", "onnx", "--model", str(reverse_model), *argv, "--port", "0"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and message in errors[0], errors
