"""engine/accel/: each speed path computes what the plain path of nn/ computes, and ``plain: true``
(``--plain``) turns them all off and translates the same."""

import copy
import warnings

import pytest
import torch
from conftest import random_batch, tiny_model

import rnnsearch
from rnnsearch.cli import main
from rnnsearch.config import ConfigError
from rnnsearch.engine.accel import encoder as fast_gru
from rnnsearch.engine.accel import speedup as fast
from rnnsearch.engine.accel.inflight import beam_search as in_flight
from rnnsearch.nn.attention import Attention
from rnnsearch.nn.gru import GRU
from rnnsearch.nn.model import BOS, RNNsearch
from rnnsearch.nn.search import beam_search as plain_search


def teacher_inputs(batch, length, vocab=19, seed=1):
    g = torch.Generator().manual_seed(seed)
    tgt = torch.randint(4, vocab, (batch, length), generator=g)
    tgt[:, 0] = BOS
    return tgt


def _tolerances(device):
    """dtype and (log-prob, gradient) tolerances: float64 and near-exact on a CPU; float32 on a
    GPU (cuDNN's GRU and Triton's kernels are what a GPU run uses; TF32 is off, see the fixture)."""
    if device.type == "cpu":
        return torch.float64, dict(atol=1e-12), dict(atol=1e-10)
    return torch.float32, dict(atol=2e-5, rtol=1e-5), dict(atol=2e-5, rtol=1e-4)


def _forward_and_grads(model, src, mask, tgt):
    model.zero_grad()
    lp, attn = model(src, mask, tgt)
    (lp * torch.linspace(0.5, 1.5, lp.numel(), dtype=lp.dtype, device=lp.device).view_as(lp)).sum().backward()
    return lp.detach(), attn, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("arch, gru", [("rnnsearch", "paper"), ("rnnsearch", "cudnn"), ("rnnencdec", "paper"),
                                       ("rnnencdec", "cudnn")])
def test_device_sped_up_encoder_equals_the_plain_loops_in_value_and_gradient(arch, gru, device):
    """The cudnn form's encoder in torch's fused GRU kernel (cuDNN on a GPU), the paper form's two
    directions in one stacked loop: the same log-probabilities and gradients as nn/'s one
    GRU.run loop a direction."""
    dtype, lp_tol, grad_tol = _tolerances(device)
    src, mask = (t.to(device) for t in random_batch([6, 4, 1, 5], seed=4))
    tgt = teacher_inputs(4, 5).to(device)
    plain = tiny_model(arch, gru=gru).to(device, dtype).train()  # dropouts 0: train() is the kernel's mode
    sped = fast.speed_up(copy.deepcopy(plain))
    assert (sped.birnn if arch == "rnnsearch" else sped.forward_rnn) is not (
        plain.birnn if arch == "rnnsearch" else plain.forward_rnn)
    (lp_p, _, g_p), (lp_s, _, g_s) = (_forward_and_grads(m, src, mask, tgt) for m in (plain, sped))
    assert torch.allclose(lp_p, lp_s, **lp_tol)
    assert g_p.keys() == g_s.keys() and any(k.startswith("enc_fwd.U") for k in g_p)
    for k in g_p:
        assert torch.allclose(g_p[k], g_s[k], **grad_tol), k


def test_the_fused_kernel_is_used_only_where_it_computes_the_same_thing():
    src, mask = random_batch([5, 3, 2])
    cudnn, paper = GRU(4, 3, "cudnn"), GRU(4, 3, "paper")
    assert fast_gru.can_fuse(cudnn, mask) and not fast_gru.can_fuse(paper, mask)  # the paper form: no kernel
    assert not fast_gru.can_fuse(cudnn, mask.flip(1))  # left padding: packed sequences assume right padding
    empty = mask.clone()
    empty[2] = False
    assert not fast_gru.can_fuse(cudnn, empty)  # a sentence with no word cannot be packed
    cudnn.train()
    assert not fast_gru.can_fuse(cudnn, mask, state_dropout=0.1)
    assert fast_gru.can_fuse(cudnn.eval(), mask, state_dropout=0.1)
    # padded positions come back as zeros; final states are each sentence's own last word's
    (states,), (final,) = fast_gru.fused_run([cudnn], torch.randn(3, 5, 4), mask)
    assert (states[~mask] == 0).all()
    assert torch.equal(final, states[torch.arange(3), mask.sum(1) - 1])


def test_fused_run_keeps_cudnns_weight_layout_warning_to_itself(monkeypatch):
    """cuDNN warns on every process's first call that our per-call weights (z rows negated) are
    not one flat buffer; the copy is intended, so the warning is not passed on to the user."""
    real = torch._VF.gru

    def warning_gru(*args):
        warnings.warn("RNN module weights are not part of single contiguous chunk of memory. ...",
                      UserWarning, stacklevel=1)
        return real(*args)

    monkeypatch.setattr(torch._VF, "gru", warning_gru)
    _, mask = random_batch([3, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast_gru.fused_run([GRU(4, 3, "cudnn")], torch.randn(2, 3, 4), mask)


def test_device_compiled_time_step_equals_the_eager_one_in_value_and_gradient(device):
    """train.compile: the time step through torch.compile gives the same log-probabilities and
    gradients, for batches of two different shapes (dynamic shapes). On a CPU the aot_eager
    backend (the same graph capture and autograd as the default backend without a C compiler);
    on a GPU the default backend, inductor, whose Triton kernels are what a GPU run uses."""
    dtype, lp_tol, grad_tol = _tolerances(device)
    eager, compiled = tiny_model().to(device, dtype).train(), tiny_model().to(device, dtype).train()
    fast.compile_time_step(compiled, **({"backend": "aot_eager"} if device.type == "cpu" else {}))
    calls, step = [], compiled.teacher_step
    compiled.teacher_step = lambda *a: calls.append(1) or step(*a)
    for lengths, t in (([6, 4, 1, 5], 5), ([3, 2], 7)):
        src, mask = (x.to(device) for x in random_batch(lengths, seed=5))
        tgt = teacher_inputs(len(lengths), t).to(device)
        (lp_e, att_e, g_e), (lp_c, att_c, g_c) = (_forward_and_grads(m, src, mask, tgt)
                                                  for m in (eager, compiled))
        assert torch.allclose(lp_e, lp_c, **lp_tol) and torch.allclose(att_e, att_c, **lp_tol)
        for k in g_e:
            assert torch.allclose(g_e[k], g_c[k], **grad_tol), k
    assert len(calls) == 5 + 7  # every time step went through the compiled function


def test_additive_score_through_the_sigmoid_is_v_tanh():
    """Decoding on a CPU takes v_aᵀ tanh(z) as 2 v_aᵀ σ(2z) − Σ v_a; training keeps tanh. Both
    must be the paper's e_ij, here against float64 tanh."""
    torch.manual_seed(0)
    att = Attention("additive", 6, 10, 7)
    query, keys = torch.randn(3, 1, 7) * 3, torch.randn(3, 5, 7) * 3
    exact = (torch.tanh((query + keys).double()) @ att.v_a.weight.double().t()).squeeze(-1)
    with torch.no_grad():
        plain = att.additive(query, keys)
        fast_one = fast.sigmoid_additive(att, query, keys)  # the decoding path
    assert torch.allclose(fast_one.double(), exact, atol=1e-5)
    assert torch.allclose(plain.double(), exact, atol=1e-5)
    q = query.clone().requires_grad_(True)  # the training path: tanh, with its gradient
    fast.sigmoid_additive(att, q, keys).sum().backward()
    expected = ((1 - torch.tanh(query + keys) ** 2) * att.v_a.weight.view(1, 1, -1)).sum(1, keepdim=True)
    assert q.grad is not None and torch.allclose(q.grad, expected.detach(), atol=1e-5)


@pytest.mark.parametrize("arch, score, readout", [("rnnsearch", "additive", "prev"),
                                                  ("rnnsearch", "general", "new"),
                                                  ("rnnencdec", "additive", "prev")])
def test_the_search_step_with_k_rows_a_sentence_and_output_rows_equals_model_step(arch, score, readout):
    """accel/speedup.py's step: K hypotheses on one row of their sentence's encoding, the output layer
    on some rows only, or over a few of W_o's rows (a shortlist's) — model.step's numbers."""
    model = fast.speed_up(tiny_model(arch, score=score, readout=readout, double=False))
    src, mask = random_batch([5, 3], seed=2)
    K = 3
    with torch.no_grad():
        enc = model.encode(src, mask)
        state = torch.randn(2 * K, 6)
        y = torch.tensor([4, 5, 6, 7, 8, 9])
        want_lp, want_s, want_a = model.step(enc.index_select(torch.tensor([0, 0, 0, 1, 1, 1])), state, y)
        lp, s, a = fast.step(model, enc, state, y)  # grouped: one encoder row for K states
        assert torch.allclose(lp, want_lp, atol=1e-5) and torch.allclose(s, want_s, atol=1e-6)
        assert (a is None) == (want_a is None) and (a is None or torch.allclose(a, want_a, atol=1e-6))
        rows = torch.tensor([1, 4])
        assert torch.allclose(fast.step(model, enc, state, y, rows=rows)[0], want_lp[rows], atol=1e-5)
        ids = torch.tensor([3, 5, 8, 13])
        over = fast.step(model, enc, state, y, output=fast.output_rows(model, ids))[0]
        logits = want_lp[:, ids]  # log-softmax over the shortlist = the full logits renormalised there
        assert torch.allclose(over, logits - logits.logsumexp(-1, keepdim=True), atol=1e-5)


SEARCHES = [dict(beam=1, alpha=0.0), dict(beam=1, alpha=1.0), dict(beam=4, alpha=0.0, n_best=3),
            dict(beam=4, alpha=1.0, n_best=2), dict(beam=3, alpha=0.6, n_best=3, early_stop=True),
            dict(beam=5, alpha=1.0, max_len_ratio=0.5)]


@pytest.mark.parametrize("seed", [3, 11])
@pytest.mark.parametrize("arch, gru", [("rnnsearch", "paper"), ("rnnsearch", "cudnn"),
                                       ("rnnencdec", "paper")])
def test_the_in_flight_search_finds_the_plain_searchs_n_best(seed, arch, gru):
    """engine/accel/inflight.py (sentences in flight, batched, hypotheses sharing an encoding, the
    output layer on growing rows only, two-stage top-k, greedy's own path) over a sped-up model
    finds nn/search.py's n-best lists, one sentence at a time over the plain model: the same words,
    scores and attention."""
    plain = tiny_model(arch, gru=gru, seed=seed, scale=0.7, double=False)
    sped = fast.speed_up(copy.deepcopy(plain))
    with torch.no_grad():
        plain.W_o.bias[3] += 1.5  # </s> likelier: hypotheses end at many different steps
        sped.W_o.bias[3] += 1.5
    lengths = [6, 2, 4, 7, 3, 5, 1]
    src, mask = random_batch(lengths, seed=seed)
    for settings in SEARCHES:
        want = plain_search(plain, src, mask, **settings)
        got = in_flight(sped, src, mask, batch_size=3, **settings)
        for w, g in zip(want, got):
            assert [h.tokens for h in g] == [h.tokens for h in w], settings
            assert [h.score for h in g] == pytest.approx([h.score for h in w], rel=1e-5, abs=1e-5)
            assert [h.log_prob for h in g] == pytest.approx([h.log_prob for h in w], rel=1e-5, abs=1e-5)
            for a, b in zip(g, w):
                assert (a.attention is None) == (b.attention is None)
                if a.attention is not None:
                    assert torch.allclose(torch.tensor(a.attention), torch.tensor(b.attention), atol=1e-5)


def test_plain_turns_every_speed_path_off_and_translates_the_same(reverse_model, tmp_path, capsys):
    """One switch: --plain (plain: true) decodes with nn/ as written — the plain encoder loops,
    tanh, nn/search.py — and gives the product's translations, n-best lists and attention."""
    product = rnnsearch.load(reverse_model, device="cpu")
    learner = rnnsearch.load(reverse_model, device="cpu", plain=True)
    assert product.model.birnn is fast_gru.run_bidirectional
    model = learner.model
    assert isinstance(model, RNNsearch) and model.birnn is not fast_gru.run_bidirectional
    assert all(m.additive.__func__ is Attention.additive for m in model.modules() if isinstance(m, Attention))
    src = ["w3 w4 w1 w5 w9", "w2 w6 w5 w1 w7 w8", "w4 w4 w9", "w1", "w7 w2 w2 w5 w8 w0 w3"]
    for settings in (dict(beam=1), dict(beam=5), dict(beam=4, n_best=3, alpha=0.0)):
        n_best = settings.get("n_best", 1) > 1
        fast_out, plain_out = ((t.translate_n_best if n_best else t.translate)(src, precision="fp32",
                                                                               **settings)
                               for t in (product, learner))
        flat = lambda out: [t for ts in out for t in (ts if isinstance(ts, list) else [ts])]  # noqa: E731
        for a, b in zip(flat(fast_out), flat(plain_out), strict=True):
            assert a.text == b.text and a.score == pytest.approx(b.score, abs=1e-4)
            assert torch.allclose(torch.tensor(a.attention), torch.tensor(b.attention), atol=1e-4)
    (tmp_path / "in.txt").write_text("\n".join(src) + "\n")
    outs = []
    for flags in ([], ["--plain"]):
        out = tmp_path / f"out{len(flags)}.txt"
        main(["translate", "--model", str(reverse_model), "--input", str(tmp_path / "in.txt"),
              "--output", str(out), "--beam", "5", "--precision", "fp32", *flags])
        outs.append(out.read_text())
    assert outs[0] == outs[1] and outs[0].count("\n") == len(src)
    with pytest.raises(ConfigError, match="--quantize int8: a speed path, and plain: true"):
        rnnsearch.load(reverse_model, device="cpu", quantize="int8", plain=True)
