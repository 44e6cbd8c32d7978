"""Scoring given translations: log p(y | x) by teacher forcing (forced decoding).

    log p(y | x) = Σ_i log p(y_i | y_<i, x)      over the target pieces y_1 .. y_T and </s>

For every (source, target) pair, batched by source length: the sum, the mean per token (T + 1
tokens, </s> counted), the score the search ranks by (the sum over (T + 1)**alpha, decode.alpha:
so scoring a beam's own output gives the beam's score), and on request each token's
log-probability and the attention rows. Uses: reranking an n-best list with a reverse model,
filtering a corpus by dual conditional cross-entropy (docs/usage.md, "Scoring").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

from rnnsearch.engine.data.parallel import Example, collate, iterate_sorted
from rnnsearch.engine.data.vocab import PAD


@dataclass
class Score:
    """log p(target | source) under one model, and what it is made of."""

    source: str
    target: str
    log_prob: float  # Σ_i log p(y_i | y_<i, x), </s> included
    tokens: int  # target pieces + 1 (</s>)
    normalised: float  # log_prob / tokens**alpha: the search's ranking score (alpha 0: log_prob)
    pieces: list[str]  # the target pieces, then "</s>"
    token_log_probs: Optional[list[float]] = None  # one per piece, </s> last (per_token=True)
    attention: Optional[list[list[float]]] = None  # one row per piece, </s> last (attention=True)

    @property
    def per_token(self) -> float:
        """The mean log-probability of a token: log_prob / tokens (the cross-entropy, negated)."""
        return self.log_prob / self.tokens

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "target": self.target, "log_prob": self.log_prob,
                               "per_token": self.per_token, "normalised": self.normalised,
                               "tokens": self.tokens}
        if self.token_log_probs is not None:
            out["pieces"], out["token_log_probs"] = self.pieces, self.token_log_probs
        if self.attention is not None:
            out["attention"] = self.attention
        return out


@torch.no_grad()
def score_pairs(model, pairs: list[tuple[list[int], list[int]]], batch_size: int = 64,
                per_token: bool = False, attention: bool = False, reverse_source: bool = False
                ) -> list[tuple[float, Optional[list[float]], Optional[list[list[float]]]]]:
    """(log p(y | x), per-token log-probabilities or None, attention rows or None) of each
    (source ids in reading order, target ids) pair under `model`, in order. An empty source,
    which the model cannot read, scores -inf."""
    model.eval()
    examples = [Example(src[::-1] if reverse_source else list(src), list(tgt), k)
                for k, (src, tgt) in enumerate(pairs)]
    out: list = [(float("-inf"), None, None)] * len(examples)
    todo = [k for k, e in enumerate(examples) if e.src]
    device = next(model.parameters()).device
    for group in iterate_sorted([examples[k].src for k in todo], batch_size):
        rows = [todo[g] for g in group]
        batch = collate([examples[k] for k in rows]).to(device)
        log_p, alpha_rows = model(batch.src, batch.src_mask, batch.tgt_in)  # (B, T+1, V), (B, T+1, S)
        token_lp = log_p.float().gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # log p(y_i | y_<i, x)
        token_lp = token_lp.masked_fill(batch.tgt_out == PAD, 0.0)
        totals = token_lp.sum(1).tolist()
        for r, k in enumerate(rows):
            n = len(examples[k].tgt) + 1
            att = None
            if attention and alpha_rows is not None:
                w = alpha_rows[r, :n, : len(examples[k].src)]
                att = (w.flip(-1) if reverse_source else w).tolist()
            out[k] = (totals[r], token_lp[r, :n].tolist() if per_token else None, att)
    return out


def ranked_score(log_prob: float, tokens: int, rows: Optional[list[list[float]]], d) -> float:
    """The search's ranking score of a finished hypothesis of `tokens` tokens (</s> counted), in
    fp32 as the search computes it: engine/accel/inflight.py's Ranking with d's (a DecodeConfig)
    alpha, length_penalty and coverage, the attention `rows` (one a token, </s> last) giving the
    coverage."""
    from rnnsearch.engine.accel.inflight import Ranking

    ranking = Ranking.of(d)
    score = ranking.normalised(torch.tensor(log_prob), torch.tensor(float(tokens)))
    if ranking.beta and rows:
        covered = torch.tensor(rows).sum(0, keepdim=True)
        score = score + ranking.coverage(covered, torch.ones_like(covered, dtype=torch.bool))[0]
    return float(score)
