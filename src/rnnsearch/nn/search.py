"""Beam search (Section 3.2), one sentence at a time: the translation that approximately maximises
p(y | x) under the model.

A beam holds the K best hypotheses so far. At every step each growing hypothesis proposes its K
most probable next words (<s> and <pad> never; only </s> once it reaches the sentence's length
limit, ratio * source words + 10); a hypothesis that has ended with </s> stays in the beam as it
is. All of them are ranked by the length-normalised score  log p(y | x) / |y|**alpha  (alpha = 0:
the raw log-probability, |y| counting </s>), so finished and growing hypotheses compete fairly,
and the K best form the next beam. The search ends when every hypothesis in the beam has ended —
or, with `early_stop`, as soon as the `n_best` best-ranked have. With alpha = 0 the two give the
same result (a log-probability only falls as its hypothesis grows, so nothing still growing can
overtake a finished one), so there the search stops early (early_stop=None, the default). With
length normalisation a growing hypothesis can overtake, and on Multi30k stopping early cost BLEU
(docs/benchmarks.md has how much), so by default the search goes on. K = 1 is greedy search.

Speed: the product decodes with engine/accel/inflight.py, the same search batched over sentences
in flight; tests/test_accel.py holds its n-best lists equal to these. Given a `trace` list,
search_sentence records each step's beam in it (engine/decode/beamtrace.py: `--beam-trace`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import torch

from rnnsearch.config import DecodeConfig, decode_options
from rnnsearch.nn.model import BOS, EOS, PAD


@dataclass(frozen=True)
class SearchOptions:
    """How a search runs: the decoding options it reads from `decode` (beam K, alpha,
    max_len_ratio, n_best; their defaults and checks are config.DecodeConfig's), whether to keep
    each hypothesis's attention rows, and `early_stop` (module docstring)."""

    decode: DecodeConfig = field(default_factory=DecodeConfig)
    with_attention: bool = True  # keep each hypothesis's attention rows
    early_stop: Optional[bool] = None  # None: only where it cannot change the result (alpha 0)

    def __post_init__(self) -> None:
        decode_options(self.decode, {})  # the one check of the values, however they were made


@dataclass
class Hypothesis:
    tokens: list[int]  # without <s>, without </s>
    score: float  # length-normalised log-probability (the ranking score)
    log_prob: float  # total log-probability, </s> included
    attention: Optional[list[list[float]]]  # one row per output token (</s> last), or None


@dataclass
class _Open:
    """A hypothesis while the search runs: its words (</s> last once it has ended), log p(y | x) as
    the search sums it (fp32), the decoder state after its last word, its attention rows."""

    words: list[int]
    log_prob: torch.Tensor
    state: torch.Tensor
    attention: list[torch.Tensor]

    @property
    def ended(self) -> bool:
        return bool(self.words) and self.words[-1] == EOS


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_mask: torch.Tensor, options: Optional[SearchOptions] = None,
                **settings: Any) -> list[list[Hypothesis]]:
    """Each sentence of the batch src, src_mask (B, S) searched alone: per sentence its `n_best`
    hypotheses, best first. `options`, or as keywords `settings` config.DecodeConfig's (beam=5,
    alpha=1.0, n_best=2, ...). The model must provide ``encode`` and ``step``."""
    options = search_options(options, settings)
    return [search_sentence(model, src[b][src_mask[b]], options) for b in range(src.size(0))]


def search_options(options: Optional[SearchOptions], settings: dict[str, Any]) -> SearchOptions:
    """`options`, or SearchOptions from keywords: ``with_attention``, ``early_stop`` and any of
    config.DecodeConfig's (beam=3, alpha=0.0, ...), the others at their defaults."""
    if options is not None and settings:
        raise TypeError(f"beam_search: give options or keywords, not both ({', '.join(settings)})")
    if options is not None:
        return options
    own = {key: settings.pop(key) for key in ("with_attention", "early_stop") if key in settings}
    return SearchOptions(decode_options(DecodeConfig(), settings), **own)


@torch.no_grad()
def search_sentence(model, words: torch.Tensor, options: SearchOptions,
                    trace: Optional[list] = None) -> list[Hypothesis]:
    """The `n_best` hypotheses of one source sentence, `words` (S,) its real tokens. `trace`: a
    list to which each step appends the beam after it and the candidates it ranked (_step)."""
    d = options.decode
    K, alpha = d.beam, d.alpha
    early_stop = alpha == 0 if options.early_stop is None else options.early_stop
    src = words.unsqueeze(0)
    enc = model.encode(src, torch.ones_like(src, dtype=torch.bool))  # h_j and s_0, once
    # words before </s> is forced (in fp32, as the batched search computes it)
    limit = int(torch.tensor(float(src.size(1))) * d.max_len_ratio) + 10
    beam = [_Open([], torch.tensor(0.0), enc.state[0], [])]
    while True:
        growing = [h for h in beam if not h.ended]  # never empty: an ended beam has left the loop
        sentence = torch.zeros(len(growing), dtype=torch.long, device=src.device)  # each row its encoding
        last = torch.tensor([h.words[-1] if h.words else BOS for h in growing], device=src.device)
        states = torch.stack([h.state for h in growing])
        log_p, states, alphas = model.step(enc.index_select(sentence), states, last)  # log p(y_i), s_i, α_i
        log_p = log_p.float()
        log_p[:, [BOS, PAD]] = float("-inf")  # never generated
        candidates, parents, rows = [], [], iter(range(len(growing)))
        for parent, h in enumerate(beam):
            if h.ended:  # a finished hypothesis competes as it is
                candidates.append(h)
                parents.append(parent)
                continue
            r = next(rows)
            alpha_row = [] if alphas is None or not options.with_attention else [alphas[r]]
            if len(h.words) >= limit:  # at the length limit: </s>
                best = [(log_p[r, EOS], EOS)]
            else:
                values, ids = log_p[r].topk(K)
                best = list(zip(values, ids.tolist()))
            grown = [_Open(h.words + [w], h.log_prob + lp, states[r], h.attention + alpha_row)
                     for lp, w in best if lp > float("-inf")]
            candidates += grown
            parents += [parent] * len(grown)
        ranked = torch.stack([_normalised(h, alpha) for h in candidates])
        kept = ranked.topk(min(K, len(candidates))).indices.tolist()
        beam = [candidates[i] for i in kept]
        if trace is not None:
            trace.append(_step(candidates, parents, ranked.tolist(), kept))
        done = beam[:d.n_best] if early_stop else beam
        if all(h.ended for h in done):
            break
    return [_hypothesis(h, alpha) for h in beam if h.ended][:d.n_best]


def _normalised(h: _Open, alpha: float) -> torch.Tensor:
    """log p / |y|**alpha, |y| counting </s>."""
    return h.log_prob / torch.tensor(float(max(1, len(h.words)))).pow(alpha) if alpha else h.log_prob


def _step(candidates: list[_Open], parents: list[int], scores: list[float], kept: list[int]) -> dict:
    """One step of a trace: the beam after it, best first (each hypothesis's words so far, </s>
    last once ended, its score, log-probability, parent in the previous step's beam and newest
    attention row, or None), and every candidate ranked: its parent, newest word, score, whether
    it was kept."""
    def entry(i: int) -> dict:
        h = candidates[i]
        return {"words": list(h.words), "score": scores[i], "log_prob": float(h.log_prob), "ended": h.ended,
                "parent": parents[i], "attention": h.attention[-1].tolist() if h.attention else None}

    return {"beam": [entry(i) for i in kept],
            "candidates": [{"parent": parents[i], "word": h.words[-1], "score": scores[i], "kept": i in kept}
                           for i, h in enumerate(candidates)]}


def _hypothesis(h: _Open, alpha: float) -> Hypothesis:
    attention = [row.tolist() for row in h.attention] if h.attention else None
    return Hypothesis(h.words[:-1], float(_normalised(h, alpha)), float(h.log_prob), attention)


def trim(src: torch.Tensor, src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop trailing columns with no real word in any row (a slice of a longer batch)."""
    real = src_mask.any(0).nonzero()
    width = int(real[-1]) + 1 if real.numel() else src_mask.size(1)
    return src[:, :width], src_mask[:, :width]
