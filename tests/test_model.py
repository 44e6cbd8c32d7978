"""Model behaviour: shapes, masking, normalised attention, RNNencdec's fixed context, gradients."""

import pytest
import torch
from conftest import random_batch, tiny_model

from rnnsearch.engine.data.vocab import BOS, PAD

SCORES = ["additive", "dot", "general", "scaled_dot"]


def teacher_inputs(batch, length, vocab=19, seed=1):
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, vocab, (batch, length), generator=g)
    tgt[:, 0] = BOS
    return tgt


@pytest.mark.parametrize("score", SCORES)
def test_shapes_and_normalised_attention(score):
    model = tiny_model(score=score)
    src, mask = random_batch([5, 3, 1])
    lp, attn = model(src, mask, teacher_inputs(3, 4))
    assert lp.shape == (3, 4, 19) and attn.shape == (3, 4, 5)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3, 4, dtype=lp.dtype))
    assert torch.allclose(attn.sum(-1), torch.ones(3, 4, dtype=attn.dtype))
    # padding gets exactly zero weight, and attention is not uniform on real words
    assert (attn[1, :, 3:] == 0).all() and (attn[2, :, 1:] == 0).all()
    assert attn[0].std(-1).min() > 1e-3


@pytest.mark.parametrize("gru", ["paper", "cudnn"])
@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_padding_and_batch_composition_change_nothing(arch, gru):
    model = tiny_model(arch, gru=gru)
    src, mask = random_batch([6, 4, 2], seed=3)
    tgt = teacher_inputs(3, 5)
    lp, attn = model(src, mask, tgt)
    # garbage ids in padded positions (mask still False) change nothing
    noisy = src.clone()
    noisy[~mask] = 9
    lp2, attn2 = model(noisy, mask, tgt)
    assert torch.allclose(lp, lp2, atol=1e-12)
    # each sentence alone, without padding, gives the same result as inside the batch
    for i, n in enumerate([6, 4, 2]):
        lp1, attn1 = model(src[i:i + 1, :n], mask[i:i + 1, :n], tgt[i:i + 1])
        assert torch.allclose(lp1[0], lp[i], atol=1e-10)
        if attn is not None:
            assert torch.allclose(attn1[0], attn[i, :, :n], atol=1e-10)


def test_rnnencdec_has_no_attention_and_a_constant_context():
    model = tiny_model("rnnencdec")
    src, mask = random_batch([5, 2])
    seen, deep_output = [], model.deep_output
    model.deep_output = lambda state, y_emb, term: seen.append(term) or deep_output(state, y_emb, term)
    lp, attn = model(src, mask, teacher_inputs(2, 6))
    assert attn is None
    ctx = seen[0]  # (B, T, 2l): C_o c, the context's term in the deep output, at every step
    assert ctx.shape == (2, 6, 10)
    assert torch.equal(ctx, ctx[:, :1].expand_as(ctx))
    # and it really depends on the source
    assert not torch.allclose(ctx[0, 0], ctx[1, 0])


@pytest.mark.parametrize("arch,readout", [("rnnsearch", "prev"), ("rnnsearch", "new"), ("rnnencdec", "prev")])
def test_step_by_step_decoding_equals_teacher_forcing(arch, readout):
    model = tiny_model(arch, readout=readout)
    src, mask = random_batch([4, 3])
    tgt = teacher_inputs(2, 5)
    lp, attn = model(src, mask, tgt)
    enc = model.encode(src, mask)
    state = enc.state
    for i in range(tgt.size(1)):
        lp_i, state, attn_i = model.step(enc, state, tgt[:, i])
        assert torch.allclose(lp_i, lp[:, i], atol=1e-10)
        if attn is not None:
            assert torch.allclose(attn_i, attn[:, i], atol=1e-10)


def _orthogonal_gates(U: torch.Tensor, n: int) -> bool:
    return all(torch.allclose(b @ b.t(), torch.eye(n), atol=1e-5) for b in U.detach().chunk(3, 0))


def test_paper_initialisation_is_appendix_b():
    from rnnsearch.config import ModelConfig
    from rnnsearch.nn.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(emb=40, hidden=32, align=48, maxout=24, init="paper")
    model = build_model(cfg, 500, 600).requires_grad_(False)
    for gru in (model.enc_fwd, model.enc_bwd, model.decoder):  # recurrent gate matrices orthogonal
        assert _orthogonal_gates(gru.U.weight, 32)
    assert (model.attention.v_a.weight == 0).all()
    for w in (model.attention.W_a.weight, model.attention.U_a.weight):  # N(0, 0.001²)
        assert abs(float(w.std()) - 0.001) < 0.0001 and abs(float(w.mean())) < 0.0001
    # N(0, 0.01²)
    for w in (model.W_o.weight, model.src_emb.weight[1:], model.C.weight, model.enc_fwd.W.weight):
        assert abs(float(w.std()) - 0.01) < 0.001
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert (p == 0).all(), name
    assert (model.tgt_emb.weight[PAD] == 0).all()


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_uniform_initialisation_fills_every_parameter(arch):
    from rnnsearch.config import ModelConfig
    from rnnsearch.nn.model import build_model

    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, emb=40, hidden=32, align=48, maxout=24, init="uniform",
                                    init_scale=0.05), 500, 600).requires_grad_(False)
    for name, p in model.named_parameters():
        if name.endswith("_emb.weight"):
            assert (p[PAD] == 0).all()
            p = p[PAD + 1:]
        assert float(p.abs().max()) <= 0.05, name
        if p.numel() >= 1000:  # U(-a, a): std a/√3, mean 0
            assert abs(float(p.std()) - 0.05 / 3 ** 0.5) < 0.003, name
            assert abs(float(p.mean())) < 0.004, name
    if arch == "rnnsearch":  # v_a ≠ 0: the alignment scores differ from the start
        assert (model.attention.v_a.weight != 0).all()


@pytest.mark.parametrize("scheme", ["glorot", "glorot_orthogonal"])
def test_glorot_initialisation(scheme):
    from rnnsearch.config import ModelConfig
    from rnnsearch.nn.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(emb=40, hidden=32, align=48, maxout=24, init=scheme)
    model = build_model(cfg, 500, 600).requires_grad_(False)
    for name, p in model.named_parameters():
        if name.endswith("bias"):
            assert (p == 0).all(), name
    bound = (6 / (40 + 32)) ** 0.5  # each gate block of W (3n x m) on its own
    W = model.enc_fwd.W.weight
    assert float(W.abs().max()) <= bound and abs(float(W.std()) - bound / 3 ** 0.5) < 0.01
    bound = (6 / (24 + 600)) ** 0.5
    assert float(model.W_o.weight.abs().max()) <= bound
    assert abs(float(model.W_o.weight.std()) - bound / 3 ** 0.5) < 0.003
    assert _orthogonal_gates(model.decoder.U.weight, 32) == (scheme == "glorot_orthogonal")


def test_initialisation_default_and_paper_preset():
    from rnnsearch.config import ModelConfig, config_from_dict

    assert ModelConfig().init == "uniform" and ModelConfig().init_scale == 0.1
    # the faithful model stays one word away
    assert config_from_dict({"preset": "paper"}).model.init == "paper"


def test_paper_preset_parameter_count():
    from rnnsearch.config import config_from_dict
    from rnnsearch.nn.model import build_model

    cfg = config_from_dict({"preset": "paper"})
    n = build_model(cfg.model, 30000, 30000).num_parameters()
    assert abs(n - 80.4e6) < 0.1e6


@pytest.mark.parametrize("score", SCORES)
def test_gradients_match_finite_differences(score):
    model = tiny_model(score=score, emb=3, hidden=3, align=3, maxout=2, scale=0.3)
    src, mask = random_batch([3, 2])
    tgt = teacher_inputs(2, 3)
    names = ["attention." + ("U_a.weight" if score == "additive" else "W_k.weight"), "decoder.U.weight",
             "enc_bwd.W.weight", "W_s.weight"]
    params = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters() if k in names}

    def loss(*ps):
        out, _ = torch.func.functional_call(model, dict(zip(params, ps)), (src, mask, tgt))
        return out.sum()

    assert torch.autograd.gradcheck(loss, tuple(params.values()), eps=1e-6, atol=1e-5)


def test_set_dropout_switches_every_dropout():
    rates = dict(dropout_emb=0.3, dropout_hidden=0.3, dropout_readout=0.3, dropout_state=0.3,
                 dropout_dec_state=0.3)
    model = tiny_model(seed=3, **rates)
    src, mask = random_batch([6, 4])
    tgt = teacher_inputs(2, 5)
    plain = model(src, mask, tgt)[0]  # eval mode
    model.train()
    model.set_dropout(False)  # training mode, no dropout anywhere: exactly the eval output
    assert torch.equal(model(src, mask, tgt)[0], plain)
    model.set_dropout(True)
    assert not torch.allclose(model(src, mask, tgt)[0], plain)
    assert model.drop_emb.p == 0.3 and model.state_dropout == 0.3 and model.dec_state_dropout == 0.3


@pytest.mark.parametrize("option", ["dropout_state", "dropout_dec_state"])
def test_state_dropout_is_training_only_and_keeps_attention_a_distribution(option):
    plain = tiny_model(seed=3)
    noisy = tiny_model(seed=3, **{option: 0.5})
    src, mask = random_batch([6, 4])
    tgt = teacher_inputs(2, 5)
    lp_plain, att_plain = plain(src, mask, tgt)
    lp, att = noisy(src, mask, tgt)  # eval mode: the option changes nothing
    assert torch.equal(lp, lp_plain) and torch.equal(att, att_plain)
    noisy.train()
    torch.manual_seed(0)
    a = noisy(src, mask, tgt)[0]
    torch.manual_seed(0)
    b, att = noisy(src, mask, tgt)
    torch.manual_seed(1)
    c = noisy(src, mask, tgt)[0]
    assert torch.equal(a, b) and not torch.allclose(a, c) and not torch.allclose(a, lp_plain)
    assert torch.allclose(att.sum(-1), torch.ones(2, 5, dtype=att.dtype)) and (att[1, :, 4:] == 0).all()
    a.sum().backward()
    assert all(p.grad is not None for p in noisy.parameters() if p.requires_grad and p.dim() > 1)


def _with_explicit_context(model, src, mask, tgt):
    """Teacher forcing as the paper writes it, one step at a time: c_i = Σ_j α_ij h_j, then C c_i
    and C_o c_i multiplied out and the deep output read at every step."""
    enc = model.encode(src, mask)
    y_emb = model.tgt_emb(tgt)
    x = model.decoder.W(y_emb)
    s, out, alphas = enc.state, [], []
    for i in range(tgt.size(1)):
        c, alpha = model.attention(s, enc.keys, enc.annotations, enc.src_mask)
        s_new = model.decoder.cell(x[:, i] + model.C(c), s)
        read = s if model.cfg.readout == "prev" else s_new
        out.append(torch.log_softmax(model.W_o(model.deep_output(read, y_emb[:, i], model.C_o(c))), -1))
        alphas.append(alpha)
        s = s_new
    return torch.stack(out, 1), torch.stack(alphas, 1)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("readout", ["prev", "new"])
def test_teacher_forcing_equals_the_step_by_step_equations_in_value_and_gradient(dtype, tol, readout):
    """forward hoists W E y_{i-1} out of the loop and runs C_o and the deep output once over all
    steps: the paper's numbers to rounding, in the log-probabilities, the attention and every
    gradient."""
    src, mask = random_batch([6, 4, 1, 5], seed=3)
    tgt = teacher_inputs(4, 7)
    results = []
    for path in ("forward", "explicit"):
        model = tiny_model(readout=readout, double=False).to(dtype).train()
        model.set_dropout(False)
        if path == "forward":
            lp, attn = model(src, mask, tgt)
        else:
            lp, attn = _with_explicit_context(model, src, mask, tgt)
        (lp * torch.linspace(0.5, 1.5, lp.numel(), dtype=dtype).view_as(lp)).sum().backward()
        results.append((lp.detach(), attn.detach(), {k: p.grad for k, p in model.named_parameters()}))
    (lp, attn, grads), (lp2, attn2, grads2) = results
    assert torch.allclose(lp, lp2, rtol=tol, atol=tol) and torch.allclose(attn, attn2, rtol=tol, atol=tol)
    for name, grad in grads.items():
        scale = grad.abs().max().clamp_min(1.0)
        assert torch.allclose(grad, grads2[name], rtol=tol, atol=tol * scale), name
