"""precision: auto — bf16 only where it measures faster, decided once and cached."""

import json

import pytest
import torch

import rnnsearch
from rnnsearch.config import ConfigError
from rnnsearch.engine import precision


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNSEARCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "precision.json"


def with_bf16_units(monkeypatch, present: bool) -> None:
    monkeypatch.setattr(precision, "cpu_info", lambda: ("Test CPU", {"amx_bf16"} if present else {"avx2"}))


def test_no_bf16_units_means_fp32_without_measuring(cache, monkeypatch):
    with_bf16_units(monkeypatch, False)
    timed = []
    assert precision.choose("decode", torch.device("cpu"), "m", lambda p: timed.append(p) or 1.0) == "fp32"
    assert timed == [] and not cache.exists()


@pytest.mark.parametrize("fp32_s,bf16_s,expected",
                         [(1.0, 0.5, "bf16"), (1.0, 0.99, "fp32"), (0.5, 1.0, "fp32")])
def test_the_faster_precision_is_chosen_and_cached(cache, monkeypatch, fp32_s, bf16_s, expected):
    with_bf16_units(monkeypatch, True)
    timed = []

    def timer(p):
        timed.append(p)
        return fp32_s if p == "fp32" else bf16_s

    assert precision.choose("train", torch.device("cpu"), "model A", timer) == expected
    assert sorted(timed) == ["bf16", "bf16", "fp32", "fp32"]  # twice each: the better of two runs counts
    saved = json.loads(cache.read_text())
    assert list(saved.values()) == [expected] and "Test CPU (amx_bf16)" in next(iter(saved))
    timed.clear()
    assert precision.choose("train", torch.device("cpu"), "model A", timer) == expected
    assert timed == []  # from the cache
    precision.choose("train", torch.device("cpu"), "model B", timer)
    assert len(timed) == 4  # another size is measured again


def test_translator_auto_measures_its_own_decoding_once(reverse_model, cache, monkeypatch):
    with_bf16_units(monkeypatch, True)
    model = rnnsearch.load(reverse_model, device="cpu")
    calls = []
    probe = model.precision.probe
    monkeypatch.setattr(model.precision, "probe", lambda p: calls.append(p) or probe(p))
    chosen = model.precision.resolve("auto")
    assert chosen in ("fp32", "bf16") and len(calls) == 4
    assert model.precision.resolve("auto") == chosen and len(calls) == 4
    assert model.precision.resolve("fp32") == "fp32"
    out = model.translate(["w3 w4 w1 w5 w9"], beam=3, precision="auto")
    assert out[0].text == "w9 w5 w1 w4 w3"
    assert any(key.startswith("decode | Test CPU") for key in json.loads(cache.read_text()))
    with pytest.raises(ConfigError, match=r"precision: expected one of 'auto' \| 'fp32' \| 'bf16', got"):
        model.precision.resolve("fp16")


def test_training_probe_leaves_the_run_as_it_was(tmp_path, monkeypatch):
    # auto measures both precisions on a copy of the model, then (here) keeps fp32: the run must
    # end with exactly the weights of a run told fp32 from the start
    from conftest import toy_config
    from safetensors.torch import load_file

    from rnnsearch.engine.train import trainer as train_module

    measured = []

    def choose(kind, device, size, timer):
        measured.extend((timer("fp32"), timer("bf16")))
        return "fp32"

    monkeypatch.setattr(train_module, "choose", choose)
    auto = train_module.train(toy_config(tmp_path, "auto", max_steps=12, precision="auto", log_every=4))
    fixed = train_module.train(toy_config(tmp_path, "fixed", max_steps=12, precision="fp32", log_every=4))
    assert len(measured) == 2 and all(s > 0 for s in measured)
    a, b = load_file(str(auto / "last.safetensors")), load_file(str(fixed / "last.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    # the log says what auto resolved to (benchmarks/bench.py reports it)
    records = [json.loads(x) for x in (auto / "log.jsonl").read_text().splitlines()]
    assert {r["precision"] for r in records if r.get("kind") == "train"} == {"fp32"}
