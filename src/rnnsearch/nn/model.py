"""RNNsearch (Bahdanau et al. 2014) and the RNNencdec baseline (Cho et al. 2014).

Both models share one decoder loop and one deep-output layer; they differ only in
what :meth:`encode` leaves for the decoder and in :meth:`attend`:

* RNNsearch: a bidirectional encoder keeps every annotation h_j = [→h_j; ←h_j] and
  each decoder step computes its own context c_i by attention.
* RNNencdec: a unidirectional encoder squeezes the sentence into one vector
  c = tanh(V h_Tx), given unchanged to every decoder step (attention is None).

Shapes: batch B, source length S, target length T, hidden n, embedding m, maxout l.

The context c_i = Σ_j α_ij h_j enters the decoder only through two matrix products, C c_i (the
GRU's input side) and C_o c_i (the deep output). Both are linear, so

    C c_i = Σ_j α_ij (C h_j)        C_o c_i = Σ_j α_ij (C_o h_j)

and with ``precompute_context`` set RNNsearch takes C h_j and C_o h_j once per sentence
(`Encoded.values`, beside the keys U_a h_j), each step then a weighted sum over the S source
positions instead of two products with the 2n-wide c_i: the same numbers up to rounding (tested,
values and gradients) at a fraction of the multiply-adds. It is off by default because on a CPU
it measured slower (docs/benchmarks.md, "Context values"): the values are 3n+2l wide per source
word and per beam row, so each step reads far more memory than the shared C and C_o weights.

**The alignment head** (``model.alignment_head``, off by default; not in the paper). α_i is scored
from s_{i-1}, before the decoder has read y_{i-1}, let alone y_i: the attention has to place its
weight before it knows which word it will emit. The first state to have read y_i is s_{i+1}
(s_i = f(s_{i-1}, y_{i-1}, c_i)). The head is a second alignment model of the same score function,

    β_i = softmax_j a'(s_{i+1}, h_j)        for every target word y_i

computed after the teacher-forced loop from the states it already made (the state after the
</s> step has read the last word, so every word has its row). It feeds nothing into the
translation; train.guided_alignment teaches it a word aligner's links (engine/train/guided.py) while the
attention stays the paper's, unsupervised, and links are read from β when the model has it.

s_{i+1} has read y_1 .. y_i but none of the words after y_i, which a word aligner sees (which of two
"the"s is this one?). With ``model.alignment_head_future`` the head's query is [s_{i+1}; r_i], r_i
the state of a backward GRU over the target embeddings that has read y_{T-1} .. y_i: the whole
target sentence, as Garg et al. (2019) let their alignment layer see it. It reads the embeddings
detached: the head's loss trains the backward GRU, not the words the translation uses. Links come
from a forced pass over a finished translation, so the future is always there to read.

With ``model.alignment_head_refine`` the head's scores of a whole sentence pair take a second look
(nn/attention.py ScoreRefiner): a small convolution over the (target, source) grid of its row and
column softmaxes adds what a word aligner sees around a link, its diagonal neighbours and whether
the source word picks this target word back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional, cast

import torch
import torch.nn.functional as F
from torch import nn

from rnnsearch.config import ModelConfig
from rnnsearch.nn.attention import Attention, ScoreRefiner, at_least_fp32, masked_softmax
from rnnsearch.nn.gru import GRU, can_fuse, fused_run, init_weights_, run_bidirectional

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
    values      (B, S, 3n+2l) [C h_j; C_o h_j] (RNNsearch): what α_i weighs, each step
    """

    annotations: Optional[torch.Tensor]
    keys: Optional[torch.Tensor]
    context: Optional[torch.Tensor]
    src_mask: torch.Tensor
    state: torch.Tensor
    values: Optional[torch.Tensor] = None

    def index_select(self, index: torch.Tensor) -> Encoded:
        """Rows `index` of every tensor (to expand sentences into beams)."""
        pick = lambda t: None if t is None else t.index_select(0, index)  # noqa: E731
        # src_mask and state are never None, so neither is what pick makes of them
        return Encoded(pick(self.annotations), pick(self.keys), pick(self.context),
                       cast(torch.Tensor, pick(self.src_mask)), cast(torch.Tensor, pick(self.state)),
                       pick(self.values))

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
                       join(self.state, other.state, False), join(self.values, other.values, True))


def _pad_source(t: torch.Tensor, width: int) -> torch.Tensor:
    """(B, S, ...) -> (B, width, ...) with zeros (False for a mask) after position S."""
    if t.size(1) == width:
        return t
    return torch.cat([t, t.new_zeros(t.size(0), width - t.size(1), *t.shape[2:])], 1)


class RNNsearch(nn.Module):
    """The paper's model (Appendix A). ``forward`` is teacher forcing; ``step`` decodes."""

    precompute_context = False  # C h_j, C_o h_j once per sentence (module docstring); off: C c_i, C_o c_i

    def __init__(self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int):
        super().__init__()
        self.cfg = cfg
        m, n, maxout = cfg.emb, cfg.hidden, cfg.maxout
        ctx = self.context_size
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
        self.W_o = nn.Linear(maxout, tgt_vocab)
        # β_i from s_{i+1} (module docstring); None: the paper's model
        self.align_head = None
        self.align_future = GRU(m, n, cfg.gru) if cfg.alignment_head_future else None  # r_i (docstring)
        if cfg.alignment_head:
            self.align_head = Attention(cfg.score, 2 * n if self.align_future else n, ctx, cfg.align)
        self.align_refine = ScoreRefiner() if cfg.alignment_head_refine else None  # β's second look
        self.drop_emb = nn.Dropout(cfg.dropout_emb)
        self.drop_hidden = nn.Dropout(cfg.dropout_hidden)
        self.drop_readout = nn.Dropout(cfg.dropout_readout)
        self.set_dropout(True)
        # compile_step() sets it (train.compile)
        self._compiled_step: Optional[Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]] = None
        init_weights_(self, cfg.init, cfg.init_scale)
        if self.align_refine is not None:
            self.align_refine.reset_parameters()  # starts as the head without it (its docstring)
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

    # -- encoder ---------------------------------------------------------------
    @property
    def context_size(self) -> int:
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
        values = self.context_values(annotations) if self.precompute_context else None
        return Encoded(annotations, keys, None, src_mask, state, values)

    def context_values(self, annotations: torch.Tensor) -> torch.Tensor:
        """[C h_j; C_o h_j] (B, S, 3n+2l): what α_i weighs at every step, once per sentence."""
        return torch.cat([self.C(annotations), self.C_o(annotations)], -1)

    def attend(self, enc: Encoded, state: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """c_i and α_i from s_{i-1}: (B, ctx), (B, S)."""
        return self.attention(state, enc.keys, enc.annotations, enc.src_mask)

    def context_terms(self, enc: Encoded, state: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """C c_i (B, 3n), C_o c_i (B, 2l) and α_i (B, S) from s_{i-1}: from c_i, or with
        Encoded.values as α_i's weighted sums of C h_j, C_o h_j (module docstring).

        `enc` may hold one row per sentence where `state` holds K consecutive rows per sentence
        (beam search's hypotheses): the K states then attend to their sentence's one copy of
        the annotations, as (sentence, hypothesis) batches, and nothing is copied K times."""
        group = state.size(0) // enc.src_mask.size(0)
        if group > 1:
            return self._grouped_context_terms(enc, state, group)
        if enc.values is None:
            c, alpha = self.attend(enc, state)
            return self.C(c), self.C_o(c), alpha
        assert enc.keys is not None  # RNNsearch's encode sets it
        alpha = self.attention.weights(state, enc.keys, enc.src_mask, enc.values.dtype)
        terms = torch.bmm(alpha.unsqueeze(1), enc.values).squeeze(1)
        return terms[:, :self.C.out_features], terms[:, self.C.out_features:], alpha

    def _grouped_context_terms(self, enc: Encoded, state: torch.Tensor, group: int
                               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """context_terms for `group` consecutive states per row of `enc`."""
        assert enc.keys is not None and enc.annotations is not None  # RNNsearch's encode sets them
        queries = state.view(enc.src_mask.size(0), group, state.size(1))  # (sentences, K, n)
        memory = enc.annotations if enc.values is None else enc.values
        alpha = self.attention.weights_all(queries, enc.keys, enc.src_mask).to(memory.dtype)  # (·, K, S)
        mixed = torch.bmm(alpha, memory).flatten(0, 1)  # c_i per hypothesis, or [C c_i; C_o c_i]
        alpha = alpha.flatten(0, 1)
        if enc.values is None:
            return self.C(mixed), self.C_o(mixed), alpha
        return mixed[:, :self.C.out_features], mixed[:, self.C.out_features:], alpha

    # -- decoder ---------------------------------------------------------------
    def readout(self, state: torch.Tensor, y_emb: torch.Tensor, context_term: torch.Tensor,
                output: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """Logits from the deep output, given C_o c_i; works on (B, ·) or (B, T, ·) alike.
        `output`: W_o's rows and biases of a shortlist (`output_layer`), logits over it only."""
        t = self.U_o(state) + self.V_o(y_emb) + context_term  # t̃_i = U_o s + V_o E y_{i-1} + C_o c_i, 2l wide
        # maxout over adjacent pairs -> l; max of the two strided halves is 2.4x amax over pairs on a CPU
        t = self.drop_readout(torch.maximum(t[..., 0::2], t[..., 1::2]))
        return self.W_o(t) if output is None else F.linear(t, *output)

    def output_layer(self, vocab: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """W_o's rows and biases of the target ids `vocab` (a shortlist, engine/decode/shortlist.py)."""
        rows = getattr(self.W_o, "rows", None)  # int8 output layer (engine/decode/quantize.py)
        if callable(rows):
            return rows(vocab)
        return self.W_o.weight.index_select(0, vocab), self.W_o.bias.index_select(0, vocab)

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
        # Hoisted out of the loop: W E y_{i-1} + b for every step in one product, and
        # for RNNencdec the constant C c as well.
        x_proj = self.decoder.W(y_emb)
        if enc.context is not None:
            x_proj = x_proj + self.C(enc.context).unsqueeze(1)
        s, read_states, context_terms, alphas, new_states = enc.state, [], [], [], []
        drop = None  # dropout_dec_state: one mask per sentence on the decoder's carried state
        if self.training and self.dec_state_dropout > 0:
            keep = 1.0 - self.dec_state_dropout
            drop = torch.bernoulli(s.new_full(s.shape, keep)) / keep
        recurrent = self.decoder.recurrent()  # U split once, outside the loop
        # unbind, not x_proj[:, i]: the backward of T selects would zero-fill T full copies
        time_step = self._compiled_step or self._time_step
        for x_i in x_proj.unbind(1):
            if drop is not None:
                s = s * drop
            if enc.context is None:
                # RNNsearch: only RNNencdec leaves keys and annotations None
                assert enc.keys is not None and enc.annotations is not None
                memory = enc.annotations if enc.values is None else enc.values
                s_new, c_o, alpha = time_step(x_i, s, enc.keys, memory, enc.src_mask, recurrent)
                context_terms.append(c_o)
                alphas.append(alpha)
            else:
                s_new = self.decoder.cell(x_i, s, recurrent)
            read_states.append(s if self.cfg.readout == "prev" else s_new)
            if head:
                new_states.append(s_new)
            s = s_new
        states = torch.stack(read_states, 1)
        if enc.context is None:
            context_term = torch.stack(context_terms, 1)  # c_i of every step (with values: C_o c_i)
            attention = torch.stack(alphas, 1)
        else:
            context_term = self.C_o(enc.context).unsqueeze(1).expand(-1, states.size(1), -1)
            attention = None
        words = y_emb  # (B, T, m), for the alignment head
        if packed:  # the output layer is most of the cost: skip the padded positions
            real = tgt_in != PAD
            states, y_emb, context_term = states[real], y_emb[real], context_term[real]
        if enc.context is None and enc.values is None:
            context_term = self.C_o(context_term)  # C_o c_i for all steps in one product
        # Readout and output layer for all steps at once, after the loop.
        logits = self.readout(states, y_emb, context_term)
        out = F.log_softmax(at_least_fp32(logits), -1) if log_probs else logits
        if not head:
            return out, attention
        return out, attention, self._head_rows(enc, torch.stack(new_states, 1), words, tgt_in)

    def _head_rows(self, enc: Encoded, new_states: torch.Tensor, y_emb: torch.Tensor,
                   tgt_in: torch.Tensor) -> torch.Tensor:
        """β (B, T, S): row i from the state after step i+1, which has read y_i (module docstring),
        and with align_future from r_i as well; the last row (</s>) zero."""
        if self.align_head is None or enc.annotations is None:
            raise ValueError("this model has no alignment head (model.alignment_head)")
        query = new_states[:, 1:]
        if self.align_future is not None:  # r_i: y_{T-1} .. y_i read right to left (y_emb[:, 0] is <s>)
            # detached: the head reads the target embeddings but leaves them to the translation loss
            gru, words = self.align_future, y_emb[:, 1:].detach()
            start = words.new_zeros(words.size(0), gru.hidden)
            future, _ = gru.run(gru.W(words), tgt_in[:, 1:] != PAD, start, reverse=True)
            query = torch.cat([query, future], -1)
        keys = self.align_head.keys(enc.annotations)
        e = self.align_head.scores_all(query, keys)
        if self.align_refine is not None:
            e = self.align_refine(e, enc.src_mask, tgt_in[:, 1:] != PAD)
        rows = masked_softmax(e, enc.src_mask.unsqueeze(1))
        return torch.cat([rows, rows.new_zeros(rows.size(0), 1, rows.size(2))], 1)

    def _time_step(self, x_i: torch.Tensor, s: torch.Tensor, keys: torch.Tensor, memory: torch.Tensor,
                   src_mask: torch.Tensor, recurrent: tuple[torch.Tensor, Optional[torch.Tensor]]
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One teacher-forced step of RNNsearch: c_i and α_i from s_{i-1}, then s_i from
        [E y_{i-1}; c_i] (x_i = W E y_{i-1} + b, hoisted). Returns s_i, c_i, α_i. `memory` is
        the annotations, or with precompute_context the values: C c_i and C_o c_i are then α_i's
        weighted sums of them, and C_o c_i is returned in place of c_i."""
        if not self.precompute_context:
            c, alpha = self.attention(s, keys, memory, src_mask)
            return self.decoder.cell(x_i + self.C(c), s, recurrent), c, alpha
        alpha = self.attention.weights(s, keys, src_mask, memory.dtype)
        terms = torch.bmm(alpha.unsqueeze(1), memory).squeeze(1)
        gru_term, out_term = terms[:, :self.C.out_features], terms[:, self.C.out_features:]
        return self.decoder.cell(x_i + gru_term, s, recurrent), out_term, alpha

    def compile_step(self, **options) -> None:
        """Run the teacher-forced time step through ``torch.compile`` (``train.compile``): its
        attention and GRU elementwise work fuse into fewer kernels, which matters where the
        loop is launch-bound (GPUs). Shapes are dynamic, so batches of every size and length
        share one compiled graph. `options` go to torch.compile (e.g. backend="aot_eager")."""
        self._compiled_step = torch.compile(self._time_step, dynamic=True, **options)

    def step(self, enc: Encoded, state: torch.Tensor, y_prev: torch.Tensor,
             rows: Optional[torch.Tensor] = None, output: Optional[tuple[torch.Tensor, torch.Tensor]] = None):
        """One decoding step: y_{i-1} (B,), s_{i-1} (B, n) -> log p(y_i) (B, V), s_i, α_i (B, S) or None.

        rows: the output layer (most of a step's cost) only for these rows; log p is then (len(rows), V).
        Beam search passes the hypotheses still growing: a finished one's next word is fixed.
        output: `output_layer(vocab)`, a shortlist's; log p is then over those V' ids, (·, V').
        `enc` may have one row per sentence for K consecutive rows of state (context_terms)."""
        y_emb = self.tgt_emb(y_prev)
        gru_term, out_term, alpha = self.context_terms(enc, state)
        x_proj = self.decoder.W(y_emb) + gru_term
        s_new = self.decoder.cell(x_proj, state)
        read = state if self.cfg.readout == "prev" else s_new
        if rows is not None:
            read, y_emb, out_term = (t.index_select(0, rows) for t in (read, y_emb, out_term))
        logits = self.readout(read, y_emb, out_term, output)
        return F.log_softmax(at_least_fp32(logits), -1), s_new, alpha

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class RNNencdec(RNNsearch):
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

    def attend(self, enc: Encoded, state: torch.Tensor):
        return enc.context, None

    def context_terms(self, enc: Encoded, state: torch.Tensor):
        """C c and C_o c of the one fixed context, and no attention (`state` may have K rows
        per row of `enc`, as in RNNsearch.context_terms)."""
        assert enc.context is not None
        context = enc.context.repeat_interleave(state.size(0) // enc.context.size(0), 0)
        return self.C(context), self.C_o(context), None


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> RNNsearch:
    """A freshly initialised `RNNsearch` or `RNNencdec` (``cfg.arch``), initialised as ``cfg.init``
    says (default "uniform", U(±init_scale); "paper": Appendix B), for vocabularies of the given
    sizes (special tokens included)."""
    cls = RNNsearch if cfg.arch == "rnnsearch" else RNNencdec
    return cls(cfg, src_vocab, tgt_vocab)
