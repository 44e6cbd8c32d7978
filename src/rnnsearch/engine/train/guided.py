"""Guided alignment training (Chen et al. 2016; Liu et al. 2016, "Neural machine translation with
supervised attention"): the attention is taught a word aligner's links while the model learns to
translate. With train.guided_alignment set, the objective per target token is

    J = −log p(y | x) + w_t · G(α, A)                w_t = weight · ½^(step / half_life)

A is the gold attention of a pair: for each target token y_i with links, row i puts 1/n on each of
the n source tokens it is linked to; tokens with no link (and the </s> row: the source has no end
token to link it to) have no row and add nothing. G is summed over the rows that have one:

    ce     −Σ_i Σ_j A_ij log α_ij                    cross-entropy (Garg et al. 2019; Marian's "ce")
    mse    Σ_i Σ_j (α_ij − A_ij)²                    squared error (Chen et al. 2016)

**The shift.** RNNsearch scores the source for y_i from s_{i−1} (e_ij = a(s_{i−1}, h_j)), and
y_i is read only one step later, into s_{i+1}: α_i is the attention that *predicts* y_i. With
train.guided_alignment_shift 0, α_i is guided to y_i's links: the row the decoder uses to produce
the word, the row `translate --alignment` reads (its --alignment-shift 0). With shift 1, α_{i+1}
is: the attention scored from s_i, the state that emitted y_i (the row a model that aligns "one
step late" puts on y_i's source; Garg et al. see this in Transformers). Pick the shift the
held-out gold links prefer, and read links out of the model with the same shift.

**The alignment head.** With model.alignment_head the loss guides the head's β instead (nn/alignment_head.py):
β_i is scored from s_{i+1}, the first state that has read y_i, so the row of a word knows the word
(no guided row of the attention does: the shift cannot give it that). The attention is then
trained by the translation loss alone, as in the paper; the shift must be 0.

The links come from the training pairs' alignment (engine/align/eflomal.py): "auto" uses `rnnsearch data
align`'s eflomal links (made on first use, cached beside the prepared split); a path reads a
Pharaoh file of word links, a line a corpus line, mapped onto the model's tokens the same way.
Both index the split's tokens exactly, source reversed where data.reverse_source is.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
import torch

from rnnsearch.config import Config
from rnnsearch.engine.align.eflomal import Alignment, align_prepared, links_from_file, open_alignment
from rnnsearch.engine.data.prepared import PreparedData
from rnnsearch.engine.distributed import on_main_rank
from rnnsearch.engine.train.objective import LossTerm, Part, Update
from rnnsearch.io import DataError

log = logging.getLogger("rnnsearch")

LOSSES = ("ce", "mse")
_FLOOR = 1e-9  # keeps log α finite where the attention has put nothing on a linked token


def gold_attention(links: list[Optional[np.ndarray]], src_len: int, rows: int,
                   shift: int = 0) -> torch.Tensor:
    """A (B, rows, src_len): for pair b, the (m, 2) token links (source position, target
    position) as row-normalised gold attention, a link of target token t in row t + shift; rows
    without a link stay zero. `rows` is the decoder's steps (target tokens + </s>), so row
    len(target) (the </s> row) exists for shift 1. None: a pair with no links at all."""
    gold = np.zeros((len(links), rows, src_len), dtype=np.float32)
    for b, pair in enumerate(links):
        if pair is not None and len(pair):
            src, tgt = pair[:, 0].astype(np.int64), pair[:, 1].astype(np.int64) + shift
            gold[b, tgt, src] = 1.0
    total = gold.sum(-1, keepdims=True)
    np.divide(gold, total, out=gold, where=total > 0)
    return torch.from_numpy(gold)


def guided_loss(alpha: torch.Tensor, gold: torch.Tensor, kind: str = "ce") -> torch.Tensor:
    """G summed over the rows of `gold` (B, T, S) that have links; `alpha` (B, T, S) the model's
    attention (padding rows and columns hold zeros in both)."""
    alpha = alpha.float()
    if kind == "ce":
        return -(gold * torch.log(alpha + _FLOOR)).sum()
    if kind == "mse":
        linked = (gold.sum(-1, keepdim=True) > 0).float()
        return ((alpha - gold).square() * linked).sum()
    raise ValueError(f"train.guided_alignment_loss must be one of {', '.join(LOSSES)}, not {kind!r}")


def guide_weight(weight: float, half_life: int, step: int) -> float:
    """w_t: `weight` halved every `half_life` steps (constant with half_life 0)."""
    return weight * 0.5 ** (step / half_life) if half_life else weight


def training_links(source: str, data: PreparedData, src_tok: Any, tgt_tok: Any) -> Alignment:
    """The alignment train.guided_alignment names: "auto" (eflomal, made or reused) or a links file."""
    if source == "auto":
        return align_prepared(data, src_tok, tgt_tok)
    return links_from_file(data, src_tok, tgt_tok, source)


class GuidedAlignment(LossTerm):
    """The guided-alignment term: rank 0 finds or makes the training pairs' token links, every
    rank maps them, and each update adds w_t · G (per target token, like the NLL) to the objective;
    the log line reports G per target token (guided_loss) and w_t (guided_weight)."""

    def __init__(self, cfg: Config):
        self.t, self.head = cfg.train, cfg.model.alignment_head != "none"  # guide the head's β, not α
        self.alignment: Optional[Alignment] = None

    def setup(self, trainer: Any) -> None:
        """The links of the training pairs (train.guided_alignment): made or read by rank 0, mapped
        by every rank; a bad links file stops every rank with one message."""
        t, train = self.t, trainer.train_data
        source = t.guided_alignment
        assert source and isinstance(train, PreparedData)  # config validation requires both
        path = on_main_rank(trainer.ctx, lambda: training_links(source, train, trainer.src_tok,
                                                                trainer.tgt_tok).path)
        self.alignment = open_alignment(path)
        if len(self.alignment) != len(train):
            raise DataError(f"{path}: links of {len(self.alignment)} pairs, the split has {len(train)}")
        log.info("guided alignment (%s, weight %g, %s): links from %s", t.guided_alignment_loss,
                 t.guided_alignment_weight, "the alignment head" if self.head
                 else f"attention, shift {t.guided_alignment_shift}", path)

    def inputs(self, trainer: Any, update: Update) -> tuple[dict[str, Any], Any]:
        """The head's β asked of the forward pass (with one); the gold attention A of this rank's
        pairs and the weight w_t."""
        assert self.alignment is not None  # made by setup
        t, batch = self.t, update.batch
        links = [self.alignment.for_line(e.index) for e in update.mine]
        gold = gold_attention(links, batch.src.size(1), batch.tgt_in.size(1), t.guided_alignment_shift)
        weight = guide_weight(t.guided_alignment_weight, t.guided_alignment_half_life, trainer.state.step)
        return {"alignment_head": self.head}, (gold.to(trainer.device, non_blocking=True), weight)

    def loss(self, trainer: Any, update: Update, out: tuple, inputs: Any) -> Part:
        gold, weight = inputs
        guided = guided_loss(out[2] if self.head else out[1], gold, self.t.guided_alignment_loss)
        return Part(added=weight * guided, sums={"guided_loss": (guided, update.tokens)},
                    values={"guided_weight": weight})
