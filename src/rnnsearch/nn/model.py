"""Appendix A of Bahdanau et al. (2014): RNNsearch, and the RNNencdec baseline (Cho et al. 2014).

Shapes: batch B, source length S, target length T, hidden n, embedding m, maxout l.

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
    p(y_i | y_<i, x) = softmax(W_o t_i)                                  (nn/output.py)

`Seq2Seq` is the decoder and deep output; `RNNsearch` and `RNNencdec` add their encoder and their
c_i. The optional alignment head (``model.alignment_head``, not in the paper) is
nn/alignment_head.py, run after the teacher-forced loop from the states it made.
"""

from __future__ import annotations

from typing import Optional, cast

import torch
from torch import nn

from rnnsearch.config import ModelConfig
from rnnsearch.nn.attention import Attention
from rnnsearch.nn.decoder import BOS, EOS, PAD, UNK, Encoded, Seq2Seq
from rnnsearch.nn.gru import GRU, can_fuse, fused_run, run_bidirectional

__all__ = ["PAD", "UNK", "BOS", "EOS", "Encoded", "Seq2Seq", "RNNsearch", "RNNencdec", "build_model"]


class RNNsearch(Seq2Seq):
    """The paper's model (Appendix A): c_i by attention over the annotations, at every step."""

    @property
    def context_size(self) -> int:  # h_j = [→h_j; ←h_j]
        return 2 * self.cfg.hidden

    def _build_encoder(self) -> None:
        cfg = self.cfg
        self.enc_fwd = GRU(cfg.emb, cfg.hidden, cfg.gru)
        self.enc_bwd = GRU(cfg.emb, cfg.hidden, cfg.gru)
        init_size = 2 * cfg.hidden if cfg.init_state == "mean" else cfg.hidden
        self.W_s = nn.Linear(init_size, cfg.hidden)
        self.attention = Attention(cfg.score, cfg.hidden, 2 * cfg.hidden, cfg.align)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        """Annotations h_j = [→h_j; ←h_j] (Appendix A.2.1) and s_0 = tanh(W_s ←h_1)."""
        x = self.drop_emb(self.src_emb(src))  # E x_j, shared by both directions
        fwd, bwd = run_bidirectional(self.enc_fwd, self.enc_bwd, x, src_mask, self.state_dropout)
        annotations = torch.cat([fwd, bwd], -1)
        if self.cfg.init_state == "mean":  # dl4mt/Nematus: mean of the annotations
            keep = src_mask.unsqueeze(-1).to(annotations.dtype)
            summary = (annotations * keep).sum(1) / keep.sum(1)
        else:
            summary = bwd[:, 0]  # ←h_1: the backward pass has read the whole sentence
        state = torch.tanh(self.W_s(summary))
        annotations = self.drop_hidden(annotations)
        keys = self.attention.keys(annotations)  # U_a h_j does not depend on i: once per sentence
        return Encoded(annotations, keys, None, src_mask, state)

    def attend(self, enc: Encoded, state: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """c_i and α_i from s_{i-1}: (B, ctx), (B, S)."""
        return self.attention(state, *_memory(enc), enc.src_mask)

    def context_terms(self, enc: Encoded, state: torch.Tensor):
        group = state.size(0) // enc.src_mask.size(0)
        if group == 1:
            c, alpha = self.attend(enc, state)
            return self.C(c), self.C_o(c), alpha
        keys, annotations = _memory(enc)
        queries = state.view(enc.src_mask.size(0), group, state.size(1))  # (sentences, K, n)
        weights = self.attention.weights_all(queries, keys, enc.src_mask).to(annotations.dtype)  # (·, K, S)
        c = torch.bmm(weights, annotations).flatten(0, 1)  # c_i per hypothesis
        return self.C(c), self.C_o(c), weights.flatten(0, 1)

    def _time_step(self, x_i: torch.Tensor, s: torch.Tensor, keys: torch.Tensor,
                   annotations: torch.Tensor, src_mask: torch.Tensor,
                   recurrent: tuple[torch.Tensor, Optional[torch.Tensor]]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One teacher-forced step: c_i and α_i from s_{i-1}, then s_i from [E y_{i-1}; c_i]
        (x_i = W E y_{i-1} + b, hoisted). Returns s_i, c_i, α_i."""
        c, alpha = self.attention(s, keys, annotations, src_mask)
        return self.decoder.cell(x_i + self.C(c), s, recurrent), c, alpha

    def _recur(self, enc: Encoded, x_proj: torch.Tensor, keep_new: bool):
        keys, annotations = _memory(enc)
        time_step = self._compiled_step or self._time_step
        read, new_states, (contexts, attention) = self._loop(
            enc.state, x_proj, lambda x_i, s, rec: time_step(x_i, s, keys, annotations, enc.src_mask, rec),
            keep_new)
        return read, new_states, contexts, attention

    def _context_out(self, enc: Encoded, contexts: torch.Tensor,
                     real: Optional[torch.Tensor]) -> torch.Tensor:
        return self.C_o(contexts if real is None else contexts[real])  # for all steps in one product


def _memory(enc: Encoded) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and annotations of an RNNsearch encoding."""
    if enc.keys is None or enc.annotations is None:
        raise ValueError("an RNNencdec encoding has no annotations to attend to")
    return enc.keys, enc.annotations


class RNNencdec(Seq2Seq):
    """Cho et al. (2014) encoder–decoder: one fixed context vector for every step."""

    @property
    def context_size(self) -> int:
        return self.cfg.hidden

    def _build_encoder(self) -> None:
        cfg = self.cfg
        self.enc_fwd = GRU(cfg.emb, cfg.hidden, cfg.gru)
        self.V = nn.Linear(cfg.hidden, cfg.hidden)  # c = tanh(V h_Tx)
        self.V_s = nn.Linear(cfg.hidden, cfg.hidden)  # s_0 = tanh(V' c)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> Encoded:
        x = self.drop_emb(self.src_emb(src))
        if can_fuse(self.enc_fwd, src_mask, self.state_dropout):
            _, (last,) = fused_run([self.enc_fwd], x, src_mask)
        else:
            h0 = x.new_zeros(src.size(0), self.cfg.hidden)
            # h_Tx: padded steps carry the state, so the final state is the last real word's
            _, last = self.enc_fwd.run(self.enc_fwd.W(x), src_mask, h0, state_dropout=self.state_dropout)
        context = self.drop_hidden(torch.tanh(self.V(last)))
        return Encoded(None, None, context, src_mask, torch.tanh(self.V_s(context)))

    def attend(self, enc: Encoded, state: torch.Tensor) -> tuple[torch.Tensor, None]:
        return cast(torch.Tensor, enc.context), None

    def context_terms(self, enc: Encoded, state: torch.Tensor):
        """C c and C_o c of the one fixed context, and no attention."""
        context = cast(torch.Tensor, enc.context)
        context = context.repeat_interleave(state.size(0) // context.size(0), 0)
        return self.C(context), self.C_o(context), None

    def _time_step(self, x_i: torch.Tensor, s: torch.Tensor,
                   recurrent: tuple[torch.Tensor, Optional[torch.Tensor]]) -> tuple[torch.Tensor]:
        """One teacher-forced step: s_i from x_i = W E y_{i-1} + b + C c (all hoisted)."""
        return (self.decoder.cell(x_i, s, recurrent),)

    def _recur(self, enc: Encoded, x_proj: torch.Tensor, keep_new: bool):
        context = cast(torch.Tensor, enc.context)
        x_proj = x_proj + self.C(context).unsqueeze(1)  # the constant C c, hoisted as well
        read, new_states, _ = self._loop(enc.state, x_proj, self._compiled_step or self._time_step, keep_new)
        return read, new_states, context.unsqueeze(1).expand(-1, read.size(1), -1), None

    def _context_out(self, enc: Encoded, contexts: torch.Tensor,
                     real: Optional[torch.Tensor]) -> torch.Tensor:
        term = self.C_o(cast(torch.Tensor, enc.context)).unsqueeze(1).expand(-1, contexts.size(1), -1)
        return term if real is None else term[real]  # C_o c once, the same for every step


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """A freshly initialised `RNNsearch` or `RNNencdec` (``cfg.arch``), initialised as ``cfg.init``
    says (default "uniform", U(±init_scale); "paper": Appendix B), for vocabularies of the given
    sizes (special tokens included)."""
    cls = RNNsearch if cfg.arch == "rnnsearch" else RNNencdec
    return cls(cfg, src_vocab, tgt_vocab)
