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

`Agreement` is the term engine/train/trainer.py's Trainer adds with train.agreement: it saves the
target→source model in <model_dir>/reverse, which `rnnsearch align --model DIR --reverse-model
DIR/reverse` reads to symmetrise both directions' attention.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import Config, config_from_dict
from rnnsearch.engine.data.parallel import Batch, Example, ParallelData, target_tokens
from rnnsearch.engine.data.vocab import save_tokenizers
from rnnsearch.engine.train.objective import LossTerm, Part, Update, evaluate_loss, packed_loss
from rnnsearch.nn.model import build_model

log = logging.getLogger("rnnsearch")

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

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, *, reverse: Batch,
                log_probs: bool = False, packed: bool = True):
        """Teacher-forced logits and attention of both directions, source→target on (src, src_mask,
        tgt_in) and target→source on `reverse`, the same pairs reversed, as the model's forward
        gives them: (forward logits, α→, reverse logits, α←)."""
        logits, alpha = self.model(src, src_mask, tgt_in, log_probs=log_probs, packed=packed)
        back, beta = self.reverse(reverse.src, reverse.src_mask, reverse.tgt_in, log_probs=log_probs,
                                  packed=packed)
        return logits, alpha, back, beta


REVERSE = "reverse"  # the target→source model: <model_dir>/reverse


def reverse_config(cfg: Config) -> Config:
    """The config.json of <model_dir>/reverse: the run's, each side's files swapped, so that
    `rnnsearch translate`/`align` load it like any model directory (it is not trained on its own)."""
    raw = cfg.to_dict()
    d = raw["data"]
    for split in ("train", "valid"):
        d[f"{split}_src"], d[f"{split}_tgt"] = d[f"{split}_tgt"], d[f"{split}_src"]
    raw["train"]["agreement"] = 0.0
    raw["model_dir"] = str(Path(cfg.model_dir) / REVERSE)
    return config_from_dict(raw, source=f"{raw['model_dir']}/config.json")


class Agreement(LossTerm):
    """The agreement term: the target→source model, trained beside the run's on the same batches
    (each direction with its own word dropout) by one optimizer (and under torchrun one
    DistributedDataParallel) over their Pair, J above per target token; saved in <model_dir>/reverse,
    validated by its own loss (reverse_valid_loss), its best weights kept by it too. The log line
    reports the reverse model's NLL per its target token (reverse_loss) and Δ per target token
    (disagreement)."""

    state = {"reverse_valid_loss": None, "reverse_best": None}  # reverse_best: its lowest validation loss

    def __init__(self, cfg: Config):
        self.t = cfg.train
        self.reverse_valid: Optional[ParallelData] = None

    def setup(self, trainer: Any) -> None:
        """The reverse model (and on a fresh run its directory: tokenizers, config.json), its
        validation data and the Pair the optimizer updates."""
        cfg, reverse_dir = trainer.cfg, trainer.model_dir / REVERSE
        if trainer.resume:
            for stale in reverse_dir.glob(".*.tmp"):  # of a killed run
                stale.unlink()
        elif trainer.ctx.main:  # the reverse model reads the target side with the target's tokenizer
            reverse_dir.mkdir(exist_ok=True)
            save_tokenizers(reverse_dir, cfg.vocab, trainer.tgt_tok, trainer.src_tok)
            reverse_config(cfg).save(reverse_dir / "config.json")
        self.reverse = build_model(cfg.model, len(trainer.tgt_tok), len(trainer.src_tok)).to(trainer.device)
        trainer.trained = Pair(trainer.model, self.reverse)
        if trainer.valid is not None:
            self.reverse_valid = ParallelData(reverse_examples(trainer.valid.data.examples))
        trainer.models.append(self.reverse)
        trainer.model_dirs.append(reverse_dir)
        log.info("agreement-based joint training (λ=%g, %s): the target→source model is %s",
                 self.t.agreement, self.t.agreement_loss, reverse_dir)

    def inputs(self, trainer: Any, update: Update) -> tuple[dict[str, Any], Any]:
        """The same pairs reversed, with a word dropout of their own, this rank's share collated."""
        reverse = reverse_examples(update.pairs)
        if update.epoch is not None:
            reverse = trainer.word_dropout(reverse, update.epoch, update.pos, stream="reverse")
        batch = trainer.shard(reverse)[0]
        return {"reverse": batch}, (batch, target_tokens(reverse))

    def loss(self, trainer: Any, update: Update, out: tuple, inputs: Any) -> Part:
        reverse_batch, reverse_tokens = inputs
        _, alpha, back, beta = out
        back = packed_loss(back, reverse_batch, self.t.label_smoothing)
        delta = disagreement(alpha, beta, update.batch, reverse_batch, self.t.agreement_loss)
        return Part(added=self.t.agreement * delta, own=(back, reverse_tokens),
                    sums={"reverse_loss": (back, reverse_tokens), "disagreement": (delta, update.tokens)})

    def validation_scores(self, trainer: Any) -> dict[str, float]:
        """The reverse model's validation loss."""
        if self.reverse_valid is None:
            return {}
        scores = {"reverse_valid_loss": evaluate_loss(self.reverse, self.reverse_valid, trainer.device)}
        self.reverse.train()
        return scores

    def judge(self, state: Any, record: dict) -> list[bool]:
        """Whether the reverse model's validation loss just measured is its best yet. It is judged
        by its own loss, not by the forward model's score: the two directions peak at different
        validations, and a forward model whose BLEU has levelled off would otherwise freeze the
        reverse model's best weights at an early, poor point."""
        terms = state.terms
        loss = terms["reverse_valid_loss"] = record.get("reverse_valid_loss")
        if loss is None or (terms["reverse_best"] is not None and loss >= terms["reverse_best"]):
            return [False]
        terms["reverse_best"] = loss
        return [True]
