"""Target prefixes (``translate --prefix``, ``Translator.translate(prefixes=...)``): the search
forced through the given start, then free; what it finds scores as the model scores it."""

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.engine.decode.scoring import score_pairs
from rnnsearch.nn.search import search_options

SOURCES = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3"]


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("seed", [1, 6])
def test_every_hypothesis_starts_with_its_prefix_and_scores_as_the_model_scores_it(beam, seed):
    """Sentences in flight (capacity 2 of 5), prefixes of different lengths and none: each n-best
    hypothesis starts with its sentence's prefix, and its log-probability is teacher forcing's."""
    model = tiny_model(seed=seed, double=False, scale=0.6)
    src, mask = random_batch([5, 3, 6, 2, 4], seed=seed)
    starts = [[5, 6], [], [7], [8, 9, 10], [11]]
    prefix = torch.full((5, 3), -1)
    for row, ids in enumerate(starts):
        prefix[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    options = search_options(None, dict(beam=beam, n_best=beam, alpha=1.0))
    chunks = [(src[i:i + 2], mask[i:i + 2], prefix[i:i + 2]) for i in range(0, 5, 2)]
    found = dict(search_stream(model, iter(chunks), options, capacity=2))
    free = dict(search_stream(model, iter([(src, mask)]), options, capacity=5))
    for k, ids in enumerate(starts):
        assert all(h.tokens[: len(ids)] == ids for h in found[k])
        pairs = [(src[k][mask[k]].tolist(), h.tokens) for h in found[k]]
        for h, (lp, _, _) in zip(found[k], score_pairs(model, pairs)):
            assert h.log_prob == pytest.approx(lp, abs=1e-4)
        if not ids:  # no prefix: the free search's result
            assert [h.tokens for h in found[k]] == [h.tokens for h in free[k]]


def test_greedy_forced_through_its_own_start_finds_itself(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    free = model.translate(SOURCES, beam=1, precision="fp32")
    starts = [" ".join(t.text.split()[:2]) or None for t in free]
    forced = model.translate(SOURCES, beam=1, precision="fp32", prefixes=starts)
    assert [t.text for t in forced] == [t.text for t in free]
    other = model.translate(SOURCES[:2], beam=5, precision="fp32", prefixes=["w0 w0", None])
    assert other[0].text.split()[:2] == ["w0", "w0"] and other[1].text == model.translate(
        SOURCES[1:2], beam=5, precision="fp32")[0].text
    scored = model.score(SOURCES[:1], [other[0].text], precision="fp32")[0]
    assert scored.normalised == pytest.approx(other[0].score, abs=1e-4)


def test_prefix_refusals_are_clear(reverse_model, tmp_path, capsys):
    model = rnnsearch.load(reverse_model, device="cpu")
    with pytest.raises(ConfigError, match="prefix: 1 prefixes for 2 sentences"):
        model.translate(SOURCES[:2], prefixes=["w1"])
    limit = int(1 * model.cfg.decode.max_len_ratio) + 10  # a one-word source's
    with pytest.raises(ConfigError, match=f"sentence 1: {limit + 1} pieces, but its translation may have at "
                                          f"most {limit} before </s>"):
        model.translate(["w1"], prefixes=["w1 " * (limit + 1)])
    assert model.translate(["w1"], prefixes=["w1 " * limit])[0].text.split() == ["w1"] * limit
    with pytest.raises(ConfigError, match="prefix: not with --sample"):
        model.translate_n_best(["w1"], sample=2, prefixes=["w1"])
    with pytest.raises(ConfigError, match="prefix: not with plain: true"):
        rnnsearch.load(reverse_model, device="cpu", plain=True).translate(["w1"], prefixes=["w1"])
    src, pre = tmp_path / "in.txt", tmp_path / "prefix.txt"
    src.write_text("w3 w4 w1\nw2 w6\n")
    pre.write_text("w1\n")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--prefix", str(pre)]) == 2
    assert f"{pre}: 1 prefix lines for 2 input lines" in capsys.readouterr().err
    pre.write_text("w1\n\n")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--prefix", str(pre)]) == 2
    assert f"{pre}, line 2: an empty prefix" in capsys.readouterr().err
    pre.write_text("w1 w1\nw6\n")
    assert main(["translate", "--model", str(reverse_model), "--input", str(src), "--prefix", str(pre)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["w1", "w1"] and out[1].split()[0] == "w6"
