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
    seen, readout = [], model.readout
    model.readout = lambda state, y_emb, term: seen.append(term) or readout(state, y_emb, term)
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


def _loop_only(monkeypatch):
    import rnnsearch.nn.gru
    import rnnsearch.nn.model

    for mod in (rnnsearch.nn.gru, rnnsearch.nn.model):
        monkeypatch.setattr(mod, "can_fuse", lambda *a, **k: False)


def _tolerances(device):
    """dtype and (log-prob, gradient) tolerances: float64 and near-exact on a CPU; float32 on a
    GPU (cuDNN's GRU and Triton's kernels are what a GPU run uses; TF32 is off, see the fixture)."""
    if device.type == "cpu":
        return torch.float64, dict(atol=1e-12), dict(atol=1e-10)
    return torch.float32, dict(atol=2e-5, rtol=1e-5), dict(atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("arch", ["rnnsearch", "rnnencdec"])
def test_device_fused_cudnn_encoder_equals_the_time_loop_in_value_and_gradient(arch, monkeypatch, device):
    """The cudnn form's encoder runs in torch's fused GRU kernel (cuDNN on a GPU): same
    log-probabilities and the same gradient for every weight as the Python time loop."""
    dtype, lp_tol, grad_tol = _tolerances(device)
    src, mask = (t.to(device) for t in random_batch([6, 4, 1, 5], seed=4))
    tgt = teacher_inputs(4, 5).to(device)
    runs = []
    for fused in (True, False):
        # dropouts are 0: train() only changes the kernel's mode
        model = tiny_model(arch, gru="cudnn").to(device, dtype).train()
        with monkeypatch.context() as m:
            if not fused:
                _loop_only(m)
            lp, _ = model(src, mask, tgt)
            lp.sum().backward()
        runs.append((lp.detach(),
                     {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (lp_f, g_f), (lp_l, g_l) = runs
    assert torch.allclose(lp_f, lp_l, **lp_tol)
    assert g_f.keys() == g_l.keys() and any(k.startswith("enc_fwd.U") for k in g_f)
    for k in g_f:
        assert torch.allclose(g_f[k], g_l[k], **grad_tol), k


def test_the_fused_kernel_is_used_only_where_it_computes_the_same_thing():
    from rnnsearch.nn.gru import GRU, can_fuse, fused_run

    src, mask = random_batch([5, 3, 2])
    cudnn, paper = GRU(4, 3, "cudnn"), GRU(4, 3, "paper")
    assert can_fuse(cudnn, mask) and not can_fuse(paper, mask)  # the paper form has no fused kernel
    assert not can_fuse(cudnn, mask.flip(1))  # left padding: packed sequences assume right padding
    empty = mask.clone()
    empty[2] = False
    assert not can_fuse(cudnn, empty)  # a sentence with no word cannot be packed
    cudnn.train()
    assert not can_fuse(cudnn, mask, state_dropout=0.1) and can_fuse(cudnn.eval(), mask, state_dropout=0.1)
    # padded positions come back as zeros; final states are each sentence's own last word's
    (states,), (final,) = fused_run([cudnn], torch.randn(3, 5, 4), mask)
    assert (states[~mask] == 0).all()
    assert torch.equal(final, states[torch.arange(3), mask.sum(1) - 1])


def test_device_compiled_time_step_equals_the_eager_one_in_value_and_gradient(device):
    """train.compile: the time step through torch.compile gives the same log-probabilities and
    gradients, for batches of two different shapes (dynamic shapes). On a CPU the aot_eager
    backend (the same graph capture and autograd as the default backend without a C compiler);
    on a GPU the default backend, inductor, whose Triton kernels are what a GPU run uses."""
    dtype, lp_tol, grad_tol = _tolerances(device)
    eager, compiled = tiny_model().to(device, dtype).train(), tiny_model().to(device, dtype).train()
    compiled.compile_step(**({"backend": "aot_eager"} if device.type == "cpu" else {}))
    calls, step = [], compiled._compiled_step
    compiled._compiled_step = lambda *a: calls.append(1) or step(*a)
    for lengths, t in (([6, 4, 1, 5], 5), ([3, 2], 7)):
        src, mask = (x.to(device) for x in random_batch(lengths, seed=5))
        tgt = teacher_inputs(len(lengths), t).to(device)
        out = {}
        for name, m in (("eager", eager), ("compiled", compiled)):
            m.zero_grad()
            lp, attn = m(src, mask, tgt)
            lp.sum().backward()
            out[name] = lp.detach(), attn.detach()
        assert torch.allclose(out["eager"][0], out["compiled"][0], **lp_tol)
        assert torch.allclose(out["eager"][1], out["compiled"][1], **lp_tol)
        for (k, p), q in zip(eager.named_parameters(), compiled.parameters()):
            assert torch.allclose(p.grad, q.grad, **grad_tol), k
    assert len(calls) == 5 + 7  # every time step went through the compiled function


def test_fused_run_keeps_cudnns_weight_layout_warning_to_itself(monkeypatch):
    """cuDNN warns on every process's first call that our per-call weights (z rows negated) are
    not one flat buffer; the copy is intended, so the warning is not passed on to the user."""
    import warnings

    from rnnsearch.nn.gru import GRU, fused_run

    real = torch._VF.gru

    def warning_gru(*args):
        warnings.warn("RNN module weights are not part of single contiguous chunk of memory. ...",
                      UserWarning, stacklevel=1)
        return real(*args)

    monkeypatch.setattr(torch._VF, "gru", warning_gru)
    _, mask = random_batch([3, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fused_run([GRU(4, 3, "cudnn")], torch.randn(2, 3, 4), mask)


def _with_explicit_context(model, src, mask, tgt):
    """Teacher forcing as the paper writes it, one step at a time: c_i = Σ_j α_ij h_j, then C c_i
    and C_o c_i multiplied out and the deep output read at every step."""
    enc = model.encode(src, mask)
    y_emb = model.tgt_emb(tgt)
    x = model.decoder.W(y_emb)
    s, out, alphas = enc.state, [], []
    for i in range(tgt.size(1)):
        c, alpha = model.attend(enc, s)
        s_new = model.decoder.cell(x[:, i] + model.C(c), s)
        read = s if model.cfg.readout == "prev" else s_new
        out.append(torch.log_softmax(model.readout(read, y_emb[:, i], model.C_o(c)), -1))
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


def test_additive_score_through_the_sigmoid_is_v_tanh():
    """Decoding on a CPU takes v_aᵀ tanh(z) as 2 v_aᵀ σ(2z) − Σ v_a; training keeps tanh. Both
    must be the paper's e_ij, here against float64 tanh."""
    from rnnsearch.nn.attention import Attention

    torch.manual_seed(0)
    att = Attention("additive", 6, 10, 7)
    query, keys = torch.randn(3, 1, 7) * 3, torch.randn(3, 5, 7) * 3
    exact = (torch.tanh((query + keys).double()) @ att.v_a.weight.double().t()).squeeze(-1)
    with torch.no_grad():  # the decoding path
        fast = att.additive(query, keys)
    assert torch.allclose(fast.double(), exact, atol=1e-5)
    q = query.clone().requires_grad_(True)  # the training path: tanh, with its gradient
    att.additive(q, keys).sum().backward()
    expected = ((1 - torch.tanh(query + keys) ** 2) * att.v_a.weight.view(1, 1, -1)).sum(1, keepdim=True)
    assert q.grad is not None and torch.allclose(q.grad, expected.detach(), atol=1e-5)
