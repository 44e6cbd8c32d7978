"""What a training run keeps and logs: `TrainState`, where it stands (saved with every checkpoint,
restored by --resume, its validation decisions: best score, patience, learning-rate decay); the
model files a checkpoint writes; `Step` and `Window`, the named sums of updates between two log
lines; `MetricsLog`, log.jsonl; and the validation set with its scores (loss, perplexity, BLEU)."""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Optional

import sacrebleu
import torch

from rnnsearch.config import Config, TrainConfig
from rnnsearch.engine import distributed
from rnnsearch.engine.checkpoint import save_weights
from rnnsearch.engine.data.pairs import corpus_files, load_pairs
from rnnsearch.engine.data.parallel import ParallelData
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.engine.train.objective import evaluate_loss
from rnnsearch.io import atomic_write_text

log = logging.getLogger("rnnsearch")


@dataclass
class TrainState:
    """Where a run stands: saved with every checkpoint (train_state.safetensors), restored by
    --resume. `validation_outcome()` is the part rank 0's validation decides for every rank;
    `terms` holds the loss terms' entries (LossTerm.state), saved beside the others."""

    step: int = 0
    epoch: int = 0
    position: int = 0  # the next batch of the epoch
    best: Optional[float] = None  # best validation score, higher is better (a loss is stored negated)
    bad_validations: int = 0  # validations in a row without improvement (train.patience)
    bad_validations_since_lr_decay: int = 0  # the same count, restarted by a decay (train.lr_patience)
    lr: float = 0.0
    tokens: int = 0  # target tokens trained on
    seconds: float = 0.0  # training wall-clock, summed over resumes
    valid_loss: Optional[float] = None
    terms: dict[str, Any] = field(default_factory=dict)

    FORMER_NAMES: ClassVar[dict[str, str]] = {"lr_bad": "bad_validations_since_lr_decay"}  # in saved states

    @classmethod
    def restored(cls, saved: dict[str, Any], lr: float, terms: Optional[dict[str, Any]] = None) -> TrainState:
        """The state saved in train_state.safetensors, with the entries of `terms` (names and
        initial values) among its keys; other keys this class does not have are ignored."""
        known = {f.name for f in fields(cls)} - {"terms"}
        saved = {cls.FORMER_NAMES.get(k, k): v for k, v in saved.items()}
        kept = {k: saved.get(k, v) for k, v in (terms or {}).items()}
        return cls(**{"lr": lr, **{k: v for k, v in saved.items() if k in known}, "terms": kept})

    def saved(self) -> dict[str, Any]:
        """What a checkpoint stores: the fields, then the terms' entries, all at the top level."""
        state = asdict(self)
        terms = state.pop("terms")
        return {**state, **terms}

    def validation_outcome(self) -> dict[str, Any]:
        return {k: copy.copy(getattr(self, k)) for k in ("best", "bad_validations",
                                                         "bad_validations_since_lr_decay", "lr",
                                                         "valid_loss", "terms")}

    def after_validation(self, record: dict, t: TrainConfig) -> bool:
        """Update the best score, patience counters and (on a plateau) the learning rate; True if
        the validation improved on the best."""
        self.valid_loss = record["valid_loss"]
        score = -record["valid_loss"] if t.valid_metric == "loss" else record[f"valid_{t.valid_metric}"]
        if self.best is None or score > self.best:
            self.best, self.bad_validations, self.bad_validations_since_lr_decay = score, 0, 0
            return True
        self.bad_validations += 1
        self.bad_validations_since_lr_decay += 1
        if t.lr_decay < 1.0 and self.bad_validations_since_lr_decay >= t.lr_patience:
            self.lr = max(t.min_lr, self.lr * t.lr_decay)
            self.bad_validations_since_lr_decay = 0
            log.info("no improvement for %d validations: lr -> %g", t.lr_patience, self.lr)
        return False

    def stop_reason(self, t: TrainConfig) -> Optional[str]:
        """Why training ends after the validation just done, if it does: patience run out, or the
        validation loss down to ``train.stop_valid_loss``."""
        if t.patience and self.bad_validations >= t.patience:
            return f"no improvement in {t.patience} validations"
        loss = self.stopping_loss()
        if t.stop_valid_loss and loss is not None and loss <= t.stop_valid_loss:
            return f"validation loss {loss:.4g} <= stop_valid_loss={t.stop_valid_loss}"
        return None

    def stopping_loss(self) -> Optional[float]:
        """The validation loss that ``train.stop_valid_loss`` is compared with: the highest of the
        models the run trains (a term's ``*valid_loss`` entries are its models'), so all reach it."""
        extra = (v for k, v in self.terms.items() if k.endswith("valid_loss"))
        losses = [x for x in (self.valid_loss, *extra) if x is not None]
        return max(losses) if losses else None



@dataclass
class Step:
    """What one update leaves for the log: its named sums (on the device, read only when logged),
    each with the tokens its mean is over ("loss" first: the NLL and the batch's target tokens),
    the terms' values, the target tokens and the gradient norm before clipping."""

    tokens: int
    grad_norm: torch.Tensor
    sums: dict[str, tuple[torch.Tensor, int]]
    values: dict[str, float] = field(default_factory=dict)



class Window:
    """The named sums and tokens since the last training log line (the sums kept on the device)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.sums: dict[str, torch.Tensor | float] = {}
        self.counts: dict[str, int] = {}  # the tokens of each sum
        self.values: dict[str, float] = {}
        self.tokens = 0
        self.t0 = time.time()

    def add(self, step: Step) -> None:
        for name, (value, tokens) in step.sums.items():
            self.sums[name] = self.sums.get(name, 0.0) + value
            self.counts[name] = self.counts.get(name, 0) + tokens
        self.values.update(step.values)
        self.tokens += step.tokens

    def means(self, ctx: distributed.Context, device: torch.device) -> dict[str, float]:
        """Each sum added up over the ranks, per token of its own; then the values."""
        totals = distributed.all_sum([float(v) for v in self.sums.values()], ctx, device)
        means = {k: s / max(self.counts[k], 1) for k, s in zip(self.sums, totals)}
        return {**means, **self.values}



def save_model_files(model: torch.nn.Module, model_dir: Path, best: bool, step: int, keep_last: int) -> None:
    """A model's weights: the best (when `best`), the last, and with `keep_last` a snapshot in
    checkpoints/ (the oldest pruned)."""
    meta = {"step": str(step)}
    if best:
        save_weights(model_dir / "model.safetensors", model, meta)
    save_weights(model_dir / "last.safetensors", model, meta)
    if keep_last:
        snaps = model_dir / "checkpoints"
        save_weights(snaps / f"step-{step:08d}.safetensors", model, meta)
        for old in sorted(snaps.glob("step-*.safetensors"))[: -keep_last]:
            old.unlink()



class MetricsLog:
    """Appends JSON lines to log.jsonl, and mirrors scalars to TensorBoard when available."""

    def __init__(self, model_dir: Path, tensorboard: bool, enabled: bool = True):
        self.path = model_dir / "log.jsonl"
        self.enabled = enabled
        self.tb = None
        if tensorboard and enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(model_dir / "tensorboard"))
            except Exception:  # tensorboard not installed: the JSONL log is enough
                self.tb = None

    def write(self, record: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k not in ("step", "epoch"):
                    self.tb.add_scalar(k, v, record.get("step", 0))
            self.tb.flush()

    def rewind(self, step: int) -> int:
        """Drop the records of steps after `step`, the checkpoint a run resumes from: the steps a
        killed run took past its last save are trained again, and logged again. Returns how many."""
        if not self.enabled or not self.path.exists():
            return 0
        lines = [x for x in self.path.read_text(encoding="utf-8").splitlines() if x.strip()]
        kept = [x for x in lines if _logged_step(x) <= step]  # a line torn by the kill goes too
        if len(kept) < len(lines):
            atomic_write_text(self.path, "".join(x + "\n" for x in kept))
        return len(lines) - len(kept)



def _logged_step(line: str) -> float:
    try:
        return json.loads(line).get("step", 0)
    except json.JSONDecodeError:
        return math.inf



@dataclass
class Validation:
    """The validation set: encoded pairs, and the raw text of the same pairs for BLEU."""

    data: ParallelData
    src: list[str]
    tgt: list[str]



def validation_set(cfg: Config, src_tok, tgt_tok) -> Optional[Validation]:
    """The validation pairs, encoded in memory with their text kept for BLEU; None without any."""
    valid = load_pairs(cfg, "valid")
    if valid is None:
        return None
    d = cfg.data
    files = corpus_files(cfg, "valid")  # not None: load_pairs read them
    data = ParallelData.encode(valid[0], valid[1], src_tok, tgt_tok, 10 ** 6, d.reverse_source, d.lowercase,
                               name="valid", files=files.describe() if files else "")
    keep = [e.index for e in data.examples]
    return Validation(data, [valid[0][i] for i in keep], [valid[1][i] for i in keep])



def validation_scores(translator: Translator, valid: Validation, cfg: Config, with_bleu: bool,
                      with_chrf: bool = False) -> dict:
    """Validation loss and perplexity, and (with_bleu) BLEU, (with_chrf) chrF of the first
    data.valid_bleu_sentences sentences decoded with beam train.valid_beam."""
    out = {"valid_loss": evaluate_loss(translator.model, valid.data, translator.device)}
    out["valid_ppl"] = math.exp(min(out["valid_loss"], 50))
    if with_bleu or with_chrf:
        n = min(len(valid.src), cfg.data.valid_bleu_sentences)
        hyps = translator.translate(valid.src[:n], beam=cfg.train.valid_beam, attention=False)
        texts, refs = [h.text for h in hyps], [valid.tgt[:n]]
        if with_bleu:
            out["valid_bleu"] = sacrebleu.corpus_bleu(texts, refs, tokenize=cfg.data.bleu_tokenize).score
        if with_chrf:
            out["valid_chrf"] = sacrebleu.corpus_chrf(texts, refs).score
    translator.model.train()
    return out

