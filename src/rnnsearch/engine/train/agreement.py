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

`AgreementTrainer` is engine/train/trainer.py's loop over the pair: it saves the target→source model in
<model_dir>/reverse, which `rnnsearch align --model DIR --reverse-model DIR/reverse` reads to
symmetrise both directions' attention. `rnnsearch.train` picks it when train.agreement is set.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from rnnsearch.config import Config, TrainConfig, config_from_dict
from rnnsearch.engine import distributed
from rnnsearch.engine.data.parallel import Batch, Example, ParallelData, collate, target_tokens
from rnnsearch.engine.data.vocab import save_tokenizers
from rnnsearch.engine.train.trainer import (
    Step,
    Trainer,
    TrainState,
    Validation,
    Window,
    evaluate_loss,
    packed_loss,
)
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

    def forward(self, batch: Batch, reverse_batch: Batch):
        """Teacher-forced packed logits and attention of both directions:
        (forward logits, α→, reverse logits, α←)."""
        logits, alpha = self.model(batch.src, batch.src_mask, batch.tgt_in, log_probs=False, packed=True)
        back, beta = self.reverse(reverse_batch.src, reverse_batch.src_mask, reverse_batch.tgt_in,
                                  log_probs=False, packed=True)
        return logits, alpha, back, beta


def pair_loss(net: torch.nn.Module, batch: Batch, reverse_batch: Batch, label_smoothing: float = 0.0,
              kind: str = "mul") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The summed loss of each direction, source→target on `batch` and target→source on
    `reverse_batch` (the same pairs reversed), and Δ, their attentions' disagreement, summed over
    the target words. `net`: a Pair (or DistributedDataParallel around one)."""
    logits, alpha, back, beta = net(batch, reverse_batch)
    return (packed_loss(logits, batch, label_smoothing), packed_loss(back, reverse_batch, label_smoothing),
            disagreement(alpha, beta, batch, reverse_batch, kind))


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


@dataclass
class AgreementState(TrainState):
    """TrainState with the reverse model's validation: saved and restored with the rest."""

    reverse_valid_loss: Optional[float] = None
    reverse_best: Optional[float] = None  # its lowest validation loss, that of its best weights

    def validation_outcome(self) -> dict:
        return {**super().validation_outcome(), "reverse_valid_loss": self.reverse_valid_loss,
                "reverse_best": self.reverse_best}

    def judge(self, record: dict, t: TrainConfig) -> list[bool]:
        return [*super().judge(record, t), self.reverse_improved()]

    def after_validation(self, record: dict, t: TrainConfig) -> bool:
        self.reverse_valid_loss = record.get("reverse_valid_loss")
        return super().after_validation(record, t)

    def reverse_improved(self) -> bool:
        """Whether the reverse model's validation loss just measured is its best yet. It is judged
        by its own loss, not by the forward model's score: the two directions peak at different
        validations, and a forward model whose BLEU has levelled off would otherwise freeze the
        reverse model's best weights at an early, poor point."""
        loss = self.reverse_valid_loss
        if loss is None or (self.reverse_best is not None and loss >= self.reverse_best):
            return False
        self.reverse_best = loss
        return True

    def stopping_loss(self) -> Optional[float]:
        """The higher of the two directions' validation losses: both must reach stop_valid_loss."""
        losses = [x for x in (self.valid_loss, self.reverse_valid_loss) if x is not None]
        return max(losses) if losses else None


@dataclass
class AgreementStep(Step):
    """A Step with the reverse model's summed loss and target tokens, and the summed Δ."""

    reverse_loss: torch.Tensor
    reverse_tokens: int
    disagreement: torch.Tensor


class AgreementWindow(Window):
    """A Window that also sums the reverse model's loss and tokens, and Δ."""

    def reset(self) -> None:
        super().reset()
        self.reverse_loss: torch.Tensor | float = 0.0
        self.reverse_tokens = 0
        self.disagreement: torch.Tensor | float = 0.0

    def add(self, step: Step) -> None:
        super().add(step)
        assert isinstance(step, AgreementStep)  # what AgreementTrainer.train_step returns
        self.reverse_loss = self.reverse_loss + step.reverse_loss
        self.reverse_tokens += step.reverse_tokens
        self.disagreement = self.disagreement + step.disagreement

    def sums(self) -> list[float]:
        return [*super().sums(), float(self.reverse_loss), float(self.disagreement)]

    def extra_means(self, sums: list[float]) -> dict[str, float]:
        # per target token, like the loss (the reverse model's target tokens are the source side's)
        return {"reverse_loss": sums[1] / max(self.reverse_tokens, 1),
                "disagreement": sums[2] / max(self.tokens, 1)}


class AgreementTrainer(Trainer):
    """Trainer of the pair: both directions on the same batches, one optimizer (and under torchrun
    one DistributedDataParallel) over their Pair; the objective J above, per target token."""

    state_class = AgreementState
    state: AgreementState

    def prepare_model_dir(self, cfg: Config, resume: bool) -> Config:
        cfg = super().prepare_model_dir(cfg, resume)
        if resume:
            for stale in (Path(cfg.model_dir) / REVERSE).glob(".*.tmp"):  # of a killed run
                stale.unlink()
        return cfg

    def write_tokenizers(self, tokenizers: tuple) -> None:
        """Also <model_dir>/reverse's: the reverse model reads the target side with the target's
        tokenizer. Its config.json lets every command load it."""
        super().write_tokenizers(tokenizers)
        (self.model_dir / REVERSE).mkdir(exist_ok=True)
        save_tokenizers(self.model_dir / REVERSE, self.cfg.vocab, *tokenizers[::-1])
        reverse_config(self.cfg).save(self.model_dir / REVERSE / "config.json")

    def build_models(self) -> None:
        """The model, then the reverse model, its validation data and the Pair the optimizer updates."""
        super().build_models()
        cfg = self.cfg
        self.reverse_model = build_model(cfg.model, len(self.tgt_tok), len(self.src_tok)).to(self.device)
        self.trained = Pair(self.model, self.reverse_model)
        self.reverse_valid: Optional[ParallelData] = None
        if self.valid is not None:
            self.reverse_valid = ParallelData(reverse_examples(self.valid.data.examples))
        self.models.append(self.reverse_model)
        self.model_dirs.append(self.model_dir / REVERSE)
        log.info("agreement-based joint training (λ=%g, %s): the target→source model is %s",
                 cfg.train.agreement, cfg.train.agreement_loss, self.model_dir / REVERSE)

    def new_window(self) -> Window:
        return AgreementWindow()

    def train_batch(self, batch: Iterable[int], epoch: int, pos: int) -> Optional[Step]:
        """`train_step` on the batch and on the same pairs reversed, each with its own word dropout."""
        reverse = reverse_examples(self.train_data.examples_at(batch))
        return self.train_step(self.batch_examples(batch, epoch, pos),
                               self.word_dropout(reverse, epoch, pos, stream="reverse"))

    def train_step(self, examples: list, reverse: Optional[list] = None) -> Optional[Step]:
        """One update of the pair: `examples` source→target and `reverse` (default: `examples`
        reversed, right where there is no word dropout) target→source."""
        t = self.cfg.train
        n_tok = target_tokens(examples)  # the global batch's, before sharding
        mine, real = distributed.shard(examples, self.ctx)
        batch = collate(mine).to(self.device)
        share = self.ctx.world * real  # as in Trainer.train_step
        reverse = reverse_examples(examples) if reverse is None else reverse
        n_back = target_tokens(reverse)
        reverse_batch = collate(distributed.shard(reverse, self.ctx)[0]).to(self.device)
        with self.autocast:
            loss, back, delta = pair_loss(self.net, batch, reverse_batch, t.label_smoothing, t.agreement_loss)
        objective = (loss + t.agreement * delta) * share / n_tok + back * share / n_back
        grad_norm = self.update(objective, loss, n_tok)
        if grad_norm is None:
            return None
        return AgreementStep(loss.detach() * real, n_tok, grad_norm, back.detach() * real, n_back,
                             delta.detach() * real)

    def validation_scores(self, valid: Validation) -> dict:
        """Also the reverse model's validation loss."""
        scores = super().validation_scores(valid)
        if self.reverse_valid is not None:
            scores["reverse_valid_loss"] = evaluate_loss(self.reverse_model, self.reverse_valid, self.device)
            self.reverse_model.train()
        return scores
