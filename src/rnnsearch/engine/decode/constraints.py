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
from rnnsearch.engine.accel.inflight import Ranking
from rnnsearch.nn.model import BOS, EOS, PAD
from rnnsearch.nn.search import Hypothesis, SearchOptions

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Progress:
    """How far a hypothesis is through its sentence's phrases: which are met, and the one it is
    inside, `inside` pieces into it (-1: none)."""

    met: tuple[bool, ...]
    current: int = -1
    inside: int = 0

    @classmethod
    def start(cls, phrases: list[list[int]]) -> Progress:
        return cls(tuple(False for _ in phrases))

    def done(self) -> bool:
        return all(self.met)

    def pieces_met(self, phrases: list[list[int]]) -> int:
        """Its bank: the constraint pieces met, the phrase it is inside counting as far as it got."""
        return sum(len(p) for p, m in zip(phrases, self.met) if m) + (self.inside if self.current >= 0 else 0)

    def wanted(self, phrases: list[list[int]]) -> list[int]:
        """The pieces that would take it further: the next of its phrase, or every open phrase's first."""
        if self.current >= 0:
            return [phrases[self.current][self.inside]]
        return list(dict.fromkeys(p[0] for p, m in zip(phrases, self.met) if not m))

    def after(self, word: int, phrases: list[list[int]]) -> Progress:
        """Its progress once `word` follows."""
        if self.current >= 0:
            phrase = phrases[self.current]
            if word == phrase[self.inside]:
                if self.inside + 1 == len(phrase):
                    return Progress(_met(self.met, self.current))
                return Progress(self.met, self.current, self.inside + 1)
            # left the phrase before its end: not met; the word may start another
        for c, (p, m) in enumerate(zip(phrases, self.met)):
            if not m and p[0] == word:
                return Progress(_met(self.met, c)) if len(p) == 1 else Progress(self.met, c, 1)
        return Progress(self.met)


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


@torch.no_grad()
def constrained_search(model, src, src_mask, phrases: list[list[list[int]]],
                       options: SearchOptions) -> list[list[Hypothesis]]:
    """Dynamic beam allocation over the batch (src, src_mask) — an ensemble's lists of them too
    (engine/decode/ensemble.py) — with `phrases[b]` the target-id phrases sentence b must
    contain: per sentence its n_best hypotheses, best first."""
    d = options.decode
    K, ranking = d.beam, Ranking.of(d)
    step = getattr(model, "search_step", None) or functools.partial(fast.step, model)
    enc = model.encode(src, src_mask)
    mask = enc.src_mask
    B, device = mask.size(0), mask.device
    limits = ((mask.sum(1).float() * d.max_len_ratio).long() + 10).tolist()
    state = enc.state.repeat_interleave(K, 0)
    y = torch.full((B * K,), BOS, dtype=torch.long, device=device)
    rows = [_Row([], 0.0 if k == 0 else NEG_INF, 0, k > 0, Progress.start(phrases[b]), dead=k > 0)
            for b in range(B) for k in range(K)]
    ids = list(range(B))  # the batch position of each sentence still searching
    history: Optional[torch.Tensor] = None  # (rows, steps, S) attention rows
    coverage: Optional[torch.Tensor] = None  # (rows, S) Σ_i α_ij of each row (decode.coverage)
    out: list = [None] * B
    while ids:
        log_p, new_state, attn = step(enc, state, y)
        log_p = log_p.float()
        eos = log_p[:, EOS].tolist()
        log_p[:, BOS] = NEG_INF
        log_p[:, PAD] = NEG_INF
        open_rows = [r for r, row in enumerate(rows) if not row.progress.done()]
        if open_rows:  # no </s> before every phrase is met
            log_p[torch.tensor(open_rows, device=device), EOS] = NEG_INF
        top_lp, top_word = (t.tolist() for t in log_p.topk(min(K, log_p.size(1)), dim=1))
        wanted = [(r, w) for r, row in enumerate(rows) if not row.ended
                  for w in row.progress.wanted(phrases[ids[r // K]])]
        wanted_lp = log_p[[r for r, _ in wanted], [w for _, w in wanted]].tolist() if wanted else []
        extra: dict[int, list[tuple[float, int]]] = {}
        for (r, w), lp in zip(wanted, wanted_lp):
            extra.setdefault(r, []).append((lp, w))
        if ranking.beta and attn is not None:
            ended = torch.tensor([row.ended for row in rows], device=device)
            step_attn = attn.float().masked_fill(ended.unsqueeze(1), 0.0)
            coverage = step_attn if coverage is None else coverage + step_attn
            real = mask.repeat_interleave(K, 0)
            penalty = ranking.coverage(coverage, real).tolist()
        else:
            penalty = [0.0] * len(rows)
        origin, chosen = [], []
        for s, b in enumerate(ids):
            picks = _allocate(_candidates(rows, s, K, top_lp, top_word, extra, eos, limits[b], phrases[b],
                                          ranking, penalty), K, s * K)
            origin += [r for r, _ in picks]
            chosen += [row for _, row in picks]
        pick = torch.tensor(origin, device=device)
        rows, state = chosen, new_state.index_select(0, pick)
        y = torch.tensor([row.words[-1] for row in rows], device=device)
        if attn is not None and options.with_attention:
            now = attn.index_select(0, pick).unsqueeze(1)
            history = now if history is None else torch.cat([history.index_select(0, pick), now], 1)
        if coverage is not None:
            coverage = coverage.index_select(0, pick)
        finished = [all(row.ended for row in rows[s * K:(s + 1) * K]) for s in range(len(ids))]
        if any(finished):
            for s, b in enumerate(ids):
                if finished[s]:
                    out[b] = _results(rows[s * K:(s + 1) * K], history, s * K, int(mask[s].sum()), ranking,
                                      penalty_of(coverage, mask, s, K, ranking), d.n_best)
            keep = [s for s, f in enumerate(finished) if not f]
            row_keep = torch.tensor([s * K + k for s in keep for k in range(K)], dtype=torch.long,
                                    device=device)
            rows = [rows[s * K + k] for s in keep for k in range(K)]
            state, y = state.index_select(0, row_keep), y.index_select(0, row_keep)
            history = None if history is None else history.index_select(0, row_keep)
            coverage = None if coverage is None else coverage.index_select(0, row_keep)
            enc = enc.index_select(torch.tensor(keep, dtype=torch.long, device=device))
            mask = enc.src_mask
            ids = [ids[s] for s in keep]
    return out


def penalty_of(coverage: Optional[torch.Tensor], mask: torch.Tensor, s: int, K: int,
               ranking: Ranking) -> list[float]:
    """The coverage penalty of sentence s's K rows (zeros without one)."""
    if coverage is None:
        return [0.0] * K
    return ranking.coverage(coverage[s * K:(s + 1) * K], mask[s:s + 1].expand(K, -1)).tolist()


def _candidates(rows: list[_Row], s: int, K: int, top_lp, top_word, extra, eos: list[float], limit: int,
                phrases: list[list[int]], ranking: Ranking, penalty: list[float]
                ) -> list[tuple[float, int, int, _Row]]:
    """(ranking score, bank, origin row, the new row) of each extension of sentence s's hypotheses."""
    out = []
    for r in range(s * K, (s + 1) * K):
        row = rows[r]
        if row.dead:
            continue
        if row.ended:  # stays as it is, <pad> at no cost
            score = _norm(ranking, row.log_prob, row.length) + penalty[r]
            out.append((score, row.progress.pieces_met(phrases), r,
                        _Row(row.words + [PAD], row.log_prob, row.length, True, row.progress)))
            continue
        if len(row.words) >= limit:  # </s> forced, phrases met or not
            options = [(eos[r], EOS)]
        else:
            options = list(dict.fromkeys(list(zip(top_lp[r], top_word[r])) + extra.get(r, [])))
        seen = set()
        for lp, word in options:
            if lp == NEG_INF or word in seen:
                continue
            seen.add(word)
            progress = row.progress if word == EOS else row.progress.after(word, phrases)
            total = row.log_prob + lp
            new = _Row(row.words + [word], total, row.length + 1, word == EOS, progress)
            out.append((_norm(ranking, total, new.length) + penalty[r], progress.pieces_met(phrases), r, new))
    return out


def _rank(ranking: Ranking, log_prob: float, length: int) -> float:
    """A finished hypothesis's score, in fp32 as the batched search reports it."""
    return float(ranking.normalised(torch.tensor(log_prob), torch.tensor(float(length))))


def _norm(ranking: Ranking, log_prob: float, length: int) -> float:
    """Ranking.normalised in Python floats: the order the beam is chosen by, without a tensor a
    candidate."""
    if not ranking.alpha:
        return log_prob
    return log_prob / (((5 + length) / 6) if ranking.gnmt else max(length, 1)) ** ranking.alpha


def _allocate(candidates: list[tuple[float, int, int, _Row]], K: int, first: int) -> list[tuple[int, _Row]]:
    """The K survivors (origin row, row): the banks, most constraint pieces met first, each in turn
    giving its best remaining candidate its place, until K are placed or none is left (then dead
    places, which extend nothing)."""
    banks: dict[int, list] = {}
    for cand in sorted(candidates, key=lambda c: -c[0]):
        banks.setdefault(cand[1], []).append(cand)
    order = sorted(banks, reverse=True)
    picked: list[tuple[int, _Row]] = []
    while len(picked) < K and any(banks[b] for b in order):
        for b in order:
            if banks[b] and len(picked) < K:
                _, _, r, row = banks[b].pop(0)
                picked.append((r, row))
    while len(picked) < K:
        dead = _Row([PAD], NEG_INF, 0, True, Progress(()), dead=True)
        picked.append((first, dead))
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
