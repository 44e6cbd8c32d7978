"""GNMT's length and coverage penalties in the product's search (decode.length_penalty: gnmt,
decode.coverage: β; Wu et al. 2016): the in-flight search finds a textbook search's n-best, and
scoring a translation gives its ranking score."""

import math
from dataclasses import dataclass

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.config import ConfigError
from rnnsearch.engine.accel.inflight import search_stream
from rnnsearch.nn.model import BOS, EOS, PAD
from rnnsearch.nn.search import search_options


@dataclass
class _H:
    words: list
    log_prob: float
    state: torch.Tensor
    covered: torch.Tensor  # Σ_i α_ij so far


@torch.no_grad()
def textbook(model, words, K, alpha, gnmt, beta, ratio=2.0):
    """One sentence, every hypothesis by itself: rank = log p / lp(|y|) + β Σ_j log min(Σ_i α_ij, 1)."""
    src = words.unsqueeze(0)
    enc = model.encode(src, torch.ones_like(src, dtype=torch.bool))
    limit = int(torch.tensor(float(len(words))) * ratio) + 10

    def rank(h):
        n = len(h.words)
        lp = h.log_prob / ((((5 + n) / 6) if gnmt else max(1, n)) ** alpha) if alpha else h.log_prob
        return lp + beta * sum(math.log(min(max(c, 1e-10), 1.0)) for c in h.covered.tolist())

    beam = [_H([], 0.0, enc.state[0], torch.zeros(len(words)))]
    while not all(h.words and h.words[-1] == EOS for h in beam):
        candidates = []
        for h in beam:
            if h.words and h.words[-1] == EOS:
                candidates.append(h)
                continue
            last = torch.tensor([h.words[-1] if h.words else BOS])
            log_p, s, a = model.step(enc, h.state.unsqueeze(0), last)
            log_p = log_p[0].float()
            log_p[[BOS, PAD]] = float("-inf")
            best = [EOS] if len(h.words) >= limit else log_p.topk(K).indices.tolist()
            candidates += [_H(h.words + [w], h.log_prob + float(log_p[w]), s[0], h.covered + a[0])
                           for w in best]
        candidates.sort(key=lambda h: -rank(h))
        beam = candidates[:K]
    return [(h.words[:-1], rank(h)) for h in beam]


@pytest.mark.parametrize("seed", [2, 9])
@pytest.mark.parametrize("alpha, penalty, beta", [(0.6, "gnmt", 0.2), (1.0, "power", 0.4), (0.0, "gnmt", 0.3),
                                                  (1.0, "gnmt", 0.0)])
def test_the_in_flight_search_finds_the_textbook_n_best_with_gnmt_penalties(seed, alpha, penalty, beta):
    model = tiny_model(seed=seed, double=False, scale=0.7)
    with torch.no_grad():
        model.W_o.bias[EOS] += 1.0  # hypotheses end at different steps
    src, mask = random_batch([6, 2, 4, 7, 3], seed=seed)
    options = search_options(None, dict(beam=3, n_best=3, alpha=alpha, length_penalty=penalty, coverage=beta))
    chunks = [(src[i:i + 2], mask[i:i + 2]) for i in range(0, 5, 2)]
    found = dict(search_stream(model, iter(chunks), options, capacity=2))
    for k in range(5):
        want = textbook(model, src[k][mask[k]], 3, alpha, penalty == "gnmt", beta)
        assert [h.tokens for h in found[k]] == [w for w, _ in want], (k, alpha, penalty, beta)
        assert [h.score for h in found[k]] == pytest.approx([r for _, r in want], abs=1e-4)


def test_scoring_gives_the_penalised_ranking_score_and_refusals_are_clear(reverse_model):
    model = rnnsearch.load(reverse_model, device="cpu")
    sources = ["w3 w4 w1 w5 w9", "w2 w6 w5", "w7 w1"]
    settings = dict(beam=4, alpha=0.6, length_penalty="gnmt", coverage=0.3, precision="fp32")
    found = model.translate(sources, **settings)
    scores = model.score(sources, [t.text for t in found], **settings)
    assert [s.normalised for s in scores] == pytest.approx([t.score for t in found], abs=1e-4)
    with pytest.raises(ConfigError, match="coverage: must be >= 0"):
        model.translate(sources, coverage=-0.1)
    with pytest.raises(ConfigError, match="not with plain: true"):
        rnnsearch.load(reverse_model, device="cpu", plain=True).translate(sources, coverage=0.2)
