"""The product's beam search (K = 1: greedy search), batched, over a stream of sentences in flight.

It finds what nn/search.py's plain beam search finds, one sentence at a time, (tests/test_accel.py
holds their n-best lists equal), faster:

Sentences and beams are flattened into one batch of rows, K per sentence; the encoder
output (annotations and precomputed keys) stays one row per sentence, which the sentence's K
hypotheses attend to together (speedup.py's ``context_terms``), never copied K times or recomputed.

A hypothesis that emits </s> stays in its beam, frozen: from then on it can only
"extend" with <pad> at zero cost, so its score and length stop changing. That makes
the finished-hypothesis bookkeeping a mask (no Python per sentence per step), and its row
skips the output layer, the bulk of a step. A sentence whose K hypotheses have all finished
(see early_stop in nn/search.py) leaves the batch and the next sentences of the
stream take its place (in-flight batching): every step runs on a full batch, with no
tail of steps spent on the last few stragglers of a fixed batch. Candidates are ranked by
the length-normalised score  log p / len**alpha  at every step (alpha=0: raw log-prob),
so finished and growing hypotheses compete fairly. With K = 1 this is greedy search, which
takes a shorter path: a sentence leaves as soon as its one hypothesis ends, so every row in
flight is growing and nothing is ranked or reordered — each row takes its most probable word
(8% faster in int8 decoding, where the beam's bookkeeping is a larger share of a step:
docs/benchmarks.md).

Per step, each hypothesis first keeps its own K best words (all its extensions have the
same length, so that order is the order of their normalised scores); the K survivors of a
sentence are then chosen among its K x K candidates. That is exact, and all the
bookkeeping runs on (rows, K) tensors instead of (rows, vocabulary). Each row carries its
own words so far (and attention rows), reordered with the survivors at every step, so a
finished sentence's hypotheses are read off its rows with no back-pointer tracing. The top-k over
a wide vocabulary goes in two stages (:func:`top_k`).

Each sentence has its own length limit (ratio * source length + 10, where </s> is
forced), so the result for a sentence does not depend on the batch it is decoded in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from rnnsearch.config import DecodeConfig
from rnnsearch.engine.accel import speedup as fast
from rnnsearch.nn.model import BOS, EOS, PAD, Encoded
from rnnsearch.nn.search import Hypothesis, SearchOptions, search_options, trim

Rows = fast.Rows


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_mask: torch.Tensor, options: Optional[SearchOptions] = None,
                *, batch_size: Optional[int] = None, **settings: Any) -> list[list[Hypothesis]]:
    """nn/search.py's ``beam_search`` through the in-flight search: per sentence of the batch
    (src, src_mask (B, S)), its `n_best` hypotheses best first. `options`, or as keywords
    `settings` those of nn/search.py's ``search_options`` (beam=5, alpha=1.0, ...). At most
    `batch_size` sentences (default: all B) decode at once, the next joining as others finish."""
    options = search_options(options, settings)
    size = max(1, batch_size or src.size(0))
    chunks = (trim(src[i:i + size], src_mask[i:i + size]) for i in range(0, src.size(0), size))
    out: list = [None] * src.size(0)
    for k, hyps in search_stream(model, chunks, options, capacity=size):
        out[k] = hyps
    return out


@dataclass(frozen=True)
class Ranking:
    """How finished and growing hypotheses are ranked: log p(y | x) / lp(|y|) + cp (Wu et al. 2016).

    lp: |y|**alpha (``decode.length_penalty: power``, the default) or ((5 + |y|) / 6)**alpha
    (``gnmt``); alpha 0: none. cp, with ``decode.coverage`` β > 0: β Σ_j log min(Σ_i α_ij, 1) over
    the real source words — what the attention has not yet covered, a penalty."""

    alpha: float = 1.0
    gnmt: bool = False
    beta: float = 0.0

    @classmethod
    def of(cls, d: DecodeConfig) -> Ranking:
        return cls(d.alpha, d.length_penalty == "gnmt", d.coverage)

    def normalised(self, log_p: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """log p / lp(length), `length` (float) counting </s>."""
        if not self.alpha:
            return log_p
        if self.gnmt:
            return log_p / ((5 + length) / 6).pow(self.alpha)
        return log_p / length.clamp(min=1).pow(self.alpha)

    def coverage(self, covered: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """cp of each row: `covered` (rows, S) Σ_i α_ij so far, `real` (rows, S) the real words."""
        return self.beta * covered.clamp(min=1e-10, max=1.0).log().masked_fill(~real, 0.0).sum(-1)


@dataclass
class _Output:
    """The output layer over a shortlist's ids (`vocab`, ascending): its rows (speedup.py's
    ``output_rows``), where </s> is among them, and which of them are never generated
    (<s>, <pad>)."""

    vocab: torch.Tensor
    layer: Rows
    eos: int
    never: torch.Tensor

    @classmethod
    def of(cls, model, allowed: torch.Tensor) -> _Output:
        vocab = allowed.any(0).nonzero().squeeze(1)
        eos = int((vocab == EOS).nonzero()[0, 0])  # Shortlist.allowed always includes it
        never = ((vocab == BOS) | (vocab == PAD)).nonzero().squeeze(1)
        return cls(vocab, fast.output_rows(model, vocab), eos, never)


CHUNKED_TOPK_FROM = 2048  # vocabularies at least this wide take top_k's two-stage path


def top_k(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``x.topk(k, dim=1)`` (values sorted, largest first), exact, in about half the time for a
    wide row: torch's CPU topk costs twice a log-softmax over the same (rows, 8,000). The row is
    cut into chunks of about √V (:func:`_chunk_size`); the k chunks with the largest maxima hold
    the k largest values (a chunk left out has k chunks above it, each holding a value at least as
    large), so the second topk runs over k chunks, not V. Among equal values the index may differ
    from topk's."""
    rows, width = x.shape
    size = max(k, _chunk_size(width))
    if width < CHUNKED_TOPK_FROM or width < 4 * k * size:
        return x.topk(k, dim=1)
    whole = width // size
    maxima = x[:, : whole * size].view(rows, whole, size).amax(2)
    if whole * size < width:  # the last, shorter chunk
        maxima = torch.cat([maxima, x[:, whole * size:].amax(1, keepdim=True)], 1)
    chunks = maxima.topk(k, dim=1).indices  # (rows, k)
    cols = (chunks.unsqueeze(2) * size + torch.arange(size, device=x.device)).view(rows, k * size)
    if whole * size == width:
        values = x.gather(1, cols)
    else:  # the short chunk's missing tail
        values = x.gather(1, cols.clamp(max=width - 1)).masked_fill_(cols >= width, float("-inf"))
    best, at = values.topk(k, dim=1)
    return best, cols.gather(1, at)


@functools.lru_cache(maxsize=64)
def _chunk_size(width: int) -> int:
    """About √width, a divisor of width where one is near (8,000: 80), so that no chunk is short:
    one pass of maxima over the row, no gather past its end to mask."""
    root = int(width ** 0.5)
    near = [d for d in range(root * 3 // 4, root * 4 // 3 + 1) if d and width % d == 0]
    return min(near, key=lambda d: abs(d - width ** 0.5)) if near else root


def _best_words(log_p: torch.Tensor, K: int, out: Optional[_Output]):
    """Each row's K best words and their log-probabilities, and the log-probability of </s>;
    <s> and <pad> are never among them. Over a shortlist, its ids (fewer than K: -inf, <pad>)."""
    neg_inf = float("-inf")
    if out is None:
        log_p[:, BOS] = neg_inf  # never generated
        log_p[:, PAD] = neg_inf  # only as the frozen extension of a finished hypothesis
        top_lp, top_word = top_k(log_p, K)
        return top_lp, top_word, log_p[:, EOS]
    log_p[:, out.never] = neg_inf
    top_lp, top = top_k(log_p, min(K, log_p.size(1)))
    top_word = out.vocab[top]
    if top.size(1) < K:
        short = K - top.size(1)
        top_lp = torch.cat([top_lp, top_lp.new_full((top_lp.size(0), short), neg_inf)], 1)
        top_word = torch.cat([top_word, top_word.new_full((top_word.size(0), short), PAD)], 1)
    return top_lp, top_word, log_p[:, out.eos]


@torch.no_grad()
def search_stream(model, chunks: Iterable[tuple[torch.Tensor, torch.Tensor]],
                  options: Optional[SearchOptions] = None,
                  capacity: int = 64,
                  step: Optional[Callable] = None,
                  shortlist: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None
                  ) -> Iterator[tuple[int, list[Hypothesis]]]:
    """Beam search over a stream of source batches (src, src_mask), at most `capacity` sentences
    in flight. Yields (position of the sentence in the stream, its n-best hypotheses best first)
    as sentences finish. Chunks are encoded when their sentences are first needed; feed them
    sorted by length so that sentences decoding together have similar lengths. `step` stands in
    for speedup.py's ``step`` (its arguments and results: graphs.py's CUDA graphs). `shortlist`
    (engine/accel/shortlist.py) maps a chunk's (src, src_mask) to the target ids each sentence may
    produce, (B, V) bool: the output layer and softmax then run over the union of the sentences
    in flight (taken again as sentences join or leave). A chunk's third tensor, if any: (B, P)
    prefixes, -1 padded, each hypothesis's only candidate while within its prefix."""
    grouped = step is None  # a stand-in step (model.step's arguments) gets K copies of each encoding
    # an ensemble (engine/decode/ensemble.py) brings its own step, speedup.py's for all its models
    step = step or getattr(model, "search_step", None) or functools.partial(fast.step, model)
    options = options or SearchOptions()
    d, neg_inf = options.decode, float("-inf")
    K, n_best, ranking = d.beam, d.n_best, Ranking.of(d)
    # early only where it cannot change the result: no length normalisation, no coverage penalty
    early_stop = d.alpha == 0 and not d.coverage if options.early_stop is None else options.early_stop
    queue = _Queue(model, iter(chunks), K, d.max_len_ratio, shortlist, grouped)
    refill = max(1, capacity // 8)  # admit newcomers in groups: each admission copies the batch once
    live = queue.take(capacity) if queue.more() else None  # _Batch of the sentences in flight
    while live is not None and live.n > 0:
        n = live.n
        # A finished hypothesis's next word is fixed (<pad>), so the output layer skips its row;
        # greedy search has none in flight (its sentence has left): None, every row.
        growing = None
        if K > 1:
            unfinished = (~live.finished).nonzero().squeeze(1)
            growing = None if unfinished.numel() == n * K else unfinished
        out = live.output(model)
        extra = {} if out is None else {"output": out.layer}
        log_p, new_state, attn = step(live.enc, live.state, live.y, rows=growing, **extra)
        log_p, kept = log_p.float(), attn if options.with_attention else None
        if ranking.beta and attn is None:
            raise ValueError("decode.coverage reads the attention, and an RNNencdec model has none")
        covered = attn if ranking.beta else None
        if K == 1:  # greedy: every row extends itself, nothing is ranked or reordered
            word, lp = _greedy_words(log_p, live, out)
            live.advance(None, word, live.scores + lp, new_state, kept, covered)
        else:
            _beam_advance(live, log_p, growing, new_state, kept, out, ranking, covered)
        # A sentence whose K hypotheses are all finished (or dead, -inf) can no longer change; with
        # early_stop, one whose n_best first-ranked are (rows are in rank order) stops anyway.
        ended = (live.finished | (live.scores == neg_inf)).view(n, K)
        done = (ended[:, :n_best] if early_stop else ended).all(1)
        if bool(done.any()):
            yield from live.results(done, ranking, n_best)
            live = live.keep(~done)
        if capacity - live.n >= refill and queue.more():
            live = live.cat(queue.take(capacity - live.n))


def _greedy_words(log_p: torch.Tensor, live: _Batch, out: Optional[_Output]
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy search's next word of every row and its log-probability: the most probable (never
    <s> or <pad>), or </s> at the row's length limit."""
    never = [BOS, PAD] if out is None else out.never
    eos = EOS if out is None else out.eos
    log_p[:, never] = float("-inf")
    lp, word = (x.squeeze(1) for x in top_k(log_p, 1))  # its chunked path: under half max(1)'s time
    forced = live.forced_words()
    if forced is not None:  # within a prefix: its next word
        word = torch.where(forced >= 0, forced, word)
        lp = torch.where(forced >= 0, log_p.gather(1, forced.clamp(min=0).unsqueeze(1)).squeeze(1), lp)
    at_limit = live.lengths >= live.limit
    word = torch.where(at_limit, eos, word)
    lp = torch.where(at_limit, log_p[:, eos], lp)
    return (word if out is None else out.vocab[word]), lp


def _beam_advance(live: _Batch, log_p: torch.Tensor, growing: Optional[torch.Tensor],
                  new_state: torch.Tensor, attn: Optional[torch.Tensor], out: Optional[_Output],
                  ranking: Ranking, covered: Optional[torch.Tensor] = None) -> None:
    """One step of beam search (K > 1): each sentence's K survivors among its K x K candidates."""
    K, n, neg_inf = live.K, live.n, float("-inf")
    scores, lengths, finished = live.scores, live.lengths, live.finished
    top_lp, top_word, eos_lp = _best_words(log_p, K, out)  # each hypothesis's own K best
    if growing is not None:  # back to one row per hypothesis (a finished row's values go unused)
        top_lp, top_word, eos_lp = (x.new_zeros(n * K, *x.shape[1:]).index_copy_(0, growing, x)
                                    for x in (top_lp, top_word, eos_lp))
    # At the length limit the one candidate is </s> with its real log-probability; a
    # finished hypothesis has one candidate too, <pad> at no cost.
    at_limit = (lengths >= live.limit) & ~finished
    single = at_limit | finished
    first_lp = torch.where(finished, 0.0, torch.where(at_limit, eos_lp, top_lp[:, 0]))
    first_word = torch.where(finished, PAD, torch.where(at_limit, EOS, top_word[:, 0]))
    forced = live.forced_words()
    if forced is not None:  # within a prefix: one candidate, the prefix's next word
        rows = forced if growing is None else forced.index_select(0, growing)
        lp = log_p.gather(1, rows.clamp(min=0).unsqueeze(1)).squeeze(1)
        lp = lp if growing is None else lp.new_zeros(n * K).index_copy_(0, growing, lp)
        first_lp = torch.where(forced >= 0, lp, first_lp)
        first_word = torch.where(forced >= 0, forced, first_word)
        single = single | (forced >= 0)
    cand_lp = torch.cat([first_lp.unsqueeze(1),
                         top_lp[:, 1:].masked_fill(single.unsqueeze(1), neg_inf)], 1)
    cand_word = torch.cat([first_word.unsqueeze(1), top_word[:, 1:]], 1)
    cand = scores.unsqueeze(1) + cand_lp  # (n*K, K) total log-prob
    cand_len = (lengths + (~finished).long()).unsqueeze(1).float()
    ranked = ranking.normalised(cand, cand_len)
    if covered is not None:  # this step's α_i joins each growing row's coverage, whatever its word
        ranked = ranked + ranking.coverage(live.covered_after(covered), live.real_rows()).unsqueeze(1)
    top = ranked.view(n, K * K).topk(K, dim=1).indices
    # which row each extends
    origin = (top // K + torch.arange(n, device=top.device).unsqueeze(1) * K).view(-1)
    live.advance(origin, cand_word.view(n, K * K).gather(1, top).view(-1),
                 cand.view(n, K * K).gather(1, top).view(-1), new_state, attn, covered)


def cat_encoded(first: Encoded, second: Encoded) -> Encoded:
    """Rows of `first`, then rows of `second`; the shorter source side padded (masked out) to the
    longer."""
    if hasattr(first, "cat"):  # an ensemble's encodings (engine/decode/ensemble.py's Joint)
        return first.cat(second)
    width = max(first.src_mask.size(1), second.src_mask.size(1))

    def join(a, b, along_source):
        if a is None:
            return None
        if along_source:
            a, b = _pad_source(a, width), _pad_source(b, width)
        return torch.cat([a, b])

    return Encoded(join(first.annotations, second.annotations, True), join(first.keys, second.keys, True),
                   join(first.context, second.context, False), join(first.src_mask, second.src_mask, True),
                   join(first.state, second.state, False))


def _pad_source(t: torch.Tensor, width: int) -> torch.Tensor:
    """(B, S, ...) -> (B, width, ...) with zeros (False for a mask) after position S."""
    if t.size(1) == width:
        return t
    return torch.cat([t, t.new_zeros(t.size(0), width - t.size(1), *t.shape[2:])], 1)


class _Queue:
    """The sentences not yet in flight: chunks encoded when first needed, handed out K rows each."""

    def __init__(self, model, chunks: Iterator, K: int, max_len_ratio: float,
                 shortlist: Optional[Callable] = None, grouped: bool = True):
        self.model, self.chunks, self.K, self.ratio = model, chunks, K, max_len_ratio
        self.shortlist = shortlist
        self.copies = 1 if grouped else K  # encoder rows per sentence in a batch
        self.enc: Optional[Encoded] = None  # the current chunk, one row per sentence
        self.allowed: Optional[torch.Tensor] = None  # its sentences' shortlists, (sentences, V)
        self.prefix: Optional[torch.Tensor] = None  # its sentences' forced prefixes, (sentences, P)
        self.used = 0  # its sentences already handed out
        self.first = 0  # stream position of its first sentence
        self._load()

    def _load(self) -> None:
        while self.enc is None or self.used == self.enc.src_mask.size(0):
            if self.enc is not None:
                self.first += self.enc.src_mask.size(0)
            src, mask, *prefix = next(self.chunks, (None, None))
            if src is None:
                self.enc = None
                return
            self.enc, self.used = self.model.encode(src, mask), 0
            self.prefix = prefix[0] if prefix else None
            self.allowed = self.shortlist(src, mask) if self.shortlist is not None else None

    def more(self) -> bool:
        return self.enc is not None

    def take(self, count: int) -> _Batch:
        """Up to `count` sentences as a new batch."""
        parts = []
        while count > 0 and self.enc is not None:
            m = min(count, self.enc.src_mask.size(0) - self.used)
            rows = torch.arange(self.used, self.used + m, device=self.enc.src_mask.device)
            allowed = None if self.allowed is None else self.allowed[self.used:self.used + m]
            prefix = None if self.prefix is None else self.prefix[self.used:self.used + m]
            parts.append(_Batch.start(self.enc.index_select(rows.repeat_interleave(self.copies)), self.K,
                                      list(range(self.first + self.used, self.first + self.used + m)),
                                      self.ratio, allowed, prefix))
            self.used += m
            count -= m
            self._load()
        batch = parts[0]
        for part in parts[1:]:
            batch = batch.cat(part)
        return batch


@dataclass
class _Batch:
    """Sentences in flight, K contiguous rows each, and what each row carries."""

    K: int
    enc: Encoded  # the encoder's output, one row per sentence (or K: the same row K times)
    state: torch.Tensor  # per row: decoder state s_{i-1}
    y: torch.Tensor  # the last word
    scores: torch.Tensor  # total log-probability
    lengths: torch.Tensor  # words so far, </s> included
    finished: torch.Tensor  # ended with </s>
    limit: torch.Tensor  # words before </s> is forced
    seqs: torch.Tensor  # (rows, steps) the words so far (<pad> before a sentence joined, after it finished)
    attn: Optional[torch.Tensor]  # (rows, steps, source) their attention rows, or None
    ids: list[int]  # per sentence: its position in the stream
    src_len: list[int]  # its source length
    joined: list[int]  # the step it joined at
    base: int = 0  # the step of seqs' column 0
    allowed: Optional[torch.Tensor] = None  # per sentence: the target ids its shortlist allows, (n, V)
    prefix: Optional[torch.Tensor] = None  # per row: the ids its translation starts with, (rows, P), -1 after
    coverage: Optional[torch.Tensor] = None  # per row: Σ_i α_ij so far (decode.coverage), (rows, S)
    _output: Optional[_Output] = field(default=None, init=False, repr=False)  # over their union

    _PER_ROW = ("state", "y", "scores", "lengths", "finished", "limit")  # reordered and gathered alike

    @property
    def n(self) -> int:
        return len(self.ids)

    def output(self, model) -> Optional[_Output]:
        """The output layer over the union of the sentences' shortlists (None: no shortlist)."""
        if self.allowed is not None and self._output is None:
            self._output = _Output.of(model, self.allowed)
        return self._output

    def covered_after(self, attn: torch.Tensor) -> torch.Tensor:
        """Each row's coverage with this step's α_i added (a finished row's stays as it was)."""
        step = attn.float().masked_fill(self.finished.unsqueeze(1), 0.0)
        return step if self.coverage is None else self.coverage + step

    def real_rows(self) -> torch.Tensor:
        """(rows, S): True on each row's real source words."""
        mask = self.enc.src_mask
        return mask if mask.size(0) == self.n * self.K else mask.repeat_interleave(self.K, 0)

    def forced_words(self) -> Optional[torch.Tensor]:
        """Per row the next word of its prefix, or -1 (past its prefix, or finished); None: no
        prefixes."""
        if self.prefix is None:
            return None
        width = self.prefix.size(1)
        word = self.prefix.gather(1, self.lengths.clamp(max=width - 1).unsqueeze(1)).squeeze(1)
        return torch.where((self.lengths < width) & ~self.finished, word, -1)

    @property
    def now(self) -> int:
        """Steps taken since the stream began."""
        return self.base + self.seqs.size(1)

    @classmethod
    def start(cls, enc: Encoded, K: int, ids: list[int], ratio: float,
              allowed: Optional[torch.Tensor] = None, prefix: Optional[torch.Tensor] = None) -> _Batch:
        """Newcomers: enc has one row (or K) per sentence; only beam 0 is live, so the K
        hypotheses do not pick the same words."""
        copies = enc.src_mask.size(0) // len(ids)
        device = enc.src_mask.device
        rows = len(ids) * K
        src_len = enc.src_mask.sum(1)[::copies].repeat_interleave(K)
        scores = torch.full((rows // K, K), float("-inf"), device=device)
        scores[:, 0] = 0.0
        return cls(K, enc, enc.state[::copies].repeat_interleave(K, 0),
                   torch.full((rows,), BOS, dtype=torch.long, device=device),
                   scores.view(-1),
                   torch.zeros(rows, dtype=torch.long, device=device),
                   torch.zeros(rows, dtype=torch.bool, device=device),
                   (src_len.float() * ratio).long() + 10,
                   torch.empty(rows, 0, dtype=torch.long, device=device),
                   None, ids, src_len[::K].tolist(), [0] * len(ids), allowed=allowed,
                   prefix=None if prefix is None else prefix.repeat_interleave(K, 0))

    def cat(self, newcomers: _Batch) -> _Batch:
        """self's sentences, then `newcomers`, joining now (no history yet: their columns so far
        are <pad>)."""
        rows, width = newcomers.seqs.size(0), self.seqs.size(1)
        enc = cat_encoded(self.enc, newcomers.enc)
        attn = None
        if self.attn is not None:  # widened to the joint source length
            attn = self.attn.new_zeros(self.attn.size(0) + rows, width, enc.src_mask.size(1))
            attn[: self.attn.size(0), :, : self.attn.size(2)] = self.attn
        per_row = {f: torch.cat([getattr(self, f), getattr(newcomers, f)]) for f in self._PER_ROW}
        allowed = None  # both have shortlists or neither: one _Queue made them
        if self.allowed is not None and newcomers.allowed is not None:
            allowed = torch.cat([self.allowed, newcomers.allowed])
        coverage = None  # widened to the joint source length, newcomers' rows zero
        if self.coverage is not None:
            coverage = self.coverage.new_zeros(self.coverage.size(0) + rows, enc.src_mask.size(1))
            coverage[: self.coverage.size(0), : self.coverage.size(1)] = self.coverage
        prefix = None  # both have prefixes or neither, of one width: one stream made them
        if self.prefix is not None and newcomers.prefix is not None:
            prefix = torch.cat([self.prefix, newcomers.prefix])
        return _Batch(self.K, enc, **per_row,
                      seqs=torch.cat([self.seqs, self.seqs.new_full((rows, width), PAD)]),
                      attn=attn, ids=self.ids + newcomers.ids, src_len=self.src_len + newcomers.src_len,
                      joined=self.joined + [self.now] * newcomers.n, base=self.base, allowed=allowed,
                      prefix=prefix, coverage=coverage)

    def advance(self, origin: Optional[torch.Tensor], word: torch.Tensor, scores: torch.Tensor,
                state: torch.Tensor, attn: Optional[torch.Tensor], covered: Optional[torch.Tensor] = None
                ) -> None:
        """One step: row r extends row origin[r] (None: itself, every row growing) with `word` to
        total log-probability `scores`; `state` and `attn` are the step's, row by row before the
        reordering."""
        def pick(t: torch.Tensor) -> torch.Tensor:
            return t if origin is None else t.index_select(0, origin)

        if covered is not None:  # decode.coverage: this step's α_i joins the coverage of growing rows
            self.coverage = pick(self.covered_after(covered))
        was_finished = pick(self.finished)  # all False where origin is None (greedy)
        self.lengths = pick(self.lengths) + (~was_finished).long()
        self.finished = was_finished | (word == EOS)
        self.scores, self.y, self.state = scores, word, pick(state)
        if self.prefix is not None:
            self.prefix = pick(self.prefix)
        if attn is not None:
            past = self.attn if self.attn is not None else attn.new_zeros(word.numel(), 0, attn.size(1))
            self.attn = torch.cat([pick(past), pick(attn).unsqueeze(1)], 1)
        self.seqs = torch.cat([pick(self.seqs), word.unsqueeze(1)], 1)

    def results(self, done: torch.Tensor, ranking: Ranking,
                n_best: int) -> Iterator[tuple[int, list[Hypothesis]]]:
        """(stream position, n-best hypotheses) of the sentences flagged in `done`."""
        K = self.K
        which = done.nonzero().squeeze(1)
        rows = (which.unsqueeze(1) * K + torch.arange(K, device=which.device)).view(-1)
        scores, lengths = self.scores.index_select(0, rows), self.lengths.index_select(0, rows)
        norm = ranking.normalised(scores, lengths.float())
        if self.coverage is not None:
            norm = norm + ranking.coverage(self.coverage.index_select(0, rows),
                                           self.real_rows().index_select(0, rows))
        # finished hypotheses first (with early_stop, growing ones may still be in the beam)
        rank = norm.masked_fill(~self.finished.index_select(0, rows), float("-inf"))
        order = rank.view(-1, K).argsort(dim=1, descending=True)[:, :n_best]
        picked = (order + torch.arange(0, rows.numel(), K, device=rows.device).unsqueeze(1)).view(-1)
        best = rows.index_select(0, picked)
        seqs = self.seqs.index_select(0, best).tolist()
        attn = self.attn.index_select(0, best) if self.attn is not None else None
        hyp_scores = norm.index_select(0, picked).tolist()
        hyp_log_probs = scores.index_select(0, picked).tolist()
        for j, s in enumerate(which.tolist()):
            hyps = []
            for r in range(j * n_best, (j + 1) * n_best):
                steps = [i for i, tok in enumerate(seqs[r]) if tok != PAD]
                toks = [seqs[r][i] for i in steps]
                rows_attn = attn[r, steps, : self.src_len[s]].tolist() if attn is not None else None
                if toks and toks[-1] == EOS:
                    toks = toks[:-1]
                hyps.append(Hypothesis(toks, hyp_scores[r], hyp_log_probs[r], rows_attn))
            yield self.ids[s], hyps

    def keep(self, sentences: torch.Tensor) -> _Batch:
        """The batch without the sentences not flagged in `sentences`; history before the
        earliest remaining sentence joined is dropped."""
        rows = sentences.repeat_interleave(self.K).nonzero().squeeze(1)
        kept = sentences.tolist()
        pick = lambda xs: [x for x, k in zip(xs, kept) if k]  # noqa: E731
        joined = pick(self.joined)
        base = min(joined, default=self.now)
        cut = base - self.base
        per_row = {f: getattr(self, f).index_select(0, rows) for f in self._PER_ROW}
        copies = self.enc.src_mask.size(0) // self.n
        enc = self.enc.index_select(sentences.repeat_interleave(copies).nonzero().squeeze(1))
        return _Batch(self.K, enc, **per_row,
                      seqs=self.seqs.index_select(0, rows)[:, cut:],
                      attn=None if self.attn is None else self.attn.index_select(0, rows)[:, cut:],
                      ids=pick(self.ids), src_len=pick(self.src_len), joined=joined, base=base,
                      allowed=None if self.allowed is None else self.allowed[sentences],
                      prefix=None if self.prefix is None else self.prefix.index_select(0, rows),
                      coverage=None if self.coverage is None else self.coverage.index_select(0, rows))
