"""Agreement-based joint training of the two directions (Cheng et al., 2016, "Agreement-based
joint training for bidirectional attention-based neural machine translation").

The source→target and target→source models of one corpus train together, on the same batches,
and a third term pulls their attention towards the same word alignment:

    J(θ→, θ←) = Σ log p(y | x; θ→) + Σ log p(x | y; θ←) − λ Δ(α→, α←)       (λ: train.agreement)

α→ is the forward model's attention, row i the weights α_ij for target word y_i (the row of
</s> left out); α← the reverse model's, row j for source word x_j. Transposed, α← is a matrix over
the same word pairs as α→. Δ is summed over the target words of the batch (the NLL's unit):

    sos   Σ_i Σ_j (α→_ij − α←_ji)²           Cheng et al.'s "square of subtraction"
    mul   −Σ_i log Σ_j α→_ij α←_ji           their "multiplication", the log taken per target
                                             word here: each y_i must agree, not only the sum

`rnnsearch align --model DIR --reverse-model DIR/reverse` then reads both directions' attention.
"""

from __future__ import annotations

import torch

from rnnsearch.engine.data import Batch, Example

KINDS = ("sos", "mul")
_FLOOR = 1e-6  # keeps mul's log finite where a word's two attentions do not overlap at all


def reverse_examples(examples: list[Example]) -> list[Example]:
    """The same pairs the other way round: target words as the source, source words as the target.
    (A source reversed by data.reverse_source would be read backwards: the two do not combine.)"""
    return [Example(e.tgt, e.src, e.index) for e in examples]


def disagreement(forward: torch.Tensor, reverse: torch.Tensor, batch: Batch, reverse_batch: Batch,
                 kind: str) -> torch.Tensor:
    """Δ summed over the batch's target words.

    forward (B, T, S): α→ of `batch`, T = target words + </s>, S = source words;
    reverse (B, S + 1, T − 1): α← of `reverse_batch`, the same pairs reversed.
    """
    words = reverse_batch.src_mask  # (B, T − 1): target word i of each sentence is real
    pairs = words.unsqueeze(2) & batch.src_mask.unsqueeze(1)  # (B, T − 1, S) real word pairs
    there = forward[:, : words.size(1)].float()  # drop the </s> rows (and padding rows past them)
    back = reverse[:, : batch.src_mask.size(1)].transpose(1, 2).float()
    if kind == "sos":
        return ((there - back).square() * pairs).sum()
    if kind == "mul":
        overlap = (there * back * pairs).sum(-1)  # Σ_j α→_ij α←_ji, in [0, 1]
        return -(torch.log(overlap + _FLOOR) * words).sum()
    raise ValueError(f"train.agreement_loss must be one of {', '.join(KINDS)}, not {kind!r}")


class Pair(torch.nn.Module):
    """The two directions as one module, so that one optimizer (and one DistributedDataParallel)
    holds both; state dict keys are model.* (source→target) and reverse.* (target→source)."""

    def __init__(self, model: torch.nn.Module, reverse: torch.nn.Module):
        super().__init__()
        self.model, self.reverse = model, reverse

    def forward(self, batch: Batch, reverse_batch: Batch):
        """Teacher-forced packed logits and attention of both directions:
        (forward logits, α→, reverse logits, α←)."""
        logits, alpha = self.model(batch.src, batch.src_mask, batch.tgt_in, log_probs=False, packed=True)
        back, beta = self.reverse(reverse_batch.src, reverse_batch.src_mask, reverse_batch.tgt_in,
                                  log_probs=False, packed=True)
        return logits, alpha, back, beta
