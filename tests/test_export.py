"""ONNX export (engine/export/onnx.py, `rnnsearch export`) and the torch-free runtime (runtime/):
the graphs checked against PyTorch, every architecture and score function, and the runtime's
translations, scores, attention and links equal to rnnsearch's."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime", reason="export needs the onnx extra (pip install -e '.[test]')")
pytest.importorskip("onnxscript", reason="export needs the onnx extra (pip install -e '.[test]')")
rnnsearch_runtime = pytest.importorskip("rnnsearch_runtime", reason="the runtime: pip install -e ./runtime")

import rnnsearch  # noqa: E402
from rnnsearch.cli import main  # noqa: E402
from rnnsearch.config import ConfigError, ModelConfig  # noqa: E402
from rnnsearch.engine.checkpoint import save_weights  # noqa: E402
from rnnsearch.engine.export import onnx as export  # noqa: E402
from rnnsearch.nn.model import build_model  # noqa: E402

SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3", "",
           "w9 w9 w8 w7 w6 w5 w4 w3 w2 w1 w0 w1 w2"]


def same_translations(model, runtime, **settings):
    want = model.translate_n_best(SOURCES, precision="fp32", **settings)
    got = runtime.translate_n_best(SOURCES, **settings)
    for w, g in zip(want, got):
        assert [t.text for t in g] == [t.text for t in w]
        assert [t.score for t in g] == pytest.approx([t.score for t in w], abs=1e-4)
        if w[0].attention is not None:
            assert np.allclose(np.array(g[0].attention), np.array(w[0].attention), atol=1e-4)
            assert g[0].links() == w[0].links()


@pytest.fixture(scope="module")
def exported(reverse_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "onnx"
    assert main(["export", "--model", str(reverse_model), "--out", str(out)]) == 0
    return out


def test_the_export_holds_both_graphs_the_tokenisers_and_a_manifest(exported, reverse_model):
    names = {p.name for p in exported.iterdir()}
    assert names == {"encoder.onnx", "step.onnx", "manifest.json", "src.vocab.txt", "tgt.vocab.txt"}
    manifest = json.loads((exported / "manifest.json").read_text())
    assert manifest["ids"] == {"pad": 0, "unk": 1, "bos": 2, "eos": 3} and manifest["arch"] == "rnnsearch"
    checked = manifest["checked"]
    assert checked["lengths"][0] == 1 and checked["lengths"][-1] >= 50 and checked["batches"] == [1, 3, 8]
    assert all(v <= export.TOLERANCE[k] for k, v in checked["max_abs_difference"].items())
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no temporary left


@pytest.mark.parametrize("settings", [dict(beam=1), dict(beam=3, n_best=3), dict(beam=5, alpha=0.0),
                                      dict(beam=2, max_source_len=4)])
def test_the_runtime_translates_as_rnnsearch_does(exported, reverse_model, settings):
    runtime = rnnsearch_runtime.load(exported)
    model = rnnsearch.load(reverse_model, device="cpu")
    same_translations(model, runtime, **settings)


def variant(reverse_model, tmp_path, seed=0, data=None, **model):
    """The toy model's directory with another architecture, random weights large enough that the
    attention is far from uniform."""
    out = tmp_path / "variant"
    shutil.copytree(reverse_model, out, ignore=shutil.ignore_patterns("prepared", "*.safetensors"))
    cfg = json.loads((out / "config.json").read_text())
    cfg["model"].update(model)
    cfg["data"].update(data or {})
    (out / "config.json").write_text(json.dumps(cfg))
    torch.manual_seed(seed)
    src = len((out / "src.vocab.txt").read_text().splitlines())
    tgt = len((out / "tgt.vocab.txt").read_text().splitlines())
    net = build_model(ModelConfig(**cfg["model"]), src, tgt)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.4)
    save_weights(out / "model.safetensors", net)
    return out


@pytest.mark.parametrize("model, data", [
    (dict(gru="cudnn", score="dot", init_state="mean"), None),
    (dict(arch="rnnencdec", gru="cudnn"), None),
    (dict(score="general", readout="new"), {"reverse_source": True}),
    (dict(score="scaled_dot"), None),
])
def test_every_architecture_exports_and_translates_alike(reverse_model, tmp_path, model, data):
    model_dir = variant(reverse_model, tmp_path, **model, data=data)
    export.export_onnx(model_dir, tmp_path / "onnx")
    same_translations(rnnsearch.load(model_dir, device="cpu"), rnnsearch_runtime.load(tmp_path / "onnx"),
                      beam=3, n_best=2)


def test_graphs_that_differ_from_the_model_leave_nothing(reverse_model, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(export.TOLERANCE, "log_p", 0.0)  # no fp32 graph meets that
    assert main(["export", "--model", str(reverse_model), "--out", str(tmp_path / "onnx")]) == 2
    err = capsys.readouterr().err
    assert "log_p differs from PyTorch's by" in err and "nothing written" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "there").mkdir()
    with pytest.raises(ConfigError, match="exists: export writes a new folder"):
        export.export_onnx(reverse_model, tmp_path / "there")


def test_the_runtime_names_what_is_wrong_with_a_folder(exported, tmp_path):
    with pytest.raises(ValueError, match="no manifest.json"):
        rnnsearch_runtime.load(tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    (broken / "step.onnx").unlink()
    with pytest.raises(ValueError, match="step.onnx is missing"):
        rnnsearch_runtime.load(broken)


RUNTIME_PYTHON = os.environ.get("RNNSEARCH_RUNTIME_PYTHON")


@pytest.mark.skipif(not RUNTIME_PYTHON, reason="RNNSEARCH_RUNTIME_PYTHON (a torch-free virtualenv with "
                    "./runtime installed, as .ci/run builds) is not set")
def test_a_virtualenv_without_torch_translates_as_rnnsearch_does(exported, reverse_model):
    want = [t.text for t in rnnsearch.load(reverse_model, device="cpu").translate(SOURCES, beam=3)]
    script = ("import importlib.util, json, sys, rnnsearch_runtime\n"
              "assert importlib.util.find_spec('torch') is None, 'torch is installed here'\n"
              "m = rnnsearch_runtime.load(sys.argv[1])\n"
              "print(json.dumps([t.text for t in m.translate(json.loads(sys.argv[2]), beam=3)]))\n")
    done = subprocess.run([RUNTIME_PYTHON, "-c", script, str(exported), json.dumps(SOURCES)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want


def test_an_int8_export_translates_much_as_the_fp32_one(reverse_model, exported, tmp_path):
    manifest = export.export_onnx(reverse_model, tmp_path / "int8", quantize="int8")
    assert manifest["quantize"] == "int8"
    import onnx

    ops = {n.op_type for n in onnx.load(str(tmp_path / "int8" / "step.onnx")).graph.node}
    assert "Gemm" not in ops and {"MatMulInteger", "DynamicQuantizeLinear"} <= ops
    fp32 = [t.text for t in rnnsearch_runtime.load(exported).translate(SOURCES, beam=3)]
    int8 = [t.text for t in rnnsearch_runtime.load(tmp_path / "int8").translate(SOURCES, beam=3)]
    assert sum(a == b for a, b in zip(fp32, int8)) >= len(SOURCES) - 1  # a trained toy model: near alike


@pytest.mark.parametrize("text", ["Ein  Hund\tläuft.", "soft\u00adhyphen\u200bzero\ufeffBOM",
                                  "ctl\x07bell\x00nul", "joiner\u200ckept\u200d", "MIXED Case ÄÖÜ",
                                  "\u2028line sep", ""])
@pytest.mark.parametrize("lowercase", [False, True])
def test_the_runtime_normalises_as_rnnsearch_does(text, lowercase):
    from rnnsearch.engine.data.parallel import normalize

    assert rnnsearch_runtime.search.normalize(text, lowercase) == normalize(text, lowercase)


def test_the_runtimes_top_k_is_a_full_sorts_first_k():
    """The runtime's top-K (strided column groups for vocabularies of 512 and more, whole rows
    below) equals the first K of a full sort, ties broken by lower column."""
    rng = np.random.default_rng(0)
    for R, V, K in ((7, 8000, 5), (5, 8011, 3), (4, 300, 4), (6, 1000, 1), (3, 600, 12)):
        x = (3 * rng.standard_normal((R, V))).astype(np.float32)
        x[:, 1] = -np.inf
        x[0, 10] = x[0, 20] = x.max() + 1  # a tie at the top
        top, top_lp = rnnsearch_runtime.search._top_k(x, K)
        want = np.argsort(-x, axis=1, kind="stable")[:, :K]
        assert (top == want).all() and (top_lp == np.take_along_axis(x, want, 1)).all()
