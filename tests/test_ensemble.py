"""Ensembles (engine/decode/ensemble.py): several models searched as one, the next word's
distribution the mean of theirs; each model reads its own ids of the source; translate, n-best,
score, attention, the CLI, and the refusals."""

import json
import math
import shutil

import numpy as np
import pytest
import safetensors.torch as st
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.engine.decode.ensemble import Ensemble
from rnnsearch.nn.model import BOS, EOS, PAD
from rnnsearch.nn.search import search_options

SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3", ""]


@torch.no_grad()
def mean_log_p(models, srcs, masks, prefix):
    """log of the models' mean p(y | prefix, x) after `prefix` (one sentence), by each model's
    own teacher-forced pass: the reference the ensemble's search is held to."""
    rows = []
    for model, src, mask in zip(models, srcs, masks):
        tgt_in = torch.tensor([[BOS] + prefix])
        log_p, _ = model(src, mask, tgt_in)
        rows.append(log_p[0, -1].double())
    return torch.logsumexp(torch.stack(rows), 0) - math.log(len(rows))


def other_reading(src, mask, shift):
    """The same sentences as another model's tokeniser might give them: other ids, one more each."""
    lengths = mask.sum(1) + 1
    out = torch.full((src.size(0), int(lengths.max())), PAD, dtype=torch.long)
    for i, n in enumerate(lengths.tolist()):
        out[i, :n] = (torch.arange(n) * 3 + i + shift) % 13 + 4
    return out, out != PAD


@pytest.mark.parametrize("seed", [2, 9])
def test_greedy_search_takes_each_step_the_word_of_the_mean_probability(seed):
    models = [tiny_model(seed=seed), tiny_model(seed=seed + 1), tiny_model(seed=seed + 2)]
    src, mask = random_batch([5, 3, 6, 2], seed=seed)
    readings = [(src, mask), other_reading(src, mask, 1), (src, mask)]
    srcs, masks = [r[0] for r in readings], [r[1] for r in readings]
    chunks = [([s[i:i + 2] for s in srcs], [m[i:i + 2] for m in masks]) for i in (0, 2)]
    options = search_options(None, dict(beam=1, alpha=0.0))
    found = dict(search_stream(Ensemble(models), iter(chunks), options, capacity=2))
    for k in range(4):
        one = [s[k:k + 1] for s in srcs], [m[k:k + 1] for m in masks]
        words, total = [], 0.0
        while True:
            log_p = mean_log_p(models, *one, words)
            log_p[[BOS, PAD]] = -math.inf
            limit = int(float(mask[k].sum()) * options.decode.max_len_ratio) + 10
            word = EOS if len(words) >= limit else int(log_p.argmax())
            total += float(log_p[word])
            if word == EOS:
                break
            words.append(word)
        hyp = found[k][0]
        assert hyp.tokens == words
        assert hyp.log_prob == pytest.approx(total, rel=1e-6, abs=1e-5)  # the search sums in fp32


@pytest.mark.parametrize("seed", [3, 7])
def test_beam_hypotheses_score_as_the_mixture_scores_them_and_attention_is_mean_only_where_alike(seed):
    models = [tiny_model(seed=seed), tiny_model(seed=seed + 5)]
    src, mask = random_batch([4, 6, 2, 5, 3], seed=seed)
    other, other_mask = other_reading(src, mask, 2)
    alike = torch.tensor([True, False, True, False, True])  # rows 1 and 3 read otherwise by model 2
    second = torch.where(alike.unsqueeze(1), torch.nn.functional.pad(src, (0, 1)), other)
    srcs, masks = [src, second], [mask, second != PAD]
    options = search_options(None, dict(beam=3, n_best=3, alpha=1.0))
    chunks = [([s[i:i + 2] for s in srcs], [m[i:i + 2] for m in masks]) for i in (0, 2, 4)]
    found = dict(search_stream(Ensemble(models), iter(chunks), options, capacity=2))
    for k in range(5):
        one = [s[k:k + 1] for s in srcs], [m[k:k + 1] for m in masks]
        for hyp in found[k]:
            words = hyp.tokens + [EOS]
            total = sum(float(mean_log_p(models, *one, words[:i])[w]) for i, w in enumerate(words))
            assert hyp.log_prob == pytest.approx(total, rel=1e-6, abs=1e-5)  # the search sums in fp32
            rows = [model(s[:, :int(m.sum())], m[:, :int(m.sum())], torch.tensor([[BOS] + hyp.tokens]))[1][0]
                    for model, s, m in zip(models, *one)]
            n = int(mask[k].sum())
            want = (rows[0] + rows[1]) / 2 if alike[k] else rows[0]
            assert torch.tensor(hyp.attention).double().numpy() == pytest.approx(
                want[:, :n].detach().double().numpy(), abs=1e-6)


@pytest.fixture(scope="module")
def two_models(reverse_model, tmp_path_factory):
    """The toy model, and a copy with its weights disturbed: another model, the same vocabularies."""
    tmp = tmp_path_factory.mktemp("ensemble")
    a, b = tmp / "a", tmp / "b"
    shutil.copytree(reverse_model, a)
    shutil.copytree(reverse_model, b)
    weights = st.load_file(b / "model.safetensors")
    g = torch.Generator().manual_seed(0)
    st.save_file({k: v + 0.3 * v.std() * torch.randn(v.shape, generator=g) if v.numel() > 1 else v
                  for k, v in weights.items()}, b / "model.safetensors")
    return a, b


def test_an_ensemble_of_one_model_twice_is_that_model(two_models):
    a, _ = two_models
    one, twice = rnnsearch.load(a, device="cpu"), rnnsearch.load(f"{a},{a}", device="cpu")
    for settings in (dict(beam=1), dict(beam=4, n_best=3)):
        want = one.translate_n_best(SOURCES, precision="fp32", **settings)
        got = twice.translate_n_best(SOURCES, precision="fp32", **settings)
        for w, g in zip(want, got):
            assert [t.text for t in g] == [t.text for t in w]
            assert [t.score for t in g] == pytest.approx([t.score for t in w], abs=1e-5)
            assert np.allclose(np.array(g[0].attention), np.array(w[0].attention), atol=1e-6)


def test_an_ensembles_translations_score_their_search_score(two_models):
    ens = rnnsearch.load(list(two_models), device="cpu")
    assert ens.parameters == 2 * rnnsearch.load(two_models[0], device="cpu").parameters
    found = ens.translate_n_best(SOURCES[:-1], beam=4, n_best=4, precision="fp32")
    sources = [s for s, hyps in zip(SOURCES, found) for _ in hyps]
    hyps = [h for hs in found for h in hs]
    scores = ens.score(sources, [h.text for h in hyps], precision="fp32", per_token=True)
    for h, s in zip(hyps, scores):
        assert s.normalised == pytest.approx(h.score, abs=1e-4)
        assert sum(s.token_log_probs) == pytest.approx(s.log_prob)


def test_a_long_source_is_cut_after_the_same_words_for_every_model(two_models):
    ens = rnnsearch.load(list(two_models), device="cpu")
    text = "w1 w2 w3 w4 w5 w6 w7"
    pieces = ens._split(ens.source_ids(text), 3)
    assert [len(p) for p in pieces] == [3, 3, 1]
    assert all(p.members[0] == p.members[1] == list(p) for p in pieces)
    assert [t for p in pieces for t in p] == ens.source_ids(text)
    whole, cut = ens.translate([text], beam=2)[0], ens.translate([text], beam=2, max_source_len=3)[0]
    assert len(cut.attention[0]) == len(whole.attention[0]) == 7


def test_models_with_another_target_vocabulary_are_refused_by_name(two_models, tmp_path):
    a, b = two_models
    c = tmp_path / "c"
    shutil.copytree(b, c)
    words = (c / "tgt.vocab.txt").read_text(encoding="utf-8").splitlines()
    words[5], words[6] = words[6], words[5]
    (c / "tgt.vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"ensemble: {c} has another target vocabulary than {a}.*id 5"):
        rnnsearch.load([a, c], device="cpu")


@pytest.mark.parametrize("call, needle", [
    (lambda e: e.translate(["w1 w2"], sample=1), "--sample draws from one model"),
    (lambda e: e.translate(["w1 w2"], links="saliency"), "links by its attention"),
])
def test_what_an_ensemble_cannot_do_is_refused(two_models, call, needle):
    with pytest.raises(ConfigError, match=needle):
        call(rnnsearch.load(list(two_models), device="cpu"))


def test_plain_models_are_refused(two_models):
    with pytest.raises(ConfigError, match="ensemble: not with plain"):
        rnnsearch.load(list(two_models), device="cpu", plain=True)


def test_translate_and_evaluate_take_several_models(two_models, tmp_path, capsys):
    a, b = two_models
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("\n".join(SOURCES[:5]) + "\n", encoding="utf-8")
    ref.write_text("\n".join(" ".join(s.split()[::-1]) for s in SOURCES[:5]) + "\n", encoding="utf-8")
    assert main(["translate", "--model", str(a), "--model", str(b), "--input", str(src), "--beam", "3",
                 "--device", "cpu", "--precision", "fp32"]) == 0
    ens = rnnsearch.load([a, b], device="cpu")
    want = [t.text for t in ens.translate(SOURCES[:5], beam=3, precision="fp32")]
    assert capsys.readouterr().out.splitlines() == want
    assert main(["evaluate", "--model", f"{a},{b}", "--model", str(a), "--src", str(src), "--ref", str(ref),
                 "--device", "cpu", "--paired-bs-n", "50", "--paired-ar-n", "50"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["label"] for s in out["systems"]] == ["a+b", "a"] and len(out["significance"]) >= 1
    assert main(["translate", "--model", str(a), "--model", str(b), "--beam-trace", str(tmp_path / "t.json"),
                 "--input", str(src), "--device", "cpu"]) == 2
    assert "follows one model, not an ensemble" in capsys.readouterr().err


def test_serve_serves_an_ensemble_as_one_model(two_models):
    pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
    from serving import LiveServer

    from rnnsearch.serve import Limits, create_app

    ens = rnnsearch.load(",".join(map(str, two_models)), device="cpu")
    sentences = ["w1 w2 w3", "w5 w6 w7 w8", "w9 w4"]
    want = ens.translate(sentences, beam=3)
    with LiveServer(create_app(ens, Limits(max_wait_ms=30))) as live:
        status, _, info = live.request("/info")
        assert status == 200 and info["ensemble"] == [str(d) for d in two_models]
        assert info["parameters"] == ens.parameters
        status, _, body = live.request("/translate", {"texts": sentences, "beam": 3, "attention": True})
        assert status == 200
        assert [t["text"] for t in body["translations"]] == [t.text for t in want]
        got = [t["attention"]["weights"] for t in body["translations"]]
        assert all(np.allclose(g, t.attention, atol=1e-6) for g, t in zip(got, want))
