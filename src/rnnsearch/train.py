"""Training (paper Appendix B): minibatch SGD with Adadelta or Adam, clipped gradients,
periodic validation (loss and BLEU), best/last checkpoints, early stopping, resume."""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
import time
from pathlib import Path

import sacrebleu
import torch

from .checkpoint import (CheckpointError, load_train_state, read_config, save_train_state,
                         save_weights)
from .config import Config
from . import distributed
from .data import ParallelData, collate, drop_words, make_batches, normalize, read_parallel, target_tokens
from .io import atomic_write_text
from .attention import at_least_fp32
from .model import build_model
from .translate import Translator
from .vocab import PAD, build_tokenizers, load_tokenizers, save_tokenizers

log = logging.getLogger("rnnsearch")

MAX_BAD_STEPS = 20  # consecutive non-finite losses/gradients before giving up


def make_optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    t = cfg.train
    if t.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=t.lr, rho=t.rho, eps=t.eps, weight_decay=t.weight_decay)
    # fused: one kernel over every parameter (5x faster than the per-tensor loop on a 2-core CPU)
    return torch.optim.Adam(params, lr=t.lr, eps=t.eps, weight_decay=t.weight_decay, fused=True)


class _SummedCrossEntropy(torch.autograd.Function):
    """Σ_rows −[(1−ε) log p(y) + ε/V Σ_v log p(v)] with p = softmax(logits), fused.

    The gradient, softmax − (1−ε)·onehot − ε/V, is formed in the forward pass in the memory
    of the log-probabilities, so backward is one scaling of it; log_softmax + nll_loss instead
    zero-fill a (rows, V) matrix for nll's gradient and run log_softmax's backward over it
    (half the time on Multi30k-sized batches: .dev-style timing in docs/benchmarks.md).
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


def _load_pairs(cfg: Config, split: str):
    d = cfg.data
    src, tgt, tsv = getattr(d, f"{split}_src"), getattr(d, f"{split}_tgt"), getattr(d, f"{split}_tsv")
    if src is None and tsv is None:
        return None
    return read_parallel(src, tgt, tsv)


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


def validate(translator: Translator, data: ParallelData, raw_src: list[str], raw_tgt: list[str],
             cfg: Config, with_bleu: bool) -> dict:
    out = {"valid_loss": evaluate_loss(translator.model, data, translator.device)}
    out["valid_ppl"] = math.exp(min(out["valid_loss"], 50))
    if with_bleu:
        n = min(len(raw_src), cfg.data.valid_bleu_sentences)
        hyps = translator.translate(raw_src[:n], beam=cfg.train.valid_beam, attention=False)
        out["valid_bleu"] = sacrebleu.corpus_bleu([h.text for h in hyps], [raw_tgt[:n]],
                                                  tokenize=cfg.data.bleu_tokenize).score
    translator.model.train()
    return out


# The training state that rank 0's validation decides and every rank then takes from it.
VALIDATION_KEYS = ("best", "bad_validations", "lr_bad", "lr", "valid_loss")


def _after_validation(state: dict, record: dict, t) -> bool:
    """Update best score, patience counters and (on a plateau) the learning rate; True if improved."""
    state["valid_loss"] = record["valid_loss"]
    score = record["valid_bleu"] if t.valid_metric == "bleu" else -record["valid_loss"]
    if state["best"] is None or score > state["best"]:
        state["best"], state["bad_validations"], state["lr_bad"] = score, 0, 0
        return True
    state["bad_validations"] += 1
    state["lr_bad"] += 1
    if t.lr_decay < 1.0 and state["lr_bad"] >= t.lr_patience:
        state["lr"] = max(t.min_lr, state["lr"] * t.lr_decay)
        state["lr_bad"] = 0
        log.info("no improvement for %d validations: lr -> %g", t.lr_patience, state["lr"])
    return False


# What a resumed run takes from the config it is given; everything else comes from the model directory.
RESUME_KEYS = ("max_epochs", "max_steps", "max_minutes", "stop_valid_loss", "progress", "device", "precision",
               "threads")


def resume_config(cfg: Config, model_dir: Path) -> Config:
    """The saved config of `model_dir` with `cfg`'s training limits, device and precision
    (RESUME_KEYS); every other key of `cfg` that differs from the saved run is ignored with a
    warning naming it, since the model, data and vocabulary must stay those of the run."""
    saved = read_config(model_dir)
    given, kept = cfg.to_dict(), saved.to_dict()
    for section, values in given.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if section == "train" and key in RESUME_KEYS:
                setattr(saved.train, key, value)
            elif value != kept.get(section, {}).get(key):
                log.warning("--resume: ignoring %s.%s=%r; the run continues with %r from %s", section, key,
                            value, kept.get(section, {}).get(key), model_dir / "config.json")
    saved.model_dir = str(model_dir)
    return saved


def _validation_stop(state: dict, t) -> str | None:
    """Why training ends after the validation just done, if it does: patience run out, or the
    validation loss down to ``train.stop_valid_loss``."""
    if t.patience and state["bad_validations"] >= t.patience:
        return f"no improvement in {t.patience} validations"
    if t.stop_valid_loss and state["valid_loss"] is not None and state["valid_loss"] <= t.stop_valid_loss:
        return f"validation loss {state['valid_loss']:.4g} <= stop_valid_loss={t.stop_valid_loss}"
    return None


def train(cfg: Config, resume: bool = False) -> Path:
    """Train per `cfg`, writing the model directory `cfg.model_dir`; returns its path.

    With `resume`, continue from the directory's last checkpoint (config taken from it).
    """
    t = cfg.train
    model_dir = Path(cfg.model_dir)
    if resume:
        cfg = resume_config(cfg, model_dir)
        t = cfg.train
        (model_dir / "DONE").unlink(missing_ok=True)
        for stale in model_dir.glob(".*.tmp"):  # half-written files of a killed run
            stale.unlink()
    elif (model_dir / "train_state.safetensors").exists():
        raise CheckpointError(f"{model_dir}: already holds a training run; use --resume to continue it "
                              "or choose another model_dir")
    random.seed(t.seed)
    torch.manual_seed(t.seed)
    if t.threads:
        torch.set_num_threads(t.threads)
    ctx, device = distributed.setup(t.device)
    if not ctx.main:
        log.setLevel(logging.WARNING)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    train_src, train_tgt = _load_pairs(cfg, "train") or (None, None)
    if train_src is None:
        raise CheckpointError("config: data.train_src/train_tgt (or data.train_tsv) are required to train")
    valid = _load_pairs(cfg, "valid")
    created = not model_dir.exists()
    model_dir.mkdir(parents=True, exist_ok=True)
    try:
        if not resume and ctx.main:  # rank 0 builds the vocabularies; the others read them
            log.info("building %s vocabularies (size %d)", cfg.vocab.kind, cfg.vocab.size)
            # built from the text as the model will see it (control characters cleaned, case as configured)
            src_norm = [normalize(x, cfg.data.lowercase) for x in train_src]
            tgt_norm = [normalize(x, cfg.data.lowercase) for x in train_tgt]
            save_tokenizers(model_dir, cfg.vocab, *build_tokenizers(cfg.vocab, src_norm, tgt_norm, t.seed))
            cfg.save(model_dir / "config.json")
        distributed.barrier(ctx)
        src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
        d = cfg.data
        train_data = ParallelData.encode(train_src, train_tgt, src_tok, tgt_tok, d.max_len, d.reverse_source,
                                         d.lowercase, name="train")
        valid_data = None
        if valid is not None:
            valid_data = ParallelData.encode(valid[0], valid[1], src_tok, tgt_tok, 10 ** 6, d.reverse_source,
                                             d.lowercase, name="valid")
            keep = [e.index for e in valid_data.examples]
            valid_src = [valid[0][i] for i in keep]
            valid_tgt = [valid[1][i] for i in keep]
    except BaseException:  # bad data found while encoding: leave no half-made model directory behind
        if created and ctx.main:
            shutil.rmtree(model_dir, ignore_errors=True)
        raise

    model = build_model(cfg.model, len(src_tok), len(tgt_tok)).to(device)
    optimizer = make_optimizer(cfg, model.parameters())
    state = {"step": 0, "epoch": 0, "position": 0, "best": None, "bad_validations": 0,
             "lr_bad": 0, "lr": t.lr, "tokens": 0, "seconds": 0.0, "valid_loss": None}
    if resume:
        state.update(load_train_state(model_dir, model, optimizer))
        log.info("resumed %s at step %d (epoch %d, batch %d)", model_dir, state["step"], state["epoch"],
                 state["position"])
    log.info("model %s: %s parameters", cfg.model.arch, f"{model.num_parameters():,}")
    if t.compile:
        model.compile_step()  # the first batches compile (seconds to a minute), the rest reuse it
        log.info("decoder time step compiled with torch.compile")
    net = model
    if ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel

        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        log.info("data parallel over %d ranks: global batch %d %s", ctx.world, t.batch_size, t.batch_by)
    metrics = MetricsLog(model_dir, t.tensorboard, enabled=ctx.main)
    translator = Translator(cfg, model, src_tok, tgt_tok, device)

    def checkpoint(tag: str, validating: bool = True) -> None:
        """Validate (rank 0), update best/lr/patience on every rank, write the checkpoint (rank 0).
        Without `validating` (a timed save) the best weights are left alone wherever there is
        validation data to judge them by."""
        record = {"step": state["step"], "epoch": state["epoch"]}
        improved = valid_data is None
        if validating:
            if ctx.main and valid_data is not None:
                record.update(validate(translator, valid_data, valid_src, valid_tgt, cfg, t.valid_metric == "bleu"))
                improved = _after_validation(state, record, t)
            improved, shared = distributed.broadcast((improved, {k: state[k] for k in VALIDATION_KEYS}), ctx)
            state.update(shared)
            for group in optimizer.param_groups:
                group["lr"] = state["lr"]
        if not ctx.main:
            return
        best = state["best"]  # kept as "higher is better": a loss is stored negated
        if best is not None and t.valid_metric == "loss":
            best = -best
        record.update(kind=tag, lr=state["lr"], best=best)
        metrics.write(record)
        meta = {"step": str(state["step"])}
        if improved:
            save_weights(model_dir / "model.safetensors", model, meta)
        save_weights(model_dir / "last.safetensors", model, meta)
        save_train_state(model_dir, model, optimizer, state)
        if t.keep_last:  # periodic snapshots besides best and last, the oldest pruned
            snaps = model_dir / "checkpoints"
            save_weights(snaps / f"step-{state['step']:08d}.safetensors", model, meta)
            for old in sorted(snaps.glob("step-*.safetensors"))[: -t.keep_last]:
                old.unlink()
        shown = " ".join(f"{k}={v:.4g}" for k, v in record.items() if isinstance(v, float))
        log.info("step %d %s %s", state["step"], tag, shown)

    # Mixed precision: matrix products in bf16/fp16, softmaxes and the loss in fp32 (see at_least_fp32).
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(t.precision)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)
    scaler = torch.amp.GradScaler(device.type, enabled=t.precision == "fp16")
    started = time.time() - state["seconds"]
    saved_at = state["seconds"]  # training seconds at the last timed save (train.save_every_minutes)
    stop = None
    bad_in_row = 0
    model.train()
    run_bar = None  # with a step budget, one bar over the whole run: its ETA is the run's
    if t.progress and ctx.main and t.max_steps:
        from tqdm import tqdm

        run_bar = tqdm(total=t.max_steps, initial=state["step"], unit="step", dynamic_ncols=True)
    while stop is None:
        epoch = state["epoch"]
        if t.max_epochs and epoch >= t.max_epochs:
            break
        batches = make_batches(train_data, t.batch_size, t.batch_by, t.batching, t.sort_k, t.seed, epoch)
        bar = run_bar
        if bar is not None:
            bar.set_description(f"epoch {epoch + 1}")
        elif t.progress and ctx.main:
            from tqdm import tqdm

            bar = tqdm(total=len(batches), initial=state["position"], desc=f"epoch {epoch + 1}",
                       dynamic_ncols=True, leave=False)
        window_loss, window_tok, window_t0 = 0.0, 0, time.time()
        for pos in range(state["position"], len(batches)):
            rng = random.Random(t.seed * 1_000_003 + epoch * 100_003 + pos)  # resumable word dropout
            examples = [train_data.examples[i] for i in batches[pos]]
            if cfg.model.word_dropout > 0 or cfg.model.word_dropout_target > 0:
                examples = drop_words(examples, cfg.model.word_dropout, rng, cfg.model.word_dropout_target)
            n_tok = target_tokens(examples)  # the global batch's, before sharding
            mine, real = distributed.shard(examples, ctx)
            batch = collate(mine).to(device)
            with autocast:
                logits, _ = net(batch.src, batch.src_mask, batch.tgt_in, log_probs=False, packed=True)
                loss = sequence_loss(logits, batch.tgt_out[batch.tgt_out != PAD], t.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            # x world: DDP averages the ranks' gradients; the sum over ranks / n_tok is the batch mean
            scaler.scale(loss * (ctx.world * real) / n_tok).backward()
            scaler.unscale_(optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), t.clip_norm if t.clip_norm else float("inf"))
            state["position"] = pos + 1
            if scaler.is_enabled() and not torch.isfinite(grad_norm):
                scaler.step(optimizer)  # fp16 overflow: the scaler skips this step and lowers its scale
                scaler.update()
                continue
            # gradients are synchronised, so grad_norm (and this decision) agrees on every rank
            finite = torch.isfinite(grad_norm) if ctx.enabled else torch.isfinite(grad_norm) & torch.isfinite(loss)
            if not bool(finite):  # one wait for the GPU per step (the loss is read only when logged)
                bad_in_row += 1
                metrics.write({"step": state["step"], "kind": "skipped", "reason": "non-finite loss or gradient"})
                log.warning("step %d: non-finite loss or gradient, update skipped (%d in a row)",
                            state["step"], bad_in_row)
                if bad_in_row >= MAX_BAD_STEPS:
                    raise FloatingPointError(
                        f"{bad_in_row} non-finite updates in a row: lower train.lr, keep train.clip_norm > 0, "
                        "or use train.optimizer=adadelta")
                continue
            bad_in_row = 0
            scaler.step(optimizer)
            scaler.update()
            state["step"] += 1
            state["tokens"] += n_tok
            window_loss = window_loss + loss.detach() * real  # summed on the device, read when logged
            window_tok += n_tok
            if bar is not None:
                bar.update(1)
            if state["step"] % t.log_every == 0 or pos == len(batches) - 1:
                elapsed = max(time.time() - window_t0, 1e-9)
                mean = distributed.all_sum([float(window_loss)], ctx, device)[0] / max(window_tok, 1)
                rec = {"step": state["step"], "epoch": epoch, "kind": "train", "loss": mean,
                       "ppl": math.exp(min(mean, 50)), "tok_per_s": window_tok / elapsed,
                       "grad_norm": float(grad_norm), "lr": state["lr"]}
                metrics.write(rec)
                if bar is not None:
                    bar.set_postfix(loss=f"{mean:.3f}", ppl=f"{rec['ppl']:.1f}", tok_s=f"{rec['tok_per_s']:.0f}")
                window_loss, window_tok, window_t0 = 0.0, 0, time.time()
            state["seconds"] = time.time() - started
            if t.valid_every and state["step"] % t.valid_every == 0 and pos < len(batches) - 1:
                checkpoint("valid")
                stop = _validation_stop(state, t)
                if stop is not None:
                    break
            if t.max_steps and state["step"] >= t.max_steps:
                stop = f"reached max_steps={t.max_steps}"
                break
            if t.save_every_minutes and distributed.broadcast(
                    state["seconds"] - saved_at >= t.save_every_minutes * 60, ctx):
                checkpoint("timed", validating=False)
                saved_at = state["seconds"]
            if t.max_minutes and distributed.broadcast(state["seconds"] >= t.max_minutes * 60, ctx):
                stop = f"reached max_minutes={t.max_minutes}"
                break
        if bar is not None and bar is not run_bar:
            bar.close()
        if state["position"] >= len(batches):
            state["epoch"], state["position"] = epoch + 1, 0
        checkpoint("epoch" if stop is None else "final")
        if stop is None:
            stop = _validation_stop(state, t)
    if run_bar is not None:
        run_bar.close()
    if ctx.enabled:  # every rank must hold the same weights; say so in the log
        sums = distributed.weight_checksums(model, ctx)
        metrics.write({"step": state["step"], "kind": "ranks", "world": ctx.world, "weight_checksums": sums,
                       "identical": len(set(sums)) == 1})
    log.info("training stopped: %s; model in %s", stop or f"reached max_epochs={t.max_epochs}", model_dir)
    if ctx.main:
        atomic_write_text(model_dir / "DONE", json.dumps({"reason": stop or "max_epochs", "step": state["step"]}) + "\n")
    distributed.cleanup(ctx)
    return model_dir
