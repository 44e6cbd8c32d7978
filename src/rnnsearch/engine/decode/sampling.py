"""Sampling translations (``decode.sample``): y_i drawn from p(y_i | y_<i, x), not searched for.

For back-translation (Edunov et al. 2018, "Understanding Back-Translation at Scale": sampled
synthetic sources train better models than beam-searched ones) and for looking at what a model
believes beyond its one best translation. At every step each row's distribution is reshaped, then
a word drawn from it:

    temperature T   p^(1/T), renormalised: T < 1 sharpens, T > 1 flattens (softmax(logits / T))
    top_k K         only the K most probable words (0: all)
    top_p P         only the smallest set of most probable words whose probability reaches P
                    (nucleus sampling, Holtzman et al. 2020; 1.0: all)

<s> and <pad> are never drawn, and </s> is forced at the sentence's length limit, as in the search.
Each source is sampled ``decode.sample`` times; sentences are batched, every copy a row. The draws
come from one generator seeded with ``decode.seed``, so the same input and options give the same
samples. A sample's log_prob is under the model itself (not the reshaped distribution), its score
that over its length penalty (decode.alpha, length_penalty), as the search scores hypotheses.
"""

from __future__ import annotations

import torch

from rnnsearch.config import DecodeConfig
from rnnsearch.engine.decode.scoring import ranked_score
from rnnsearch.nn.model import BOS, EOS, PAD
from rnnsearch.nn.search import Hypothesis


def reshape(log_p: torch.Tensor, temperature: float = 1.0, top_k: int = 0,
            top_p: float = 1.0) -> torch.Tensor:
    """The probabilities (rows, V) to draw from: log_p's distribution at `temperature`, cut to its
    `top_k` most probable words and to the nucleus of mass `top_p`, renormalised."""
    logits = log_p / temperature
    if 0 < top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, -1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(-1, descending=True)
        above = sorted_p.cumsum(-1) - sorted_p  # the mass of the words ranked above each
        outside = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, order, above >= top_p)
        probs = probs.masked_fill(outside, 0.0)  # the first word is always inside
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


@torch.no_grad()
def sample(model, src: torch.Tensor, src_mask: torch.Tensor, d: DecodeConfig, generator: torch.Generator,
           with_attention: bool = True) -> list[list[Hypothesis]]:
    """``d.sample`` translations drawn for each source of the batch (src, src_mask (B, S))."""
    n, B = d.sample, src.size(0)
    enc = model.encode(src, src_mask)
    rows = torch.arange(B, device=src.device).repeat_interleave(n)  # every sample a row
    enc = enc.index_select(rows)
    state, y = enc.state, torch.full((B * n,), BOS, dtype=torch.long, device=src.device)
    limit = (src_mask.sum(1).float() * d.max_len_ratio).long().add(10).repeat_interleave(n)
    log_prob = torch.zeros(B * n, device=src.device)
    ended = torch.zeros(B * n, dtype=torch.bool, device=src.device)
    words: list[torch.Tensor] = []
    attention: list[torch.Tensor] = []
    while not bool(ended.all()):
        log_p, state, alpha = model.step(enc, state, y)
        log_p = log_p.float()
        log_p[:, [BOS, PAD]] = float("-inf")
        probs = reshape(log_p, d.temperature, d.top_k, d.top_p)
        drawn = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        drawn = torch.where(len(words) >= limit, EOS, drawn)  # the length limit: </s>
        drawn = torch.where(ended, PAD, drawn)  # an ended sample stays as it is
        log_prob += torch.where(ended, 0.0, log_p.gather(1, drawn.clamp(min=0).unsqueeze(1)).squeeze(1))
        words.append(drawn)
        if alpha is not None and with_attention:
            attention.append(alpha)
        ended = ended | (drawn == EOS)
        y = drawn
    return _hypotheses(torch.stack(words, 1), log_prob, attention, src_mask.sum(1).tolist(), n, d)


def _hypotheses(words: torch.Tensor, log_prob: torch.Tensor, attention: list[torch.Tensor],
                src_len: list[int], n: int, d: DecodeConfig) -> list[list[Hypothesis]]:
    """Each row's words (up to </s>), scores and attention rows, n rows a sentence."""
    out: list[list[Hypothesis]] = []
    att = torch.stack(attention, 1) if attention else None  # (rows, steps, S)
    for r, (seq, lp) in enumerate(zip(words.tolist(), log_prob.tolist())):
        length = seq.index(EOS) + 1  # </s> counted, as the search counts it
        score = ranked_score(lp, length, None, d)  # no coverage penalty: nothing searched for
        rows = att[r, :length, : src_len[r // n]].tolist() if att is not None else None
        if r % n == 0:
            out.append([])
        out[-1].append(Hypothesis(seq[:length - 1], score, lp, rows))
    return out
