"""The decoder and deep output of Appendix A.2.2, shared by RNNsearch and RNNencdec (nn/model.py):

    s_i = GRU(s_{i-1}, [E y_{i-1}; c_i])                its input side W E y_{i-1} + C c_i
    t̃_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i        t_i = max(t̃_{i,2k-1}, t̃_{i,2k})
    p(y_i | y_<i, x) = softmax(W_o t_i)                  (nn/output.py)

`Seq2Seq` runs them, teacher-forced over a whole target sentence (``forward``) or one step at a
time (``step``, what beam search calls); how c_i is made from the source is the subclass's.
`Encoded` is what the encoder leaves for the decoder, with the row operations beam search needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import nn

from rnnsearch.config import ModelConfig
from rnnsearch.nn.alignment_head import AlignmentHead, module_names, saved_names
from rnnsearch.nn.attention import at_least_fp32
from rnnsearch.nn.gru import GRU, init_weights_
from rnnsearch.nn.output import LinearOutput, OutputLayer, Rows

# The ids every tokeniser reserves (engine/data/vocab.py builds its vocabularies around them), so
# the model never needs to know which tokeniser it is fed.
PAD, UNK, BOS, EOS = 0, 1, 2, 3



@dataclass
class Encoded:
    """What the decoder needs from the source, computed once per sentence.

    annotations (B, S, ctx)   h_j (RNNsearch) — None for RNNencdec
    keys        (B, S, ·)     U_a h_j + b_a, or W_k h_j — None for RNNencdec
    context     (B, ctx)      the fixed c (RNNencdec) — None for RNNsearch
    src_mask    (B, S)        True on real source words
    state       (B, n)        s_0
    """

    annotations: Optional[torch.Tensor]
    keys: Optional[torch.Tensor]
    context: Optional[torch.Tensor]
    src_mask: torch.Tensor
    state: torch.Tensor

    def index_select(self, index: torch.Tensor) -> Encoded:
        """Rows `index` of every tensor (to expand sentences into beams)."""
        pick = lambda t: None if t is None else t.index_select(0, index)  # noqa: E731
        return Encoded(pick(self.annotations), pick(self.keys), pick(self.context),
                       self.src_mask.index_select(0, index), self.state.index_select(0, index))

    def cat(self, other: Encoded) -> Encoded:
        """Rows of self, then rows of other; the shorter source side padded (masked out) to the longer."""
        width = max(self.src_mask.size(1), other.src_mask.size(1))

        def join(a, b, along_source):
            if a is None:
                return None
            if along_source:
                a, b = _pad_source(a, width), _pad_source(b, width)
            return torch.cat([a, b])

        return Encoded(join(self.annotations, other.annotations, True), join(self.keys, other.keys, True),
                       join(self.context, other.context, False), join(self.src_mask, other.src_mask, True),
                       join(self.state, other.state, False))


def _pad_source(t: torch.Tensor, width: int) -> torch.Tensor:
    """(B, S, ...) -> (B, width, ...) with zeros (False for a mask) after position S."""
    if t.size(1) == width:
        return t
    return torch.cat([t, t.new_zeros(t.size(0), width - t.size(1), *t.shape[2:])], 1)


class Seq2Seq(nn.Module, ABC):
    """The decoder and deep output both models share. ``forward`` is teacher forcing; ``step``
    decodes. A subclass builds its encoder and says how c_i is made, per decoding step
    (`context_terms`) and over a teacher-forced sentence (`_recur`, `_context_out`)."""

    @property
    @abstractmethod
    def context_size(self) -> int:
        """ctx, the width of c_i."""

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        m, n, maxout, ctx = cfg.emb, cfg.hidden, cfg.maxout, self.context_size
        self.src_emb = nn.Embedding(src_vocab, m, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(tgt_vocab, m, padding_idx=PAD)
        self._build_encoder()
        # Decoder GRU on [E y_{i-1}; c_i]: W (in the GRU) sees E y_{i-1}, C sees c_i.
        self.decoder = GRU(m, n, cfg.gru)
        self.C = nn.Linear(ctx, 3 * n, bias=False)
        # Deep output (Appendix A.2.2): t̃_i = U_o s + V_o E y_{i-1} + C_o c_i, maxout, W_o.
        self.U_o = nn.Linear(n, 2 * maxout)
        self.V_o = nn.Linear(m, 2 * maxout, bias=False)
        self.C_o = nn.Linear(ctx, 2 * maxout, bias=False)
        self.W_o: OutputLayer = LinearOutput(maxout, tgt_vocab)
        self.align_head: Optional[AlignmentHead] = None  # β_i (nn/alignment_head.py); None: the paper's
        if cfg.alignment_head != "none":
            self.align_head = AlignmentHead(cfg.alignment_head, cfg.score, n, m, ctx, cfg.align, cfg.gru)
            self.register_state_dict_post_hook(saved_names)  # its keys as models trained before saved them
            self.register_load_state_dict_pre_hook(module_names)
        self.drop_emb = nn.Dropout(cfg.dropout_emb)
        self.drop_hidden = nn.Dropout(cfg.dropout_hidden)
        self.drop_readout = nn.Dropout(cfg.dropout_readout)
        self.set_dropout(True)
        self._compiled_step: Optional[Callable[..., Any]] = None  # compile_step() sets it (train.compile)
        init_weights_(self, cfg.init, cfg.init_scale)
        if self.align_head is not None:
            self.align_head.init_refiner_()
        with torch.no_grad():  # keep <pad> rows zero after initialisation
            self.src_emb.weight[PAD].zero_()
            self.tgt_emb.weight[PAD].zero_()

    def set_dropout(self, on: bool) -> None:
        """Every dropout of the model at its configured rate (on) or at 0 (off); the trainer keeps
        them off for the first ``train.dropout_start`` steps ("late dropout", Liu et al. 2023)."""
        c = self.cfg
        self.dropout_on = on
        self.drop_emb.p, self.drop_hidden.p, self.drop_readout.p = (
            (c.dropout_emb, c.dropout_hidden, c.dropout_readout) if on else (0.0, 0.0, 0.0))
        self.state_dropout = c.dropout_state if on else 0.0
        self.dec_state_dropout = c.dropout_dec_state if on else 0.0

    # -- what RNNsearch and RNNencdec each provide --------------------------------
    @abstractmethod
    def _build_encoder(self) -> None:
        """The encoder's modules (and the alignment model's, where c_i comes by attention)."""

    @abstractmethod
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        """What the decoder needs from the source sentences `src` (B, S), computed once."""

    @abstractmethod
    def context_terms(self, enc: Encoded, state: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """C c_i (B, 3n), C_o c_i (B, 2l) and α_i (B, S) or None, from s_{i-1}. `enc` may hold one
        row per sentence where `state` holds K consecutive rows per sentence (beam search's
        hypotheses): the K share their sentence's one copy of the encoding, never copied K times."""

    @abstractmethod
    def _recur(self, enc: Encoded, x_proj: torch.Tensor, keep_new: bool
               ) -> tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor, Optional[torch.Tensor]]:
        """The teacher-forced loop over x_proj (B, T, 3n): the states the deep output reads (B, T, n),
        s_1 .. s_T (with keep_new, else None), c_i of every step (B, T, ctx) and α (B, T, S) or None."""

    @abstractmethod
    def _context_out(self, enc: Encoded, contexts: torch.Tensor,
                     real: Optional[torch.Tensor]) -> torch.Tensor:
        """C_o c_i of every step (B, T, 2l), or of the True positions of `real` (B, T) only (N, 2l)."""

    _time_step: Callable[..., tuple[torch.Tensor, ...]]  # one teacher-forced step (compile_step)

    # -- the decoder -------------------------------------------------------------
    def readout(self, state: torch.Tensor, y_emb: torch.Tensor, context_term: torch.Tensor,
                output: Optional[Rows] = None) -> torch.Tensor:
        """Logits from the deep output, given C_o c_i; works on (B, ·) or (B, T, ·) alike.
        `output`: W_o's rows of a shortlist (``W_o.rows(ids)``), logits over those ids only."""
        t = self.U_o(state) + self.V_o(y_emb) + context_term  # t̃_i = U_o s + V_o E y_{i-1} + C_o c_i, 2l wide
        # maxout over adjacent pairs -> l; max of the two strided halves is 2.4x amax over pairs on a CPU
        t = self.drop_readout(torch.maximum(t[..., 0::2], t[..., 1::2]))
        return self.W_o.logits(t, output)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, log_probs: bool = True,
                packed: bool = False, alignment_head: bool = False):
        """Teacher forcing.

        src, src_mask (B, S); tgt_in (B, T) = <s> y_1 .. y_{T-1}.
        Returns log p(y_i | y_<i, x) (B, T, V) — or, with log_probs=False, the unnormalised
        scores the training loss consumes — and attention α (B, T, S) (None for RNNencdec).
        packed=True: the output layer runs on real target positions only and returns (N, V)
        for the N non-<pad> entries of tgt_in, in row-major order (training skips the padding).
        alignment_head=True (a model with one): a third value, the head's β (B, T, S), row i for
        the target token i; the </s> row is zero (no state has read it).
        """
        return self._decode(self.encode(src, src_mask), tgt_in, log_probs=log_probs, packed=packed,
                            head=alignment_head)

    def logits(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor):
        """forward(..., log_probs=False)."""
        return self(src, src_mask, tgt_in, log_probs=False)

    def _decode(self, enc: Encoded, tgt_in: torch.Tensor, log_probs: bool, packed: bool = False,
                head: bool = False):
        y_emb = self.drop_emb(self.tgt_emb(tgt_in))
        # W E y_{i-1} + b for every step in one product, hoisted out of the loop
        read, new_states, contexts, attention = self._recur(enc, self.decoder.W(y_emb), head)
        real = tgt_in != PAD if packed else None  # the output layer is most of the cost: skip the padding
        states, emb = (read, y_emb) if real is None else (read[real], y_emb[real])
        # Readout and output layer for all steps at once, after the loop.
        logits = self.readout(states, emb, self._context_out(enc, contexts, real))
        out = F.log_softmax(at_least_fp32(logits), -1) if log_probs else logits
        if not head:
            return out, attention
        if self.align_head is None or enc.annotations is None or new_states is None:
            raise ValueError("this model has no alignment head (model.alignment_head)")
        return out, attention, self.align_head(enc.annotations, enc.src_mask, new_states, y_emb,
                                               tgt_in != PAD)

    def _loop(self, s: torch.Tensor, x_proj: torch.Tensor, step: Callable[..., tuple], keep_new: bool
              ) -> tuple[torch.Tensor, Optional[torch.Tensor], list[torch.Tensor]]:
        """s_i = step(x_i, s_{i-1}, recurrent)[0] for the T steps of x_proj (B, T, 3n), from s_0 = s.
        Returns the states the deep output reads (B, T, n), s_1 .. s_T (keep_new) and the rest of
        what each step returned, stacked along T."""
        drop = None  # dropout_dec_state: one mask per sentence on the decoder's carried state
        if self.training and self.dec_state_dropout > 0:
            keep = 1.0 - self.dec_state_dropout
            drop = torch.bernoulli(s.new_full(s.shape, keep)) / keep
        recurrent = self.decoder.recurrent()  # U split once, outside the loop
        read, new, extras = [], [], []
        # unbind, not x_proj[:, i]: the backward of T selects would zero-fill T full copies
        for x_i in x_proj.unbind(1):
            if drop is not None:
                s = s * drop
            s_new, *more = step(x_i, s, recurrent)
            read.append(s if self.cfg.readout == "prev" else s_new)
            if keep_new:
                new.append(s_new)
            extras.append(more)
            s = s_new
        new_states = torch.stack(new, 1) if keep_new else None
        return torch.stack(read, 1), new_states, [torch.stack(column, 1) for column in zip(*extras)]

    def compile_step(self, **options) -> None:
        """Run the teacher-forced time step through ``torch.compile`` (``train.compile``): its
        attention and GRU elementwise work fuse into fewer kernels, which matters where the
        loop is launch-bound (GPUs). Shapes are dynamic, so batches of every size and length
        share one compiled graph. `options` go to torch.compile (e.g. backend="aot_eager")."""
        self._compiled_step = torch.compile(self._time_step, dynamic=True, **options)

    def step(self, enc: Encoded, state: torch.Tensor, y_prev: torch.Tensor,
             rows: Optional[torch.Tensor] = None, output: Optional[Rows] = None):
        """One decoding step: y_{i-1} (B,), s_{i-1} (B, n) -> log p(y_i) (B, V), s_i, α_i (B, S) or None.

        rows: the output layer (most of a step's cost) only for these rows; log p is then (len(rows), V).
        Beam search passes the hypotheses still growing: a finished one's next word is fixed.
        output: ``W_o.rows(ids)``, a shortlist's; log p is then over those V' ids, (·, V').
        `enc` may have one row per sentence for K consecutive rows of state (context_terms)."""
        y_emb = self.tgt_emb(y_prev)
        gru_term, out_term, alpha = self.context_terms(enc, state)
        x_proj = self.decoder.W(y_emb) + gru_term
        s_new = self.decoder.cell(x_proj, state)
        read = state if self.cfg.readout == "prev" else s_new
        if rows is not None:
            read, y_emb, out_term = (t.index_select(0, rows) for t in (read, y_emb, out_term))
        logits = at_least_fp32(self.readout(read, y_emb, out_term, output))
        if logits.requires_grad:
            return F.log_softmax(logits, -1), s_new, alpha
        # in place when no gradient needs the logits: the same numbers, without a second (B, V)
        # tensor a step, whose fresh pages cost more than the softmax (docs/benchmarks.md)
        return torch.log_softmax(logits, -1, out=logits), s_new, alpha

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
