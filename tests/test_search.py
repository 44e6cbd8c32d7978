"""Greedy and beam search: agreement with the model's own scores, batch invariance, n-best."""

import pytest
import torch

from rnnsearch.search import beam_search, greedy_search
from rnnsearch.vocab import BOS, EOS, PAD

from conftest import random_batch, tiny_model


def sequence_log_prob(model, src, mask, tokens):
    """log p(tokens </s> | src) by teacher forcing, for one sentence."""
    tgt_in = torch.tensor([[BOS] + tokens])
    with torch.no_grad():
        lp, _ = model(src, mask, tgt_in)
    gold = tokens + [EOS]
    return float(sum(lp[0, i, w] for i, w in enumerate(gold)))


def manual_greedy(model, src, mask, max_steps):
    enc = model.encode(src, mask)
    state, y, out = enc.state, torch.tensor([BOS]), []
    for _ in range(max_steps):
        lp, state, _ = model.step(enc, state, y)
        lp[:, [PAD, BOS]] = float("-inf")  # never generated
        y = lp.argmax(-1)
        if int(y) == EOS:
            break
        out.append(int(y))
    return out


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_greedy_is_argmax_decoding_and_beam1_equals_greedy(arch):
    model = tiny_model(arch, double=False, scale=0.8)
    src, mask = random_batch([5, 3, 4], seed=2)
    greedy = greedy_search(model, src, mask)
    beam1 = beam_search(model, src, mask, beam=1, alpha=0.0)
    for i, n in enumerate([5, 3, 4]):
        limit = int(n * 2.0) + 10
        expected = manual_greedy(model, src[i:i + 1, :n], mask[i:i + 1, :n], limit)
        assert greedy[i].tokens == expected[:limit]
        assert beam1[i][0].tokens == greedy[i].tokens


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_scores_are_the_models_log_probabilities(alpha):
    model = tiny_model(double=False, scale=0.8)
    src, mask = random_batch([4, 6], seed=5)
    results = beam_search(model, src, mask, beam=4, alpha=alpha, n_best=4)
    for i, n in enumerate([4, 6]):
        hyps = results[i]
        assert len(hyps) == 4
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:
            lp = sequence_log_prob(model, src[i:i + 1, :n], mask[i:i + 1, :n], h.tokens)
            assert h.log_prob == pytest.approx(lp, abs=1e-4)
            norm = (len(h.tokens) + 1) ** alpha if alpha else 1.0
            assert h.score == pytest.approx(lp / norm, abs=1e-4)


def test_beam_finds_at_least_as_good_as_greedy():
    model = tiny_model(double=False, scale=0.8, seed=4)
    src, mask = random_batch([5, 7, 3, 6], seed=8)
    greedy = greedy_search(model, src, mask)
    beam = beam_search(model, src, mask, beam=8, alpha=0.0)
    for g, b in zip(greedy, beam):
        assert b[0].log_prob >= g.log_prob - 1e-5


def test_result_does_not_depend_on_the_batch():
    model = tiny_model(double=False, scale=0.8, seed=7)
    lengths = [7, 2, 5, 4, 6]
    src, mask = random_batch(lengths, seed=11)
    together = beam_search(model, src, mask, beam=5, n_best=2)
    for i, n in enumerate(lengths):
        alone = beam_search(model, src[i:i + 1, :n], mask[i:i + 1, :n], beam=5, n_best=2)[0]
        for a, b in zip(alone, together[i]):
            assert a.tokens == b.tokens
            assert a.score == pytest.approx(b.score, abs=1e-5)
    # and in a different grouping
    pair = beam_search(model, src[[3, 0]], mask[[3, 0]], beam=5, n_best=2)
    assert [h.tokens for h in pair[0]] == [h.tokens for h in together[3]]
    assert [h.tokens for h in pair[1]] == [h.tokens for h in together[0]]


def test_attention_rows_and_length_limit():
    model = tiny_model(double=False, scale=0.8)
    src, mask = random_batch([3, 5], seed=1)
    res = beam_search(model, src, mask, beam=3, max_len_ratio=0.5)
    for i, n in enumerate([3, 5]):
        h = res[i][0]
        assert len(h.tokens) <= int(n * 0.5) + 10
        assert len(h.attention) == len(h.tokens) + 1  # one row per output token, </s> included
        for row in h.attention:
            assert len(row) == n and sum(row) == pytest.approx(1.0, abs=1e-5)


def test_rnnencdec_hypotheses_have_no_attention():
    model = tiny_model("rnnencdec", double=False)
    src, mask = random_batch([3], seed=1)
    assert beam_search(model, src, mask, beam=2)[0][0].attention is None
