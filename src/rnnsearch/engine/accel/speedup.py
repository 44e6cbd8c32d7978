"""The model's speed paths, swapped in by :func:`speed_up` over nn/model.py's plain drop-ins.

    birnn / forward_rnn   the encoder: torch's fused GRU kernel (cudnn form), or both directions
                          in one time loop (paper form)                          (encoder.py)
    attention.additive    tanh x = 2σ(2x) − 1 while decoding on a CPU            (:func:`sigmoid_additive`)
    teacher_step          the teacher-forced time step through torch.compile   (:func:`compile_time_step`)

and the decoding step the in-flight search (inflight.py) takes in place of ``model.step``
(:func:`step`): a sentence's K hypotheses share one row of its encoding, the output layer runs on
the growing hypotheses only, and over a lexical shortlist's rows where there is one. Each computes
what the plain path does (tests/test_accel.py holds them equal); ``plain: true`` (``--plain``)
leaves the model as nn/ wrote it.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Optional, cast

import torch
import torch.nn.functional as F

from rnnsearch.engine.accel.encoder import forward_rnn, run_bidirectional
from rnnsearch.nn.attention import Attention, at_least_fp32
from rnnsearch.nn.model import Encoded, Model, RNNsearch

Rows = tuple[torch.Tensor, Optional[torch.Tensor]]  # W_o's weight rows (V', l) and biases (V',) of some ids


def speed_up(model: Model) -> Model:
    """`model` with every speed path of this module in place of its plain drop-ins; returns it.
    The weights, their names and what the model computes stay as they were."""
    if isinstance(model, RNNsearch):
        model.birnn = run_bidirectional
    else:
        model.forward_rnn = forward_rnn
    for module in model.modules():  # the alignment head's attention too
        if isinstance(module, Attention) and module.score == "additive":
            module.additive = types.MethodType(sigmoid_additive, module)  # type: ignore[method-assign]
    return model


def sigmoid_additive(attention: Attention, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """``Attention.additive``, v_aᵀ tanh(z) with z = query + keys, decoding on a CPU as
    2 v_aᵀ σ(2z) − Σ_k v_ak, the same function (tanh x = 2σ(2x) − 1): PyTorch's vectorised tanh
    ran about 2× slower than its sigmoid on an AVX2 CPU, and this tanh, over every (hypothesis,
    source word, unit), was a tenth of a beam-5 decoding step there (docs/benchmarks.md, "tanh as a
    sigmoid"). 2z is formed in the one pass that adds query and keys, and σ is taken in place: z is
    the largest tensor of a decoding step. Where gradients are wanted (training) tanh stays: its
    backward is one kernel, and the sigmoid form measured 8% slower per training step at two
    threads. On a GPU tanh is one fused kernel."""
    if query.device.type != "cpu" or query.requires_grad or keys.requires_grad:
        return attention.v_a(torch.tanh(query + keys)).squeeze(-1)
    z2 = torch.add(query * 2, keys, alpha=2)
    v_a = cast(Callable[[torch.Tensor], torch.Tensor], attention.v_a)
    total = cast(torch.Tensor, attention.v_a.weight).sum()
    return v_a(torch.sigmoid_(z2)).squeeze(-1).mul(2).sub(total)


def compile_time_step(model: Model, **options) -> None:
    """Run the teacher-forced time step through ``torch.compile`` (``train.compile``): its
    attention and GRU elementwise work fuse into fewer kernels, which matters where the loop is
    launch-bound (GPUs). Shapes are dynamic, so batches of every size and length share one
    compiled graph. `options` go to torch.compile (e.g. backend="aot_eager")."""
    model.teacher_step = torch.compile(model.time_step, dynamic=True, **options)


def output_rows(model: Model, ids: torch.Tensor) -> Rows:
    """W_o's weight rows and biases of the target ids `ids` (a shortlist's): the int8 layer's
    own dequantised rows (quantize.py), else the fp32 ones."""
    layer = model.W_o
    if hasattr(layer, "rows"):
        return cast(Rows, getattr(layer, "rows")(ids))  # noqa: B009
    return layer.weight.index_select(0, ids), layer.bias.index_select(0, ids)


def context_terms(model: Model, enc: Encoded, state: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """C c_i (B, 3n), C_o c_i (B, 2l) and α_i (B, S) or None, from s_{i-1}. `enc` may hold one row
    per sentence where `state` holds K consecutive rows per sentence (beam search's hypotheses):
    the K share their sentence's one copy of the encoding, never copied K times."""
    group = state.size(0) // enc.src_mask.size(0)
    if not isinstance(model, RNNsearch):  # RNNencdec: the one fixed c, and no attention
        context = cast(torch.Tensor, enc.context).repeat_interleave(group, 0)
        return model.C(context), model.C_o(context), None
    keys, annotations = cast(torch.Tensor, enc.keys), cast(torch.Tensor, enc.annotations)
    if group == 1:
        c, alpha = model.attention(state, keys, annotations, enc.src_mask)
        return model.C(c), model.C_o(c), alpha
    queries = state.view(enc.src_mask.size(0), group, state.size(1))  # (sentences, K, n)
    weights = model.attention.weights_all(queries, keys, enc.src_mask).to(annotations.dtype)  # (·, K, S)
    c = torch.bmm(weights, annotations).flatten(0, 1)  # c_i per hypothesis
    return model.C(c), model.C_o(c), weights.flatten(0, 1)


def step(model: Model, enc: Encoded, state: torch.Tensor, y_prev: torch.Tensor,
         rows: Optional[torch.Tensor] = None, output: Optional[Rows] = None):
    """``model.step`` for the in-flight search: y_{i-1} (B,), s_{i-1} (B, n) -> log p(y_i) (B, V),
    s_i, α_i (B, S) or None; `enc` may have one row per sentence for K rows of state
    (:func:`context_terms`).

    rows: the output layer (most of a step's cost) only for these rows; log p is then (len(rows), V).
    Beam search passes the hypotheses still growing: a finished one's next word is fixed.
    output: :func:`output_rows` of a shortlist's ids; log p is then over those V' ids, (·, V')."""
    y_emb = model.tgt_emb(y_prev)
    gru_term, out_term, alpha = context_terms(model, enc, state)
    x_proj = model.decoder.W(y_emb) + gru_term
    s_new = model.decoder.cell(x_proj, state)
    read = state if model.cfg.readout == "prev" else s_new
    if rows is not None:
        read, y_emb, out_term = (t.index_select(0, rows) for t in (read, y_emb, out_term))
    t = model.deep_output(read, y_emb, out_term)
    logits = at_least_fp32(model.W_o(t) if output is None else F.linear(t, *output))
    if logits.requires_grad:
        return F.log_softmax(logits, -1), s_new, alpha
    # in place when no gradient needs the logits: the same numbers, without a second (B, V)
    # tensor a step, whose fresh pages cost more than the softmax (docs/benchmarks.md)
    return torch.log_softmax(logits, -1, out=logits), s_new, alpha
