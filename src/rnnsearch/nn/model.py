"""Appendix A of Bahdanau et al. (2014): RNNsearch, and the RNNencdec baseline (Cho et al. 2014).

Shapes: batch B, source length S, target length T, hidden n, embedding m, alignment n', maxout l,
target vocabulary V.

Encoder (A.2.1). RNNsearch reads the source embeddings E x_j both ways (nn/gru.py) and keeps
every annotation; RNNencdec reads them forwards and keeps one vector:

    RNNsearch   h_j = [→h_j; ←h_j]  (B, S, 2n)      s_0 = tanh(W_s ←h_1)
    RNNencdec   c = tanh(V h_Tx)    (B, n)          s_0 = tanh(V_s c)

Decoder (A.2.2), the same for both but for c_i:

    RNNsearch   α_ij = softmax_j a(s_{i-1}, h_j)     c_i = Σ_j α_ij h_j        (nn/attention.py)
    RNNencdec   c_i = c at every step, no α
    s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])     its input side W E y_{i-1} + C c_i

Deep output (A.2.2), the same for both:

    t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i      t_i = max(t̃_{i,2k-1}, t̃_{i,2k})  (l wide)
    p(y_i | y_<i, x) = softmax(W_o t_i)

Each model is one class: its constructor lists every parameter, ``forward`` is teacher forcing
(the log-likelihood of a target sentence), ``step`` one decoding step (nn/search.py). The optional
alignment head (``model.alignment_head``, not in the paper) is nn/alignment_head.py, run after the
teacher-forced loop from the states it made.

Speed: engine/accel/ swaps in faster drop-ins for the three marked attributes below (``birnn``,
``forward_rnn``, ``teacher_step``) and for the attention's ``additive``, each tested equal to the
plain one; ``plain: true`` in a config (``--plain``) keeps the plain ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, Union, cast

import torch
import torch.nn.functional as F
from torch import nn

from rnnsearch.config import ModelConfig
from rnnsearch.nn.alignment_head import AlignmentHead, module_names, saved_names
from rnnsearch.nn.attention import Attention, at_least_fp32
from rnnsearch.nn.gru import GRU, init_weights_, state_mask

__all__ = ["PAD", "UNK", "BOS", "EOS", "Encoded", "RNNsearch", "RNNencdec", "Model", "build_model"]

# The ids every tokeniser reserves (engine/data/vocab.py builds its vocabularies around them), so
# the model never needs to know which tokeniser it is fed.
PAD, UNK, BOS, EOS = 0, 1, 2, 3

Recurrent = tuple[torch.Tensor, Optional[torch.Tensor]]  # a GRU's U, split once per loop (GRU.recurrent)


@dataclass
class Encoded:
    """What the decoder needs from the source, computed once per sentence.

    annotations (B, S, 2n)    h_j (RNNsearch) — None for RNNencdec
    keys        (B, S, ·)     U_a h_j + b_a, or W_k h_j — None for RNNencdec
    context     (B, n)        the fixed c (RNNencdec) — None for RNNsearch
    src_mask    (B, S)        True on real source words
    state       (B, n)        s_0
    """

    annotations: Optional[torch.Tensor]
    keys: Optional[torch.Tensor]
    context: Optional[torch.Tensor]
    src_mask: torch.Tensor
    state: torch.Tensor

    def index_select(self, index: torch.Tensor) -> Encoded:
        """Rows `index` of every tensor (to give each hypothesis its sentence's encoding)."""
        pick = lambda t: None if t is None else t.index_select(0, index)  # noqa: E731
        return Encoded(pick(self.annotations), pick(self.keys), pick(self.context),
                       self.src_mask.index_select(0, index), self.state.index_select(0, index))


def plain_birnn(fwd: GRU, bwd: GRU, x: torch.Tensor, mask: torch.Tensor,
                state_dropout: float) -> tuple[torch.Tensor, torch.Tensor]:
    """→h_j and ←h_j (B, S, n) each: the forward GRU over E x_1 .. E x_Tx, the backward one over
    E x_Tx .. E x_1 (padding carries the state, so each sentence starts from its own last word)."""
    h0 = x.new_zeros(x.size(0), fwd.hidden)
    forward, _ = fwd.run(fwd.W(x), mask, h0, state_dropout=state_dropout)
    backward, _ = bwd.run(bwd.W(x), mask, h0, reverse=True, state_dropout=state_dropout)
    return forward, backward


def plain_forward_rnn(gru: GRU, x: torch.Tensor, mask: torch.Tensor, state_dropout: float) -> torch.Tensor:
    """h_Tx (B, n): the last real word's state of one GRU over x (padded steps carry it)."""
    _, last = gru.run(gru.W(x), mask, x.new_zeros(x.size(0), gru.hidden), state_dropout=state_dropout)
    return last


class RNNsearch(nn.Module):
    """The paper's model (Appendix A): c_i by attention over the annotations, at every step."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        m, n, n_align, l_ = cfg.emb, cfg.hidden, cfg.align, cfg.maxout
        # (the order below is the order weights are drawn in, as models trained before drew them)
        self.src_emb = nn.Embedding(src_vocab, m, padding_idx=PAD)  # E, source side
        self.tgt_emb = nn.Embedding(tgt_vocab, m, padding_idx=PAD)  # E, target side
        # Encoder (A.2.1): W, W_z, W_r stacked in .W (m -> 3n); U, U_z, U_r in .U (n -> 3n)
        self.enc_fwd = GRU(m, n, cfg.gru)  # →h
        self.enc_bwd = GRU(m, n, cfg.gru)  # ←h
        self.W_s = nn.Linear(2 * n if cfg.init_state == "mean" else n, n)  # s_0 = tanh(W_s ←h_1)
        self.attention = Attention(cfg.score, n, 2 * n, n_align)  # W_a, U_a, v_a (or W_k, W_g)
        # Decoder (A.2.2): s_i = GRU(s_{i-1}, [E y_{i-1}; c_i]); its input matrices W, W_z, W_r
        # (on E y_{i-1}) in decoder.W, and C, C_z, C_r (on c_i) in C
        self.decoder = GRU(m, n, cfg.gru)
        self.C = nn.Linear(2 * n, 3 * n, bias=False)
        # Deep output: t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i (2l), maxout to l, W_o to V
        self.U_o = nn.Linear(n, 2 * l_)
        self.V_o = nn.Linear(m, 2 * l_, bias=False)
        self.C_o = nn.Linear(2 * n, 2 * l_, bias=False)
        self.W_o = nn.Linear(l_, tgt_vocab)  # speed: engine/accel/quantize.py may swap the per-word products
        self.align_head: Optional[AlignmentHead] = None  # β_i (nn/alignment_head.py); None: the paper's
        if cfg.alignment_head != "none":
            self.align_head = AlignmentHead(cfg.alignment_head, cfg.score, n, m, 2 * n, n_align, cfg.gru)
            self.register_state_dict_post_hook(saved_names)  # its keys as models trained before saved them
            self.register_load_state_dict_pre_hook(module_names)
        self.drop_emb = nn.Dropout(cfg.dropout_emb)  # on E x_j and E y_{i-1}
        self.drop_hidden = nn.Dropout(cfg.dropout_hidden)  # on the annotations h_j
        self.drop_readout = nn.Dropout(cfg.dropout_readout)  # on t_i
        self.state_dropout, self.dec_state_dropout = cfg.dropout_state, cfg.dropout_dec_state  # on h, s
        self.dropout_on = True
        _init_(self, cfg)
        # the plain paths; engine/accel/ swaps in faster ones (the module docstring)
        self.birnn: Callable[..., tuple[torch.Tensor, torch.Tensor]] = plain_birnn
        self.teacher_step: Optional[Callable[..., tuple[torch.Tensor, ...]]] = None  # None: time_step

    def set_dropout(self: Model, on: bool) -> None:
        """Every dropout of the model at its configured rate (on) or at 0 (off); the trainer keeps
        them off for the first ``train.dropout_start`` steps ("late dropout", Liu et al. 2023)."""
        c = self.cfg
        self.dropout_on = on
        self.drop_emb.p, self.drop_hidden.p, self.drop_readout.p = (
            (c.dropout_emb, c.dropout_hidden, c.dropout_readout) if on else (0.0, 0.0, 0.0))
        self.state_dropout = c.dropout_state if on else 0.0
        self.dec_state_dropout = c.dropout_dec_state if on else 0.0

    # -- encoder -------------------------------------------------------------------
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        """Annotations h_j = [→h_j; ←h_j] (A.2.1), their keys, and s_0 = tanh(W_s ←h_1).
        src, src_mask (B, S), the mask True on real words."""
        x = self.drop_emb(self.src_emb(src))  # E x_j (B, S, m), shared by both directions
        fwd, bwd = self.birnn(self.enc_fwd, self.enc_bwd, x, src_mask, self.state_dropout)  # (B, S, n) each
        annotations = torch.cat([fwd, bwd], -1)  # h_j (B, S, 2n)
        if self.cfg.init_state == "mean":  # dl4mt/Nematus: the mean of the annotations
            keep = src_mask.unsqueeze(-1).to(annotations.dtype)
            summary = (annotations * keep).sum(1) / keep.sum(1)  # (B, 2n)
        else:
            summary = bwd[:, 0]  # ←h_1 (B, n): the backward pass has read the whole sentence
        state = torch.tanh(self.W_s(summary))  # s_0 (B, n)
        annotations = self.drop_hidden(annotations)
        keys = self.attention.keys(annotations)  # U_a h_j + b_a (B, S, n'): once per sentence
        return Encoded(annotations, keys, None, src_mask, state)

    # -- decoder, teacher-forced -----------------------------------------------------
    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, log_probs: bool = True,
                packed: bool = False, alignment_head: bool = False):
        """Teacher forcing: log p(y_i | y_<i, x) for every target position.

        src, src_mask (B, S); tgt_in (B, T) = <s> y_1 .. y_{T-1}.
        Returns log p (B, T, V) — or, with log_probs=False, the logits the training loss consumes —
        and attention α (B, T, S). packed=True: the output layer runs on the N non-<pad> entries of
        tgt_in only (row-major), giving (N, V): training skips the padding. alignment_head=True (a
        model with one): a third value, the head's β (B, T, S), row i for the target token i; the
        </s> row is zero (no state has read it)."""
        enc = self.encode(src, src_mask)
        emb = self.drop_emb(self.tgt_emb(tgt_in))  # E y_{i-1} (B, T, m)
        x_proj = self.decoder.W(emb)  # W E y_{i-1} + b (B, T, 3n), every step in one product
        keys, annotations = cast(torch.Tensor, enc.keys), cast(torch.Tensor, enc.annotations)
        time_step = self.teacher_step or self.time_step
        step = lambda x_i, s, rec: time_step(x_i, s, keys, annotations, src_mask, rec)  # noqa: E731
        read, new_states, (contexts, attention) = _teacher_loop(self, enc.state, x_proj, step, alignment_head)
        y_emb, real = emb, (tgt_in != PAD if packed else None)
        if real is not None:  # the output layer is most of the cost: skip the padding
            read, y_emb, contexts = read[real], emb[real], contexts[real]
        logits = self.W_o(self.deep_output(read, y_emb, self.C_o(contexts)))  # (B, T, V) or (N, V)
        out = F.log_softmax(at_least_fp32(logits), -1) if log_probs else logits
        if not alignment_head:
            return out, attention
        if self.align_head is None or new_states is None:
            raise ValueError("this model has no alignment head (model.alignment_head)")
        return out, attention, self.align_head(annotations, src_mask, new_states, emb, tgt_in != PAD)

    def time_step(self, x_i: torch.Tensor, s: torch.Tensor, keys: torch.Tensor, annotations: torch.Tensor,
                  src_mask: torch.Tensor, recurrent: Recurrent) -> tuple[torch.Tensor, ...]:
        """One teacher-forced step: c_i and α_i from s_{i-1}, then s_i from [E y_{i-1}; c_i]
        (x_i = W E y_{i-1} + b, hoisted). Returns s_i (B, n), c_i (B, 2n), α_i (B, S)."""
        c, alpha = self.attention(s, keys, annotations, src_mask)
        return self.decoder.cell(x_i + self.C(c), s, recurrent), c, alpha

    def logits(self: Model, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor):
        """forward(..., log_probs=False)."""
        return self(src, src_mask, tgt_in, log_probs=False)

    # -- decoder, one step (beam search) ---------------------------------------------
    def context(self, enc: Encoded, s_prev: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """c_i (B, 2n) and α_i (B, S) from s_{i-1}: align, normalise, weighted sum (nn/attention.py)."""
        return self.attention(s_prev, enc.keys, enc.annotations, enc.src_mask)

    def step(self: Model, enc: Encoded, s_prev: torch.Tensor, y_prev: torch.Tensor):
        """One decoding step: y_{i-1} (B,), s_{i-1} (B, n), `enc` one row per row of s_{i-1} ->
        log p(y_i | y_<i, x) (B, V), s_i (B, n), α_i (B, S) (None for RNNencdec)."""
        y_emb = self.tgt_emb(y_prev)  # E y_{i-1} (B, m)
        c, alpha = self.context(enc, s_prev)  # c_i (B, 2n), α_i (B, S)
        s = self.decoder.cell(self.decoder.W(y_emb) + self.C(c), s_prev)  # s_i (B, n)
        t = self.deep_output(s_prev if self.cfg.readout == "prev" else s, y_emb, self.C_o(c))  # t_i (B, l)
        return F.log_softmax(at_least_fp32(self.W_o(t)), -1), s, alpha

    def deep_output(self: Model, s: torch.Tensor, y_emb: torch.Tensor, c_term: torch.Tensor) -> torch.Tensor:
        """t_i (…, l) from the state read out, E y_{i-1} and C_o c_i, on (B, ·) or (B, T, ·) alike."""
        t = self.U_o(s) + self.V_o(y_emb) + c_term  # t̃_i = U_o s + V_o E y_{i-1} + C_o c_i (…, 2l)
        # maxout: the max of adjacent pairs, as the max of the two strided halves (2.4x amax over pairs)
        return self.drop_readout(torch.maximum(t[..., 0::2], t[..., 1::2]))

    def num_parameters(self: Model) -> int:
        return sum(p.numel() for p in self.parameters())


class RNNencdec(nn.Module):
    """Cho et al. (2014) encoder–decoder: one fixed context vector c for every step."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        m, n, l_ = cfg.emb, cfg.hidden, cfg.maxout
        self.src_emb = nn.Embedding(src_vocab, m, padding_idx=PAD)  # E, source side
        self.tgt_emb = nn.Embedding(tgt_vocab, m, padding_idx=PAD)  # E, target side
        self.enc_fwd = GRU(m, n, cfg.gru)  # h_j, forwards only
        self.V = nn.Linear(n, n)  # c = tanh(V h_Tx)
        self.V_s = nn.Linear(n, n)  # s_0 = tanh(V' c)
        self.decoder = GRU(m, n, cfg.gru)  # s_i = GRU(s_{i-1}, [E y_{i-1}; c]): W on E y, C on c
        self.C = nn.Linear(n, 3 * n, bias=False)
        self.U_o = nn.Linear(n, 2 * l_)  # t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c
        self.V_o = nn.Linear(m, 2 * l_, bias=False)
        self.C_o = nn.Linear(n, 2 * l_, bias=False)
        self.W_o = nn.Linear(l_, tgt_vocab)
        self.align_head = None  # the alignment head reads annotations, which this model has not
        self.drop_emb = nn.Dropout(cfg.dropout_emb)  # on E x_j and E y_{i-1}
        self.drop_hidden = nn.Dropout(cfg.dropout_hidden)  # on c
        self.drop_readout = nn.Dropout(cfg.dropout_readout)  # on t_i
        self.state_dropout, self.dec_state_dropout = cfg.dropout_state, cfg.dropout_dec_state  # on h, s
        self.dropout_on = True
        _init_(self, cfg)
        # the plain paths; engine/accel/ swaps in faster ones (module docstring)
        self.forward_rnn: Callable[..., torch.Tensor] = plain_forward_rnn
        self.teacher_step: Optional[Callable[..., tuple[torch.Tensor, ...]]] = None  # None: time_step

    # RNNsearch's dropout switch, decoding step and deep output (c in place of c_i), and the rest
    set_dropout, step, deep_output = RNNsearch.set_dropout, RNNsearch.step, RNNsearch.deep_output
    logits, num_parameters = RNNsearch.logits, RNNsearch.num_parameters

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        """c = tanh(V h_Tx) and s_0 = tanh(V_s c), each (B, n)."""
        x = self.drop_emb(self.src_emb(src))  # E x_j (B, S, m)
        last = self.forward_rnn(self.enc_fwd, x, src_mask, self.state_dropout)  # h_Tx (B, n)
        context = self.drop_hidden(torch.tanh(self.V(last)))
        return Encoded(None, None, context, src_mask, torch.tanh(self.V_s(context)))

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, log_probs: bool = True,
                packed: bool = False, alignment_head: bool = False):
        """Teacher forcing, as RNNsearch.forward; the attention is None."""
        if alignment_head:
            raise ValueError("this model has no alignment head (model.alignment_head)")
        enc = self.encode(src, src_mask)
        context = cast(torch.Tensor, enc.context)  # c (B, n)
        y_emb = self.drop_emb(self.tgt_emb(tgt_in))  # E y_{i-1} (B, T, m)
        x_proj = self.decoder.W(y_emb) + self.C(context).unsqueeze(1)  # W E y_{i-1} + b + C c (B, T, 3n)
        read, _, _ = _teacher_loop(self, enc.state, x_proj, self.teacher_step or self.time_step, False)
        c_term = self.C_o(context).unsqueeze(1).expand(-1, read.size(1), -1)  # C_o c, the same every step
        real = tgt_in != PAD if packed else None
        if real is not None:
            read, y_emb, c_term = read[real], y_emb[real], c_term[real]
        logits = self.W_o(self.deep_output(read, y_emb, c_term))
        return (F.log_softmax(at_least_fp32(logits), -1) if log_probs else logits), None

    def time_step(self, x_i: torch.Tensor, s: torch.Tensor, recurrent: Recurrent) -> tuple[torch.Tensor]:
        """One teacher-forced step: s_i from x_i = W E y_{i-1} + b + C c (all hoisted)."""
        return (self.decoder.cell(x_i, s, recurrent),)

    def context(self, enc: Encoded, s_prev: torch.Tensor) -> tuple[torch.Tensor, None]:
        """c, the same at every step, and no attention."""
        return cast(torch.Tensor, enc.context), None


Model = Union[RNNsearch, RNNencdec]


def _teacher_loop(model: Model, s: torch.Tensor, x_proj: torch.Tensor, step: Callable[..., tuple],
                  keep_new: bool) -> tuple[torch.Tensor, Optional[torch.Tensor], list[torch.Tensor]]:
    """s_i = step(x_i, s_{i-1}, recurrent)[0] for the T steps of x_proj (B, T, 3n), from s_0 = s.
    Returns the states the deep output reads (B, T, n) (s_{i-1}, or s_i with readout "new"),
    s_1 .. s_T (keep_new, else None) and the rest of what each step returned, stacked along T."""
    drop = state_mask(s, model.dec_state_dropout if model.training else 0.0)  # dropout_dec_state
    recurrent = model.decoder.recurrent()  # U split once, outside the loop
    read, new, extras = [], [], []
    # unbind, not x_proj[:, i]: the backward of T selects would zero-fill T full copies
    for x_i in x_proj.unbind(1):
        if drop is not None:
            s = s * drop
        s_new, *more = step(x_i, s, recurrent)
        read.append(s if model.cfg.readout == "prev" else s_new)
        if keep_new:
            new.append(s_new)
        extras.append(more)
        s = s_new
    new_states = torch.stack(new, 1) if keep_new else None
    return torch.stack(read, 1), new_states, [torch.stack(column, 1) for column in zip(*extras)]


def _init_(model: Model, cfg: ModelConfig) -> None:
    """Every weight initialised as ``cfg.init`` says (nn/gru.py), <pad> embedding rows zero."""
    init_weights_(model, cfg.init, cfg.init_scale)
    if model.align_head is not None:
        model.align_head.init_refiner_()
    with torch.no_grad():
        model.src_emb.weight[PAD].zero_()
        model.tgt_emb.weight[PAD].zero_()


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Model:
    """A freshly initialised `RNNsearch` or `RNNencdec` (``cfg.arch``), initialised as ``cfg.init``
    says (default "uniform", U(±init_scale); "paper": Appendix B), for vocabularies of the given
    sizes (special tokens included)."""
    cls = RNNsearch if cfg.arch == "rnnsearch" else RNNencdec
    return cls(cfg, src_vocab, tgt_vocab)
