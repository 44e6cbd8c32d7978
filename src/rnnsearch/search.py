"""Greedy and batched beam search.

Sentences and beams are flattened into one batch of B*K rows; the encoder output
(annotations and precomputed keys) is expanded to K rows once, never recomputed.

A hypothesis that emits </s> stays in its beam, frozen: from then on it can only
"extend" with <pad> at zero cost, so its score and length stop changing. That makes
the finished-hypothesis bookkeeping a mask (no Python per sentence per step). A sentence
whose K hypotheses have all finished leaves the batch, so later steps run on the
sentences still decoding, and the loop stops when none is. Candidates are ranked by the
length-normalised score  log p / len**alpha  at every step (alpha=0: raw log-prob),
so finished and growing hypotheses compete fairly. With K = 1 this is greedy search.

Per step, each hypothesis first keeps its own K best words (all its extensions have the
same length, so that order is the order of their normalised scores); the K survivors of a
sentence are then chosen among its K x K candidates. That is exact, and all the
bookkeeping runs on (rows, K) tensors instead of (rows, vocabulary).

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
    neg_inf = float("-inf")
    src_len = src_mask.sum(1)
    limit = (src_len.float() * max_len_ratio).long() + 10  # tokens before </s> is forced
    rows = torch.arange(B * K, device=device)
    # What the live sentences carry, K rows each; `live` maps them to their rows of B*K.
    live = rows
    enc = model.encode(src, src_mask).index_select(rows // K)
    state = enc.state
    limit = limit.repeat_interleave(K)
    y = torch.full((B * K,), BOS, dtype=torch.long, device=device)
    # Only beam 0 is live at the start, so the K copies do not pick the same words.
    scores = torch.full((B, K), neg_inf, device=device)
    scores[:, 0] = 0.0
    scores = scores.view(-1)
    lengths = torch.zeros(B * K, dtype=torch.long, device=device)
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    # Every sentence's final scores and lengths, written when it leaves the batch.
    final_scores, final_lengths = scores.clone(), lengths.clone()
    tokens_hist, back_hist, attn_hist = [], [], []
    max_steps = int(limit.max()) + 1
    for _ in range(max_steps):
        n = live.numel() // K  # sentences still decoding
        log_p, new_state, attn = model.step(enc, state, y)
        log_p = log_p.float()
        log_p[:, BOS] = neg_inf  # never generated
        log_p[:, PAD] = neg_inf  # only as the frozen extension of a finished hypothesis
        top_lp, top_word = log_p.topk(K, dim=1)  # each hypothesis's own K best words
        # At the length limit the one candidate is </s> with its real log-probability; a
        # finished hypothesis has one candidate too, <pad> at no cost.
        at_limit = (lengths >= limit) & ~finished
        single = at_limit | finished
        first_lp = torch.where(finished, 0.0, torch.where(at_limit, log_p[:, EOS], top_lp[:, 0]))
        first_word = torch.where(finished, PAD, torch.where(at_limit, EOS, top_word[:, 0]))
        cand_lp = torch.cat([first_lp.unsqueeze(1), top_lp[:, 1:].masked_fill(single.unsqueeze(1), neg_inf)], 1)
        cand_word = torch.cat([first_word.unsqueeze(1), top_word[:, 1:]], 1)
        cand = scores.unsqueeze(1) + cand_lp  # (n*K, K) total log-prob
        cand_len = (lengths + (~finished).long()).unsqueeze(1).float()
        ranked = cand / cand_len.clamp(min=1).pow(alpha) if alpha else cand
        top = ranked.view(n, K * K).topk(K, dim=1).indices
        origin = (top // K + torch.arange(n, device=device).unsqueeze(1) * K).view(-1)  # which row each extends
        word = cand_word.view(n, K * K).gather(1, top).view(-1)
        scores = cand.view(n, K * K).gather(1, top).view(-1)
        was_finished = finished.index_select(0, origin)
        lengths = lengths.index_select(0, origin) + (~was_finished).long()
        finished = was_finished | (word == EOS)
        state = new_state.index_select(0, origin)
        # History over all B*K rows: sentences that left the batch extend with <pad> in place.
        step_words = torch.full((B * K,), PAD, dtype=torch.long, device=device)
        step_back = rows.clone()
        step_words[live] = word
        step_back[live] = live.index_select(0, origin)
        tokens_hist.append(step_words)
        back_hist.append(step_back)
        if with_attention and attn is not None:
            step_attn = attn.new_zeros(B * K, attn.size(1))
            step_attn[live] = attn.index_select(0, origin)
            attn_hist.append(step_attn)
        y = word
        # A sentence whose K hypotheses are all finished (or dead, -inf) can no longer change.
        done = (finished | (scores == neg_inf)).view(n, K).all(1)
        if bool(done.any()):
            final_scores[live], final_lengths[live] = scores, lengths
            if bool(done.all()):
                break
            keep = (~done).repeat_interleave(K).nonzero().squeeze(1)
            live, enc, state, y = live[keep], enc.index_select(keep), state[keep], y[keep]
            scores, lengths, finished, limit = scores[keep], lengths[keep], finished[keep], limit[keep]
    final_scores[live], final_lengths[live] = scores, lengths
    return _collect(B, K, final_scores, final_lengths, alpha, n_best, tokens_hist, back_hist, attn_hist, src_len)


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
