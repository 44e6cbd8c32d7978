"""Lexically constrained decoding (engine/decode/constraints.py, `translate --constraints`): every
phrase in every translation that can hold it, hypotheses scored as the model scores them, and
without constraints the plain beam search's result."""

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.engine.decode.constraints import Progress, constrained_search, starts_of
from rnnsearch.engine.decode.scoring import score_pairs
from rnnsearch.nn.search import search_options

SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3"]


def contains(words: list[int], phrase: list[int]) -> bool:
    return any(words[i:i + len(phrase)] == phrase for i in range(len(words) - len(phrase) + 1))


def test_progress_follows_phrases_and_a_phrase_left_early_is_not_met():
    phrases = [[5, 6, 7], [6], [9, 9]]
    p, starts = Progress.start(phrases), starts_of(phrases)
    assert p.wanted(phrases) == [5, 6, 9] and p.count == 0
    p = p.after(5, phrases, starts)
    assert (p.current, p.inside) == (0, 1) and p.wanted(phrases) == [6] and p.count == 1
    p = p.after(9, phrases, starts)  # left [5, 6, 7] after one piece; 9 starts [9, 9]
    assert p.met == (False, False, False) and (p.current, p.inside) == (2, 1) and p.count == 1
    p = p.after(9, phrases, starts)
    assert p.met == (False, False, True) and p.current == -1 and p.count == 2
    p = p.after(6, phrases, starts)  # [6] is met by one piece
    assert p.met == (False, True, True) and not p.done() and p.wanted(phrases) == [5]
    for w in (5, 6, 7):
        p = p.after(w, phrases, starts)
    assert p.done() and p.count == 6 and p.wanted(phrases) == []


@pytest.mark.parametrize("seed", [1, 5])
@pytest.mark.parametrize("beam, alpha", [(3, 1.0), (4, 0.0)])
def test_without_constraints_it_finds_what_the_beam_search_finds(seed, beam, alpha):
    model = tiny_model(seed=seed, double=False, scale=0.6)
    src, mask = random_batch([5, 3, 6, 2, 4], seed=seed)
    options = search_options(None, dict(beam=beam, n_best=beam, alpha=alpha))
    free = dict(search_stream(model, iter([(src, mask)]), options, capacity=5))
    found = constrained_search(model, src, mask, [[] for _ in range(5)], options)
    for k in range(5):
        assert [h.tokens for h in found[k]] == [h.tokens for h in free[k]]
        assert [h.score for h in found[k]] == pytest.approx([h.score for h in free[k]], abs=1e-5)
        want = torch.tensor(free[k][0].attention)
        assert torch.tensor(found[k][0].attention) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("seed", [2, 8])
@pytest.mark.parametrize("coverage", [0.0, 0.4])
def test_every_phrase_is_in_every_best_hypothesis_and_scored_as_the_model_scores_it(seed, coverage):
    model = tiny_model(seed=seed, double=False, scale=0.6)
    src, mask = random_batch([5, 3, 6, 2, 4], seed=seed)
    phrases = [[[5, 6]], [[7], [8, 9]], [], [[10, 11, 12]], [[13], [13]]]
    options = search_options(None, dict(beam=6, n_best=2, alpha=1.0, coverage=coverage))
    found = constrained_search(model, src, mask, phrases, options)
    for k, hyps in enumerate(found):
        assert all(contains(hyps[0].tokens, p) for p in phrases[k])
        pairs = [(src[k][mask[k]].tolist(), h.tokens) for h in hyps]
        for h, (lp, _, rows) in zip(hyps, score_pairs(model, pairs, attention=True)):
            assert h.log_prob == pytest.approx(lp, abs=1e-4)
            assert torch.tensor(h.attention) == pytest.approx(torch.tensor(rows), abs=1e-5)
    assert sum(tokens == 13 for tokens in found[4][0].tokens) >= 2  # a phrase twice: met twice


@pytest.fixture(scope="module")
def model(reverse_model):
    return rnnsearch.load(reverse_model, device="cpu")


def test_translate_puts_the_phrases_in_and_keeps_the_rest(model):
    constraints = [["w0 w0"], ["w9"], [], None, ["w1 w1", "w2"]]
    free = model.translate(SOURCES, beam=5, precision="fp32")  # the two searches batch otherwise
    got = model.translate(SOURCES, beam=5, constraints=constraints, precision="fp32")
    for t, f, phrases in zip(got, free, constraints):
        assert all(f" {p} " in f" {t.text} " for p in phrases or [])
        if not phrases:
            assert t.text == f.text
    # where the phrase goes is the model's choice (seed 1234 puts it first, seed 1 last): not asserted
    assert "w0 w0" not in free[0].text and got[0].text != free[0].text


@pytest.mark.parametrize("kwargs, needle", [
    (dict(constraints=[["w1"]]), "constraints: 1 lists for 5 sentences"),
    (dict(constraints=[["w1"], [" "], [], [], []]), "constraints of sentence 2: phrase 1 is empty"),
    (dict(constraints=[[" ".join(["w1"] * 25)], [], [], [], []]),
     "sentence 1: 25 pieces, but its translation may have at most 20"),
    (dict(constraints=[["w1"]] * 5, sample=2, n_best=1), "constraints: not with --sample"),
    (dict(constraints=[["w1"]] * 5, prefixes=["w1"] * 5), "constraints: not with --prefix"),
    (dict(constraints=[["w1"], [], [], [], []], max_source_len=3), "sentence 1: the sentence is longer than"),
])
def test_constraints_a_search_cannot_take_are_refused(model, kwargs, needle):
    with pytest.raises(ConfigError, match=needle):
        model.translate_n_best(SOURCES, **kwargs)


def test_constraints_file_on_the_command_line(reverse_model, tmp_path, capsys):
    src, cons = tmp_path / "src.txt", tmp_path / "cons.txt"
    src.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    cons.write_text("w0 w0\nw9\n\n\nw1 w1\tw2\n", encoding="utf-8")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--constraints", str(cons),
                 "--beam", "5", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    model = rnnsearch.load(reverse_model, device="cpu")
    want = model.translate(SOURCES, beam=5, constraints=[["w0 w0"], ["w9"], [], [], ["w1 w1", "w2"]])
    assert out == [t.text for t in want]
    cons.write_text("w0\n\tw9\n\n\n\n", encoding="utf-8")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src),
                 "--constraints", str(cons)]) == 2
    err = capsys.readouterr().err
    assert f"{cons}, line 2: phrase 1 is empty" in err and "Traceback" not in err
    cons.write_text("w0\n", encoding="utf-8")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src),
                 "--constraints", str(cons)]) == 2
    assert "1 constraint lines for 5 input lines" in capsys.readouterr().err


def test_an_ensemble_takes_constraints(reverse_model, tmp_path):
    ens = rnnsearch.load([reverse_model, reverse_model], device="cpu")
    one = rnnsearch.load(reverse_model, device="cpu")
    constraints = [["w0 w0"], ["w9"], [], None, ["w1 w1", "w2"]]
    want = one.translate(SOURCES, beam=5, constraints=constraints)
    got = ens.translate(SOURCES, beam=5, constraints=constraints)
    assert [t.text for t in got] == [t.text for t in want]
    assert [t.score for t in got] == pytest.approx([t.score for t in want], abs=1e-5)


def test_serve_takes_constraints_and_refuses_bad_ones(model):
    pytest.importorskip("starlette", reason="serve needs starlette (pip install -e '.[test]')")
    from serving import LiveServer

    from rnnsearch.serve import Limits, create_app

    with LiveServer(create_app(model, Limits(max_wait_ms=30))) as live:
        status, _, body = live.request("/translate", {"texts": SOURCES[:2], "beam": 5,
                                                      "constraints": [["w0 w0"], None]})
        want = model.translate(SOURCES[:2], beam=5, constraints=[["w0 w0"], None])
        assert status == 200 and [t["text"] for t in body["translations"]] == [t.text for t in want]
        status, _, body = live.request("/translate", {"text": SOURCES[0], "beam": 5, "constraints": ["w9"]})
        assert status == 200 and "w9" in body["translation"]["text"].split()
        for bad in ({"text": SOURCES[0], "constraints": "w9"},
                    {"texts": SOURCES[:2], "constraints": [["w9"]]},
                    {"text": SOURCES[0], "constraints": [""]},
                    {"text": SOURCES[0], "constraints": [" ".join(["w1"] * 25)]}):
            status, _, body = live.request("/translate", bad)
            assert status == 422 and body["field"] == "constraints"
