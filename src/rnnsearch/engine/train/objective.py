"""The training objective: the summed negative log-likelihood of the target words (the paper's
eq. (13) summed over a batch, its mean over target tokens the loss every log line reports), and
`LossTerm`, the interface of the terms a run adds to it (guided alignment, engine/train/guided.py;
agreement of the two directions, engine/train/agreement.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional

import torch

from rnnsearch.engine.data.parallel import Batch, Example, ParallelData, collate, target_tokens
from rnnsearch.engine.data.vocab import PAD
from rnnsearch.nn.attention import at_least_fp32


class _SummedCrossEntropy(torch.autograd.Function):
    """Σ_rows −[(1−ε) log p(y) + ε/V Σ_v log p(v)] with p = softmax(logits), fused.

    The gradient, softmax − (1−ε)·onehot − ε/V, is formed in the forward pass in the memory
    of the log-probabilities, so backward is one scaling of it; log_softmax + nll_loss instead
    zero-fill a (rows, V) matrix for nll's gradient and run log_softmax's backward over it
    (docs/benchmarks.md, "CPU changes measured", has the measured gain).
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, smoothing: float) -> torch.Tensor:
        log_p = torch.log_softmax(logits, -1)
        rows = torch.arange(target.numel(), device=target.device)
        loss = -log_p[rows, target].sum()
        if smoothing:  # ε × the mean of -log p(v) over the vocabulary
            loss = (1 - smoothing) * loss - smoothing * log_p.mean(-1).sum()
        grad = log_p.exp_()  # softmax, in the memory of log p
        if smoothing:
            grad.sub_(smoothing / logits.size(-1))
        grad[rows, target] -= 1 - smoothing
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (grad_logits,) = ctx.saved_tensors
        return grad_logits * grad, None, None


def sequence_loss(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Summed cross-entropy over real target tokens.

    logits (B, T, V) with target (B, T), padding included; or logits already packed to the
    real tokens, (N, V) with target (N,) (``model(..., packed=True)``).
    """
    logits = at_least_fp32(logits.reshape(-1, logits.size(-1)))
    target = target.reshape(-1)
    real = target != PAD
    if not bool(real.all()):
        logits, target = logits[real], target[real]
    return _SummedCrossEntropy.apply(logits, target, float(label_smoothing))


def batch_loss(net: torch.nn.Module, batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """The summed loss of a collated batch: teacher-forced logits on the real target tokens only
    (``packed=True``), then :func:`sequence_loss`."""
    logits, _ = net(batch.src, batch.src_mask, batch.tgt_in, log_probs=False, packed=True)
    return packed_loss(logits, batch, label_smoothing)


def packed_loss(logits: torch.Tensor, batch, label_smoothing: float = 0.0) -> torch.Tensor:
    """:func:`sequence_loss` of packed logits (N, V) against the batch's N real target tokens."""
    return sequence_loss(logits, batch.tgt_out[batch.tgt_out != PAD], label_smoothing)


@torch.no_grad()
def evaluate_loss(model, data: ParallelData, device, batch_size: int = 64) -> float:
    """Mean per-token negative log-likelihood (teacher forcing, no dropout)."""
    model.eval()
    total, tokens = 0.0, 0
    order = sorted(range(len(data)), key=lambda i: len(data.examples[i].tgt))
    for start in range(0, len(order), batch_size):
        examples = [data.examples[i] for i in order[start:start + batch_size]]
        batch = collate(examples).to(device)
        logits, _ = model.logits(batch.src, batch.src_mask, batch.tgt_in)
        total += float(sequence_loss(logits, batch.tgt_out))
        tokens += target_tokens(examples)
    return total / max(tokens, 1)



@dataclass
class Update:
    """What one update knows of its batch, for the terms to read: the global batch's pairs as
    drawn (`pairs`, before word dropout), the target tokens of the global batch trained on
    (`tokens`), this rank's share of it (`mine`), collated (`batch`), and where the batch is in
    the run (`epoch` None: outside an epoch, no word dropout)."""

    pairs: list[Example]
    tokens: int
    mine: list[Example]
    batch: Batch
    epoch: Optional[int] = None
    pos: int = 0


@dataclass
class Part:
    """A term's share of one update. The objective per target token (the unit of the NLL) is

        (NLL + Σ_terms added) / target tokens + Σ_terms own[0] / own[1]

    (`own`: a sum with the tokens it is averaged over, e.g. the reverse model's NLL). `sums` are
    what the log line reports, each a summed value with the tokens its mean is taken over, and
    `values` are reported as they are (those of the latest update)."""

    added: Optional[torch.Tensor] = None
    own: Optional[tuple[torch.Tensor, int]] = None
    sums: dict[str, tuple[torch.Tensor, int]] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)


def objective(loss: torch.Tensor, parts: list[Part], share: int, tokens: int) -> torch.Tensor:
    """What backward runs from: the summed NLL and the terms' parts, divided by target tokens.
    `share`: ranks × (1 if this rank has pairs, else 0): DDP averages the ranks' gradients, so
    the sum over ranks divided by `tokens` (the global batch's) is the batch mean."""
    total = loss
    for part in parts:
        if part.added is not None:
            total = total + part.added
    out = total * share / tokens
    for part in parts:
        if part.own is not None:
            out = out + part.own[0] * share / part.own[1]
    return out


class LossTerm:
    """A term of the training objective beside the NLL. The Trainer (engine/train/trainer.py) calls

        setup(trainer)                 once, after the model is built: what the term reads (links),
                                       the models it adds (to trainer.models, trainer.model_dirs)
        inputs(trainer, update)        each update, before the forward pass: keyword arguments of
                                       `trainer.net`'s call, and what `loss` reads
        loss(trainer, update, out, x)  each update, under autocast: a Part, from the net's outputs
                                       `out` (logits, α, ...) and `x`, what `inputs` gave
        validation_scores(trainer)     each validation, on rank 0: scores for the log record
        judge(state, record)           after it: whether each model the term added improved

    each a no-op here. `state` names the term's entries of TrainState.terms (saved with every
    checkpoint) with their initial values; an entry named ``*valid_loss`` is the validation loss
    of a model the run trains, which train.stop_valid_loss must also reach."""

    state: ClassVar[dict[str, Any]] = {}

    def setup(self, trainer: Any) -> None:
        """Read what the term needs and add its models (to `trainer.models` and `model_dirs`)."""

    def inputs(self, trainer: Any, update: Update) -> tuple[dict[str, Any], Any]:
        """Keyword arguments for the forward pass, and what `loss` reads."""
        return {}, None

    def loss(self, trainer: Any, update: Update, out: tuple, inputs: Any) -> Part:
        """The term's part of the update."""
        return Part()

    def validation_scores(self, trainer: Any) -> dict[str, float]:
        """Validation scores of the term's own (rank 0)."""
        return {}

    def judge(self, state: Any, record: dict) -> list[bool]:
        """For each model the term added, whether the validation in `record` improved on its best."""
        return []
