"""Lexically constrained decoding (``translate --constraints FILE``): every translation contains
the phrases given for its sentence, by dynamic beam allocation (Post & Vilar 2018, "Fast Lexically
Constrained Decoding with Dynamic Beam Allocation for Neural Machine Translation").

A phrase is a sequence of target pieces (the words split as the model splits them). Each
hypothesis carries how far it has got: which phrases it has completed, and the one it is inside
(and how far in). At every step each growing hypothesis proposes

    its K most probable next words, as in beam search,
    the next piece of the phrase it is inside, or else the first piece of every phrase not yet met,

and </s> only once every phrase is met (or at the length limit, where </s> is forced). A
candidate that leaves a phrase before its end has not met it: the phrase must be started again.
The candidates of a sentence fall into banks by the number of constraint pieces met, 0 .. C; the
K places of the beam are dealt out over the banks in turn, most met first, each bank's best
(ranked as the search ranks: log p / lp(|y|), plus the coverage penalty) taking its place — so
hypotheses that have met more constraints survive beside better-scoring ones that have met fewer,
and the beam does not fill with either. With fewer places than banks the most met win; a beam
wider than the number of constraint pieces (K > C) keeps a hypothesis in every bank. The n-best
list ranks the hypotheses that met every constraint first (one that reached the length limit
without them comes after).

The sentences of a batch share each step's model call (engine/accel/speedup.py's ``step``: the K
hypotheses of a sentence read its one encoding); the bookkeeping is Python per sentence, cheap
beside the step. A sentence leaves the batch once all its hypotheses have ended.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import torch

from rnnsearch.engine.accel import speedup as fast
from rnnsearch.engine.accel.inflight import Ranking, top_k
from rnnsearch.nn.model import BOS, EOS, PAD
from rnnsearch.nn.search import Hypothesis, SearchOptions

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Progress:
    """How far a hypothesis is through its sentence's phrases: which are met, the one it is inside
    (-1: none) and how many pieces into it, and its bank: the constraint pieces met, those of the
    phrase it is inside counting as far as it got."""

    met: tuple[bool, ...]
    current: int = -1
    inside: int = 0
    count: int = 0

    @classmethod
    def start(cls, phrases: list[list[int]]) -> Progress:
        return cls(tuple(False for _ in phrases))

    def done(self) -> bool:
        return all(self.met)

    def wanted(self, phrases: list[list[int]]) -> list[int]:
        """The pieces that would take it further: the next of its phrase, or every open phrase's first."""
        if self.current >= 0:
            return [phrases[self.current][self.inside]]
        return list(dict.fromkeys(p[0] for p, m in zip(phrases, self.met) if not m))

    def after(self, word: int, phrases: list[list[int]], starts: dict[int, list[int]]) -> Progress:
        """Its progress once `word` follows; `starts` maps a piece to the phrases it begins."""
        base = self
        if self.current >= 0:
            phrase = phrases[self.current]
            if word == phrase[self.inside]:
                if self.inside + 1 == len(phrase):
                    return Progress(_met(self.met, self.current), count=self.count + 1)
                return Progress(self.met, self.current, self.inside + 1, self.count + 1)
            # left the phrase before its end: not met, its pieces no longer count; `word` may start another
            base = Progress(self.met, count=self.count - self.inside)
        for c in starts.get(word, ()):
            if not base.met[c]:
                if len(phrases[c]) == 1:
                    return Progress(_met(base.met, c), count=base.count + 1)
                return Progress(base.met, c, 1, base.count + 1)
        return base


def starts_of(phrases: list[list[int]]) -> dict[int, list[int]]:
    """Each piece that begins a phrase, and the phrases it begins (in order)."""
    starts: dict[int, list[int]] = {}
    for c, p in enumerate(phrases):
        starts.setdefault(p[0], []).append(c)
    return starts


def _met(met: tuple[bool, ...], c: int) -> tuple[bool, ...]:
    return met[:c] + (True,) + met[c + 1:]


@dataclass
class _Row:
    """One hypothesis: its words so far (<pad> after </s>), total log p, length (</s> counted),
    whether it has ended (or is an empty place: dead) and its progress through the phrases."""

    words: list[int]
    log_prob: float
    length: int
    ended: bool
    progress: Progress
    dead: bool = False


# a candidate: (ranking score, bank, origin row, word, total log p, progress after the word)
Candidate = tuple[float, int, int, int, float, Progress]


@torch.no_grad()
def constrained_search(model, src, src_mask, phrases: list[list[list[int]]],
                       options: SearchOptions) -> list[list[Hypothesis]]:
    """Dynamic beam allocation over the batch (src, src_mask) — an ensemble's lists of them too
    (engine/decode/ensemble.py) — with `phrases[b]` the target-id phrases sentence b must
    contain: per sentence its n_best hypotheses, best first."""
    search = _Search(model, src, src_mask, phrases, options)
    out: list = [None] * len(phrases)
    while search.ids:
        search.advance()
        for b, hyps in search.finished():
            out[b] = hyps
    return out


class _Search:
    """The sentences of a batch still searching (`ids`, their batch positions), K rows each."""

    def __init__(self, model, src, src_mask, phrases: list[list[list[int]]], options: SearchOptions):
        d = options.decode
        self.K, self.n_best, self.ranking, self.phrases = d.beam, d.n_best, Ranking.of(d), phrases
        self.starts = [starts_of(p) for p in phrases]
        self.keep_attention = options.with_attention
        self.step = getattr(model, "search_step", None) or functools.partial(fast.step, model)
        self.enc = model.encode(src, src_mask)
        B, K = self.enc.src_mask.size(0), self.K
        self.device = self.enc.src_mask.device
        self.limits = ((self.enc.src_mask.sum(1).float() * d.max_len_ratio).long() + 10).tolist()
        self.state = self.enc.state.repeat_interleave(K, 0)
        self.rows = [_Row([], 0.0 if k == 0 else NEG_INF, 0, k > 0, Progress.start(phrases[b]), dead=k > 0)
                     for b in range(B) for k in range(K)]
        self.ids = list(range(B))
        self.history: Optional[torch.Tensor] = None  # (rows, steps, S) attention rows
        self.coverage: Optional[torch.Tensor] = None  # (rows, S) Σ_i α_ij of each row (decode.coverage)

    def advance(self) -> None:
        """One step: the model on the growing rows, then each sentence's K survivors."""
        K, rows = self.K, self.rows
        growing = [r for r, row in enumerate(rows) if not row.ended]
        at = {r: g for g, r in enumerate(growing)}  # row -> its line of log_p
        y = torch.tensor([row.words[-1] if row.words else BOS for row in rows], device=self.device)
        every = len(growing) == len(rows)
        log_p, new_state, attn = self.step(self.enc, self.state, y, rows=None if every else
                                           torch.tensor(growing, dtype=torch.long, device=self.device))
        log_p = log_p.float()
        eos = log_p[:, EOS].tolist()
        log_p[:, BOS] = NEG_INF
        log_p[:, PAD] = NEG_INF
        open_lines = [g for g, r in enumerate(growing) if not rows[r].progress.done()]
        if open_lines:  # no </s> before every phrase is met
            log_p[torch.tensor(open_lines, device=self.device), EOS] = NEG_INF
        top_lp, top_word = (t.tolist() for t in top_k(log_p, min(K, log_p.size(1))))
        wanted = [(g, w) for g, r in enumerate(growing)
                  for w in rows[r].progress.wanted(self.phrases[self.ids[r // K]])]
        wanted_lp = log_p[[g for g, _ in wanted], [w for _, w in wanted]].tolist() if wanted else []
        proposals = [list(zip(lp, w)) for lp, w in zip(top_lp, top_word)]
        for (g, w), lp in zip(wanted, wanted_lp):
            proposals[g].append((lp, w))
        penalty = self._coverage_penalty(attn)
        origin, chosen = [], []
        for s in range(len(self.ids)):
            cands = self._candidates(s, at, proposals, eos, self.limits[s], penalty)
            for r, row in _allocate(cands, rows, K, s * K):
                origin.append(r)
                chosen.append(row)
        pick = torch.tensor(origin, device=self.device)
        self.rows, self.state = chosen, new_state.index_select(0, pick)
        if attn is not None and self.keep_attention:
            now = attn.index_select(0, pick).unsqueeze(1)
            past = self.history
            self.history = now if past is None else torch.cat([past.index_select(0, pick), now], 1)
        if self.coverage is not None:
            self.coverage = self.coverage.index_select(0, pick)

    def _coverage_penalty(self, attn: Optional[torch.Tensor]) -> list[float]:
        """Each row's coverage penalty with this step's α_i added (decode.coverage; zeros without)."""
        if not self.ranking.beta or attn is None:
            return [0.0] * len(self.rows)
        ended = torch.tensor([row.ended for row in self.rows], device=self.device)
        step_attn = attn.float().masked_fill(ended.unsqueeze(1), 0.0)
        self.coverage = step_attn if self.coverage is None else self.coverage + step_attn
        return self.ranking.coverage(self.coverage, self.enc.src_mask.repeat_interleave(self.K, 0)).tolist()

    def _candidates(self, s: int, at: dict[int, int], proposals, eos: list[float], limit: int,
                    penalty: list[float]) -> list[Candidate]:
        """Every extension of sentence s's hypotheses (a finished one: itself, <pad> at no cost)."""
        b, K, ranking = self.ids[s], self.K, self.ranking
        phrases, starts = self.phrases[b], self.starts[b]
        out: list[Candidate] = []
        for r in range(s * K, (s + 1) * K):
            row = self.rows[r]
            if row.dead:
                continue
            if row.ended:
                score = _norm(ranking, row.log_prob, row.length) + penalty[r]
                out.append((score, row.progress.count, r, PAD, row.log_prob, row.progress))
                continue
            g = at[r]
            seen = set()
            for lp, word in ([(eos[g], EOS)] if len(row.words) >= limit else proposals[g]):
                if lp == NEG_INF or word in seen:
                    continue
                seen.add(word)
                progress = row.progress if word == EOS else row.progress.after(word, phrases, starts)
                total = row.log_prob + lp
                score = _norm(ranking, total, row.length + 1) + penalty[r]
                out.append((score, progress.count, r, word, total, progress))
        return out

    @staticmethod
    def _done(rows: list[_Row]) -> bool:
        """Whether a sentence's search is over: every hypothesis that has met all its phrases has
        ended (and one has), or every hypothesis has. Hypotheses still short of a phrase are not
        waited for: they can end only once they meet it, so the lowest bank would grow to the
        length limit in every sentence (a beam-5 search twice as slow on Multi30k, the same BLEU
        and phrases met: docs/decoding.md)."""
        met = [row for row in rows if not row.dead and row.progress.done()]
        return all(row.ended for row in (met or rows))

    def finished(self) -> list[tuple[int, list[Hypothesis]]]:
        """(batch position, n-best) of each sentence whose hypotheses have all ended; they leave."""
        K, mask = self.K, self.enc.src_mask
        done = [self._done(self.rows[s * K:(s + 1) * K]) for s in range(len(self.ids))]
        if not any(done):
            return []
        out = []
        for s, b in enumerate(self.ids):
            if done[s]:
                penalty = penalty_of(self.coverage, mask, s, K, self.ranking)
                out.append((b, _results(self.rows[s * K:(s + 1) * K], self.history, s * K, int(mask[s].sum()),
                                        self.ranking, penalty, self.n_best)))
        keep = [s for s, f in enumerate(done) if not f]
        rows = torch.tensor([s * K + k for s in keep for k in range(K)], dtype=torch.long, device=self.device)
        self.rows = [self.rows[s * K + k] for s in keep for k in range(K)]
        self.state = self.state.index_select(0, rows)
        self.history = None if self.history is None else self.history.index_select(0, rows)
        self.coverage = None if self.coverage is None else self.coverage.index_select(0, rows)
        self.enc = self.enc.index_select(torch.tensor(keep, dtype=torch.long, device=self.device))
        self.ids = [self.ids[s] for s in keep]
        self.limits = [self.limits[s] for s in keep]
        return out


def penalty_of(coverage: Optional[torch.Tensor], mask: torch.Tensor, s: int, K: int,
               ranking: Ranking) -> list[float]:
    """The coverage penalty of sentence s's K rows (zeros without one)."""
    if coverage is None:
        return [0.0] * K
    return ranking.coverage(coverage[s * K:(s + 1) * K], mask[s:s + 1].expand(K, -1)).tolist()


def _rank(ranking: Ranking, log_prob: float, length: int) -> float:
    """A finished hypothesis's score, in fp32 as the batched search reports it."""
    return float(ranking.normalised(torch.tensor(log_prob), torch.tensor(float(length))))


def _norm(ranking: Ranking, log_prob: float, length: int) -> float:
    """Ranking.normalised in Python floats: the order the beam is chosen by, without a tensor a
    candidate."""
    if not ranking.alpha:
        return log_prob
    return log_prob / (((5 + length) / 6) if ranking.gnmt else max(length, 1)) ** ranking.alpha


def _allocate(candidates: list[Candidate], rows: list[_Row], K: int, first: int) -> list[tuple[int, _Row]]:
    """The K survivors (origin row, new row): the banks, most constraint pieces met first, each in
    turn giving its best remaining candidate its place, until K are placed or none is left (then
    dead places, which extend nothing)."""
    banks: dict[int, list[Candidate]] = {}
    for cand in sorted(candidates, key=lambda c: -c[0]):
        banks.setdefault(cand[1], []).append(cand)
    queues = [banks[b][::-1] for b in sorted(banks, reverse=True)]  # best last: pop() takes it
    picked: list[tuple[int, _Row]] = []
    while len(picked) < K and any(queues):
        for queue in queues:
            if queue and len(picked) < K:
                _, _, r, word, total, progress = queue.pop()
                old = rows[r]
                picked.append((r, _Row(old.words + [word], total, old.length + (not old.ended),
                                       old.ended or word == EOS, progress)))
    while len(picked) < K:
        picked.append((first, _Row([PAD], NEG_INF, 0, True, Progress(()), dead=True)))
    return picked


def _results(rows: list[_Row], history: Optional[torch.Tensor], first: int, src_len: int, ranking: Ranking,
             penalty: list[float], n_best: int) -> list[Hypothesis]:
    """A finished sentence's n-best: those that met every phrase first, then by ranking score."""
    ranked = []
    for k, row in enumerate(rows):
        if row.dead:
            continue
        score = _rank(ranking, row.log_prob, row.length) + penalty[k]
        steps = [i for i, w in enumerate(row.words) if w != PAD]
        words = [row.words[i] for i in steps]
        if words and words[-1] == EOS:
            words = words[:-1]
        attn = None
        if history is not None:
            attn = history[first + k, steps, :src_len].tolist()
        ranked.append((not row.progress.done(), -score, Hypothesis(words, score, row.log_prob, attn)))
    ranked.sort(key=lambda x: (x[0], x[1]))
    hyps = [h for _, _, h in ranked[:n_best]]
    while len(hyps) < n_best:  # fewer live hypotheses than asked: the last repeated, as a dead beam would
        hyps.append(hyps[-1])
    return hyps
