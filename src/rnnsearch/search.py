"""Greedy and batched beam search.

Sentences and beams are flattened into one batch of B*K rows; the encoder output
(annotations and precomputed keys) is expanded to K rows once, never recomputed.

A hypothesis that emits </s> stays in its beam, frozen: from then on it can only
"extend" with <pad> at zero cost, so its score and length stop changing. That makes
the finished-hypothesis bookkeeping a mask (no Python per sentence per step), and
the loop stops as soon as every row has finished. Candidates are ranked by the
length-normalised score  log p / len**alpha  at every step (alpha=0: raw log-prob),
so finished and growing hypotheses compete fairly. With K = 1 this is greedy search.

Each sentence has its own length limit (ratio * source length + 10, where </s> is
forced), so the result for a sentence does not depend on the batch it is decoded in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .vocab import BOS, EOS, PAD


@dataclass
class Hypothesis:
    tokens: list[int]  # without <s>, without </s>
    score: float  # length-normalised log-probability (the ranking score)
    log_prob: float  # total log-probability, </s> included
    attention: Optional[list[list[float]]]  # one row per output token (</s> last), or None


@torch.no_grad()
def beam_search(model, src: torch.Tensor, src_mask: torch.Tensor, beam: int = 5, alpha: float = 1.0,
                max_len_ratio: float = 2.0, n_best: int = 1, with_attention: bool = True,
                ) -> list[list[Hypothesis]]:
    """Decode a batch of sources; returns, per sentence, its `n_best` hypotheses best first.

    src, src_mask: (B, S). The model must provide ``encode`` and ``step``.
    """
    B, K = src.size(0), beam
    device = src.device
    enc = model.encode(src, src_mask)
    src_len = src_mask.sum(1)
    limit = (src_len.float() * max_len_ratio).long() + 10  # tokens before </s> is forced
    rows = torch.arange(B, device=device).repeat_interleave(K)
    enc = enc.index_select(rows)
    limit = limit.repeat_interleave(K)
    state = enc.state
    y = torch.full((B * K,), BOS, dtype=torch.long, device=device)
    # Only beam 0 is live at the start, so the K copies do not pick the same words.
    scores = torch.full((B, K), float("-inf"), device=device)
    scores[:, 0] = 0.0
    scores = scores.view(-1)
    lengths = torch.zeros(B * K, dtype=torch.long, device=device)
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    tokens_hist, back_hist, attn_hist = [], [], []
    V = None
    max_steps = int(limit.max()) + 1
    for _ in range(max_steps):
        log_p, new_state, attn = model.step(enc, state, y)
        V = log_p.size(-1)
        log_p = log_p.float()
        # Force </s> where a hypothesis reached its sentence's length limit.
        at_limit = (lengths >= limit) & ~finished
        if at_limit.any():  # </s> keeps its real log-probability, everything else is barred
            eos = log_p[:, EOS].clone()
            log_p[at_limit] = float("-inf")
            log_p[:, EOS] = eos
        # Finished hypotheses extend only with <pad>, at no cost.
        log_p[finished] = float("-inf")
        log_p[finished, PAD] = 0.0
        log_p[:, PAD] = torch.where(finished, 0.0, float("-inf"))
        log_p[:, BOS] = float("-inf")
        cand = scores.unsqueeze(1) + log_p  # (B*K, V) total log-prob
        cand_len = (lengths + (~finished).long()).unsqueeze(1).float()
        ranked = cand / cand_len.clamp(min=1).pow(alpha) if alpha else cand
        ranked = ranked.view(B, K * V)
        top_rank, top = ranked.topk(K, dim=1)
        origin = top // V  # which beam each survivor extends
        word = top % V
        flat_origin = (origin + torch.arange(B, device=device).unsqueeze(1) * K).view(-1)
        word = word.view(-1)
        scores = cand.view(B, K * V).gather(1, top).view(-1)
        was_finished = finished.index_select(0, flat_origin)
        lengths = lengths.index_select(0, flat_origin) + (~was_finished).long()
        finished = was_finished | (word == EOS)
        state = new_state.index_select(0, flat_origin)
        tokens_hist.append(word)
        back_hist.append(flat_origin)
        if with_attention and attn is not None:
            attn_hist.append(attn.index_select(0, flat_origin))
        y = word
        if bool(finished.all()):
            break
    return _collect(B, K, scores, lengths, alpha, n_best, tokens_hist, back_hist, attn_hist, src_len)


def _collect(B, K, scores, lengths, alpha, n_best, tokens_hist, back_hist, attn_hist, src_len):
    """Trace back pointers from the final beams to build each sentence's n-best list."""
    norm = scores / lengths.clamp(min=1).float().pow(alpha) if alpha else scores
    norm = norm.view(B, K)
    order = norm.argsort(dim=1, descending=True)
    steps = len(tokens_hist)
    tokens = torch.stack(tokens_hist).cpu()  # (steps, B*K)
    backs = torch.stack(back_hist).cpu()
    attn = torch.stack(attn_hist).cpu() if attn_hist else None  # (steps, B*K, S)
    norm, scores, lengths, order = norm.cpu(), scores.cpu(), lengths.cpu(), order.cpu()
    results = []
    for b in range(B):
        hyps = []
        for rank in range(n_best):
            k = int(order[b, rank])
            row = b * K + k
            toks, rows_attn = [], []
            for t in range(steps - 1, -1, -1):
                tok = int(tokens[t, row])
                if tok != PAD:
                    toks.append(tok)
                    if attn is not None:
                        rows_attn.append(attn[t, row, : int(src_len[b])].tolist())
                row = int(backs[t, row])
            toks.reverse()
            rows_attn.reverse()
            if toks and toks[-1] == EOS:
                toks = toks[:-1]
            hyps.append(Hypothesis(toks, float(norm[b, k]), float(scores[b * K + k]),
                                   rows_attn if attn is not None else None))
        results.append(hyps)
    return results


def greedy_search(model, src, src_mask, max_len_ratio: float = 2.0, with_attention: bool = True):
    """Beam search with K = 1: the argmax word at every step."""
    return [h[0] for h in beam_search(model, src, src_mask, beam=1, alpha=0.0,
                                      max_len_ratio=max_len_ratio, with_attention=with_attention)]
