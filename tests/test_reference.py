"""The PyTorch models against the plain-NumPy reference (rnnsearch.nn.reference)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rnnsearch.config import ModelConfig
from rnnsearch.nn import reference
from rnnsearch.nn.model import build_model

SRC_V, TGT_V = 13, 11
PAD, BOS = 0, 2
# The model normalises (softmax, log_softmax) in float32 even when it runs in float64,
# so the two agree to ~1e-6, not to float64 precision.
ATOL = 1e-5
STD, ATTN_STD = 0.5, 2.0  # larger alignment weights: attention far from uniform


def make_model(seed=0, **overrides):
    cfg = ModelConfig(emb=7, hidden=5, align=6, maxout=4, **overrides)
    torch.manual_seed(seed)
    model = build_model(cfg, SRC_V, TGT_V).double().eval()
    # The paper's init (v_a = 0, tiny normals) makes attention uniform, which would
    # hide errors in the scores: use large random weights instead, <pad> rows too,
    # so that padding must be masked to be harmless.
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = ATTN_STD if name.startswith("attention.") else STD
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * std)
    return cfg, model


def make_batch(seed=0, src_lens=(6, 3, 4), tgt_lens=(5, 2, 4)):
    """Right-padded source and target batches of different lengths."""
    rng = np.random.default_rng(seed)
    B, S, T = len(src_lens), max(src_lens), max(tgt_lens)
    src = np.full((B, S), PAD)
    tgt_in = np.full((B, T), PAD)
    for b, (ls, lt) in enumerate(zip(src_lens, tgt_lens)):
        src[b, :ls] = rng.integers(4, SRC_V, ls)
        tgt_in[b, 0] = BOS
        tgt_in[b, 1:lt] = rng.integers(4, TGT_V, lt - 1)
    return torch.from_numpy(src), torch.from_numpy(src != PAD), torch.from_numpy(tgt_in)


def run_both(cfg, model, src, mask, tgt_in):
    with torch.no_grad():
        lp_t, att_t = model(src, mask, tgt_in)
    params = reference.state_dict_to_numpy(model)
    lp_r, att_r = reference.forward(params, cfg, src.numpy(), mask.numpy(), tgt_in.numpy())
    return lp_t, att_t, lp_r, att_r


def assert_close(lp_t, att_t, lp_r, att_r, mask):
    assert lp_t.shape == lp_r.shape
    np.testing.assert_allclose(lp_t.double().numpy(), lp_r, rtol=0, atol=ATOL)
    if att_r is None:
        assert att_t is None
        return
    assert att_t is not None and att_t.shape == att_r.shape
    np.testing.assert_allclose(att_t.double().numpy(), att_r, rtol=0, atol=ATOL)
    # Rows sum to one over real words; padding gets nothing.
    np.testing.assert_allclose(att_r.sum(-1), 1.0, atol=1e-12)
    assert np.all(att_r[~mask.numpy()[:, None, :].repeat(att_r.shape[1], 1)] == 0)


def assert_not_uniform(att, mask):
    for b, m in enumerate(mask.numpy()):
        real = att[b][:, m]
        assert np.abs(real - 1.0 / m.sum()).max() > 0.1, "attention is (near) uniform"


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
@pytest.mark.parametrize("score", ["additive", "dot", "general", "scaled_dot"])
def test_rnnsearch_matches_reference(score, gru):
    cfg, model = make_model(score=score, gru=gru)
    src, mask, tgt_in = make_batch()
    lp_t, att_t, lp_r, att_r = run_both(cfg, model, src, mask, tgt_in)
    assert_not_uniform(att_r, mask)
    assert_close(lp_t, att_t, lp_r, att_r, mask)


@pytest.mark.parametrize("overrides", [
    {"readout": "new"},
    {"init_state": "mean"},
    {"readout": "new", "init_state": "mean", "gru": "cudnn", "score": "general"},
], ids=["readout_new", "init_mean", "all_options"])
def test_options_match_reference(overrides):
    cfg, model = make_model(seed=3, **overrides)
    src, mask, tgt_in = make_batch(seed=3)
    lp_t, att_t, lp_r, att_r = run_both(cfg, model, src, mask, tgt_in)
    assert_not_uniform(att_r, mask)
    assert_close(lp_t, att_t, lp_r, att_r, mask)


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
def test_rnnencdec_matches_reference(gru):
    cfg, model = make_model(seed=5, arch="rnnencdec", gru=gru)
    src, mask, tgt_in = make_batch(seed=5)
    lp_t, att_t, lp_r, att_r = run_both(cfg, model, src, mask, tgt_in)
    assert att_t is None and att_r is None
    assert_close(lp_t, att_t, lp_r, att_r, mask)


def test_options_change_the_output():
    """The reference must actually follow each option (not compute one model for all)."""
    src, mask, tgt_in = make_batch(seed=7)
    base_cfg, model = make_model(seed=7)
    params = reference.state_dict_to_numpy(model)
    base, _ = reference.forward(params, base_cfg, src.numpy(), mask.numpy(), tgt_in.numpy())
    for change in ({"gru": "cudnn"}, {"readout": "new"}, {"score": "dot"},
                   {"score": "scaled_dot"}):
        cfg, model = make_model(seed=7, **change)  # same weights where the shapes agree
        other, _ = reference.forward(reference.state_dict_to_numpy(model), cfg,
                                     src.numpy(), mask.numpy(), tgt_in.numpy())
        assert np.abs(other - base).max() > 1e-3, change


class _Tracking(dict):
    """A dict that remembers which keys were read."""

    def __init__(self, *a):
        super().__init__(*a)
        self.used = set()

    def __getitem__(self, k):
        self.used.add(k)
        return super().__getitem__(k)


@pytest.mark.parametrize("overrides", [
    {"score": "additive", "gru": "cudnn"}, {"score": "general"}, {"init_state": "mean"},
    {"arch": "rnnencdec", "gru": "cudnn"},
])
def test_reference_uses_every_parameter(overrides):
    cfg, model = make_model(**overrides)
    params = _Tracking(reference.state_dict_to_numpy(model))
    src, mask, tgt_in = make_batch()
    reference.forward(params, cfg, src.numpy(), mask.numpy(), tgt_in.numpy())
    assert params.used == set(params), set(params) - params.used


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_step_matches_reference(arch):
    """Decoding step by step (``encode`` + ``step``) gives the teacher-forced numbers."""
    cfg, model = make_model(seed=11, arch=arch, readout="new")
    src, mask, tgt_in = make_batch(seed=11)
    _, _, lp_r, att_r = run_both(cfg, model, src, mask, tgt_in)
    with torch.no_grad():
        enc = model.encode(src, mask)
        state = enc.state
        for i in range(tgt_in.size(1)):
            lp, state, alpha = model.step(enc, state, tgt_in[:, i])
            np.testing.assert_allclose(lp.double().numpy(), lp_r[:, i], rtol=0, atol=ATOL)
            if arch == "rnnsearch":
                np.testing.assert_allclose(alpha.double().numpy(), att_r[:, i], rtol=0, atol=ATOL)
            else:
                assert alpha is None


def test_log_likelihood_is_the_sum_of_the_models_log_probabilities():
    cfg, model = make_model(seed=5)
    params = reference.state_dict_to_numpy(model)
    src, tgt = [5, 9, 4, 12], [7, 4, 10]
    with torch.no_grad():
        lp, _ = model(torch.tensor([src]), torch.ones(1, 4, dtype=torch.bool), torch.tensor([[BOS] + tgt]))
    want = sum(float(lp[0, i, w]) for i, w in enumerate(tgt + [reference.EOS]))
    assert reference.log_likelihood(params, cfg, src, tgt) == pytest.approx(want, abs=ATOL)


BEAMS = [dict(K=1, alpha=0.0), dict(K=3, alpha=1.0, n_best=3), dict(K=4, alpha=0.0, n_best=2),
         dict(K=4, alpha=0.7, n_best=2, early_stop=True), dict(K=5, alpha=1.0, max_len_ratio=0.3)]


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("overrides", [{}, {"gru": "cudnn", "score": "general"}, {"arch": "rnnencdec"}])
def test_both_searches_find_the_literal_beam_searchs_n_best(seed, overrides):
    """Section 3.2 as reference.py writes it, in NumPy, against nn/search.py (the plain search over
    nn/model.py) and engine/accel/inflight.py (the product's: sentences in flight over the sped-up
    model): the same n-best lists, and the same scores to float32 rounding."""
    from rnnsearch.engine.accel.inflight import beam_search as product_search
    from rnnsearch.engine.accel.speedup import speed_up
    from rnnsearch.nn.search import beam_search as plain_search

    cfg, model = make_model(seed=seed, **overrides)
    with torch.no_grad():
        model.W_o.bias[reference.EOS] += 1.0  # hypotheses end at different steps
    params = reference.state_dict_to_numpy(model)
    src, mask, _ = make_batch(seed=seed, src_lens=(6, 3, 4, 1, 5), tgt_lens=(2, 2, 2, 2, 2))
    sped = speed_up(make_model(seed=seed, **overrides)[1])
    sped.load_state_dict(model.state_dict())
    for b in BEAMS:
        settings = dict(beam=b["K"], alpha=b["alpha"], n_best=b.get("n_best", 1),
                        max_len_ratio=b.get("max_len_ratio", 2.0), early_stop=b.get("early_stop"))
        found = {"plain": plain_search(model, src, mask, **settings),
                 "product": product_search(sped, src, mask, batch_size=2, **settings)}
        for i in range(src.size(0)):
            literal = reference.beam_search(params, cfg, src[i][mask[i]].tolist(), **b)
            assert literal, "the literal search ended with no hypothesis"
            for name, hyps in found.items():
                assert [h.tokens for h in hyps[i]] == [words for words, _, _ in literal], (name, b)
                assert [h.score for h in hyps[i]] == pytest.approx([sc for _, sc, _ in literal], abs=1e-4)
                assert [h.log_prob for h in hyps[i]] == pytest.approx([lp for _, _, lp in literal], abs=1e-4)
