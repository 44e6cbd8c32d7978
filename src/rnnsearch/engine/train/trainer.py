"""Training (paper Appendix B): minibatch SGD with Adadelta or Adam, clipped gradients,
periodic validation (loss and BLEU), best/last checkpoints, early stopping, resume. One `Trainer`
runs every kind of run; what a run adds to the NLL (guided alignment, the agreement of two
directions) is a loss term (engine/train/objective.py's LossTerm) that `loss_terms` picks from the config.
The loop is `Trainer.run` and `Trainer.train_epoch`; what a run keeps and logs is in state.py, what it
starts from and stops by (model directory, resume, seed, threads, optimizer, signals) in launch.py."""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import Config
from rnnsearch.engine import distributed
from rnnsearch.engine.accel.speedup import compile_time_step, speed_up
from rnnsearch.engine.checkpoint import CheckpointError, load_train_state, save_train_state
from rnnsearch.engine.data.pairs import corpus_files, in_memory_pairs, prepared_pairs, vocabularies
from rnnsearch.engine.data.parallel import (
    Batch,
    ParallelData,
    collate,
    drop_words,
    make_batches,
    target_tokens,
)
from rnnsearch.engine.data.prepared import PreparedData, open_prepared
from rnnsearch.engine.data.vocab import load_tokenizers, save_tokenizers
from rnnsearch.engine.decode.translator import Translator
from rnnsearch.engine.distributed import on_main_rank
from rnnsearch.engine.precision import choose, model_size
from rnnsearch.engine.train.agreement import Agreement
from rnnsearch.engine.train.guided import GuidedAlignment
from rnnsearch.engine.train.launch import (
    StopRequests,
    TrainingInterrupted,
    make_optimizer,
    prepare_model_dir,
    seed_and_threads,
)
from rnnsearch.engine.train.objective import LossTerm, Update, batch_loss, objective, packed_loss
from rnnsearch.engine.train.state import (
    MetricsLog,
    Step,
    TrainState,
    Validation,
    Window,
    save_model_files,
    validation_scores,
    validation_set,
)
from rnnsearch.io import MissingFileError, atomic_write_text
from rnnsearch.nn.model import Model, build_model

log = logging.getLogger("rnnsearch")

MAX_BAD_STEPS = 20  # consecutive non-finite losses/gradients before giving up


def train(cfg: Config, resume: bool = False) -> Path:
    """Train per `cfg` with `Trainer`, writing the model directory `cfg.model_dir`; returns its
    path. The config names the loss terms added to the NLL (`loss_terms`): train.guided_alignment
    teaches the attention a word aligner's links (engine/train/guided.py), train.agreement trains the
    two directions together (engine/train/agreement.py). `rnnsearch.train` is this function.

    With `resume`, continue from the directory's last checkpoint (config taken from it).
    SIGINT or SIGTERM during training saves a checkpoint after the current update and raises
    `TrainingInterrupted` (a KeyboardInterrupt): the run is resumable and has no DONE.
    """
    return Trainer(cfg, resume).run()


class Trainer:
    """One training run as small named steps, with the loss terms its config names (`loss_terms`).
    The loop: `run` calls `train_epoch` until a limit; it takes each batch through `train_step`
    (forward, the NLL and the terms' parts, backward, optimizer), writes `log_window`'s line every
    train.log_every steps and asks `after_step` whether to validate, save or stop; then a
    `checkpoint` (validate, then `save_checkpoint`). Each can be called on its own."""

    def __init__(self, cfg: Config, resume: bool = False, terms: Optional[list[LossTerm]] = None):
        self.cfg = cfg = prepare_model_dir(cfg, resume)
        self.model_dir, self.resume = Path(cfg.model_dir), resume
        self.terms = loss_terms(cfg) if terms is None else terms
        seed_and_threads(cfg.train)
        self.ctx, self.device = self.setup_device()
        self.build(resume)
        self.optimizer = make_optimizer(cfg, self.trained.parameters())
        self.state = self.resumed_state() if resume else TrainState(lr=cfg.train.lr, terms=self.term_state())
        log.info("model %s: %s parameters", cfg.model.arch, f"{self.model.num_parameters():,}")
        for model in self.models if not cfg.plain else []:  # the speed paths (engine/accel/)
            speed_up(model)
            if cfg.train.compile:  # the first batches compile (seconds to a minute), the rest reuse it
                compile_time_step(model)
        if cfg.train.compile:
            log.info("decoder time step compiled with torch.compile")
        self.net = self.data_parallel()
        self.metrics = MetricsLog(self.model_dir, cfg.train.tensorboard, enabled=self.ctx.main)
        if resume and (dropped := self.metrics.rewind(self.state.step)):
            log.info("log.jsonl: dropped %d records of steps after %d (trained again now)", dropped,
                     self.state.step)
        self.translator = Translator(cfg, self.model, self.src_tok, self.tgt_tok, self.device)
        self.precision = self.resolve_precision()
        # Mixed precision: matrix products in bf16/fp16, softmaxes and the loss in fp32 (see at_least_fp32).
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        self.autocast = torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.precision == "fp16")
        self.bad_in_row = 0  # non-finite updates in a row
        self.started = time.time() - self.state.seconds
        self.saved_at = self.state.seconds  # training seconds at the last timed save
        self.stop_requests = StopRequests()
        self.interrupted: Optional[int] = None  # the signal that stopped the run, agreed by every rank

    def run(self) -> Path:
        """Train until a limit or a stopping rule; returns the model directory."""
        t, state = self.cfg.train, self.state
        self.started = time.time() - state.seconds
        self.trained.train()
        run_bar = None  # with a step budget, one bar over the whole run: its ETA is the run's
        if t.progress and self.ctx.main and t.max_steps:
            run_bar = _bar(total=t.max_steps, initial=state.step, unit="step")
        stop = None
        with self.stop_requests:
            while stop is None and not (t.max_epochs and state.epoch >= t.max_epochs):
                stop = self.train_epoch(run_bar)
        if run_bar is not None:
            run_bar.close()
        if self.interrupted is None:  # interrupted: saved by train_epoch, no DONE, to be resumed
            self.finish(stop)
        # the DDP wrapper holds the process group: let go of it first, or gloo's threads can
        # outlive destroy_process_group and abort the process at exit
        self.net = self.trained
        distributed.cleanup(self.ctx)
        if self.interrupted is not None:
            raise TrainingInterrupted(self.interrupted, self.model_dir, state.step)
        return self.model_dir

    def train_epoch(self, run_bar=None) -> Optional[str]:
        """The rest of the current epoch, or less if a limit or stopping rule ends training first
        (returned: the reason); then a checkpoint."""
        t, state = self.cfg.train, self.state
        epoch = state.epoch
        batches = make_batches(self.train_data, t.batch_size, t.batch_by, t.batching, t.sort_k, t.seed, epoch)
        bar = self.epoch_bar(run_bar, len(batches))
        window = Window()
        stop = None
        made: Optional[Step] = None  # the latest update, whose gradient norm a log line reports
        for pos in range(state.position, len(batches)):
            state.position = pos + 1
            self.regularize(state.step >= t.dropout_start)
            step = self.train_batch(batches[pos], epoch, pos)
            last = pos == len(batches) - 1
            if step is not None:
                made = step
                window.add(step)
                if bar is not None:
                    bar.update(1)
            # the epoch's last line is written even where its last update was skipped (fp16 overflow)
            due = last or (step is not None and state.step % t.log_every == 0)
            if due and made is not None and window.tokens:
                self.log_window(window, made, bar)
            if step is None:  # update skipped
                continue
            state.seconds = time.time() - self.started
            stop = self.after_step(last)
            if stop is not None:
                break
        if bar is not None and bar is not run_bar:
            bar.close()
        if state.position >= len(batches):
            state.epoch, state.position = epoch + 1, 0
        if self.interrupted is not None:  # save at once: validation could outlast a SIGTERM's grace
            self.checkpoint("interrupted", validating=False)
        else:
            self.checkpoint("epoch" if stop is None else "final")
        return stop or state.stop_reason(t)

    def epoch_bar(self, run_bar, batches: int):
        """The progress bar an epoch of `batches` updates: the run's, or (no step budget) its own;
        None without train.progress and on ranks other than 0."""
        epoch = self.state.epoch
        if run_bar is not None:
            run_bar.set_description(f"epoch {epoch + 1}")
            return run_bar
        if self.cfg.train.progress and self.ctx.main:
            return _bar(total=batches, initial=self.state.position, desc=f"epoch {epoch + 1}", leave=False)
        return None

    def regularize(self, on: bool) -> None:
        """Dropout and word dropout on or off (train.dropout_start: off for the first steps)."""
        if on != self.model.dropout_on:
            for model in self.models:
                model.set_dropout(on)
            until = f"off until step {self.cfg.train.dropout_start}"
            log.info("step %d: dropout %s", self.state.step, "on" if on else until)

    def train_batch(self, ids: Iterable[int], epoch: int, pos: int) -> Optional[Step]:
        """`train_step` on batch `pos` of the epoch (`ids`: its example ids)."""
        return self.train_step(self.train_data.examples_at(ids), epoch, pos)

    def word_dropout(self, examples: list, epoch: int, pos: int, stream: str = "") -> list:
        """`examples` with word dropout, seeded by epoch and position so that a resumed run drops
        the same words; `stream` names another draw for the same batch, independent of this one."""
        m = self.cfg.model
        if (m.word_dropout > 0 or m.word_dropout_target > 0) and self.model.dropout_on:
            seed = self.cfg.train.seed * 1_000_003 + epoch * 100_003 + pos
            rng = random.Random(f"{seed} {stream}" if stream else seed)
            examples = drop_words(examples, m.word_dropout, rng, m.word_dropout_target)
        return examples

    def shard(self, examples: list) -> tuple[Batch, list, bool]:
        """This rank's share of a global batch, collated on the device; (batch, its examples, real:
        False where the rank has none and trains on a stand-in whose sums count 0)."""
        mine, real = distributed.shard(examples, self.ctx)
        return collate(mine).to(self.device), mine, real

    def train_step(self, pairs: list, epoch: Optional[int] = None, pos: int = 0) -> Optional[Step]:
        """One update on the global batch `pairs` (this rank's share of it): word dropout (in an
        `epoch`), forward, the NLL and the terms' parts, backward, clipping, optimizer. None when the
        update is skipped (fp16 overflow, or a non-finite loss or gradient)."""
        examples = pairs if epoch is None else self.word_dropout(pairs, epoch, pos)
        n_tok = target_tokens(examples)  # the global batch's, before sharding
        batch, mine, real = self.shard(examples)
        update = Update(pairs, n_tok, mine, batch, epoch, pos)
        inputs = [term.inputs(self, update) for term in self.terms]
        kwargs = {k: v for args, _ in inputs for k, v in args.items()}
        with self.autocast:
            out = self.net(batch.src, batch.src_mask, batch.tgt_in, log_probs=False, packed=True, **kwargs)
            loss = packed_loss(out[0], batch, self.cfg.train.label_smoothing)
            parts = [term.loss(self, update, out, x) for term, (_, x) in zip(self.terms, inputs)]
        grad_norm = self.update(objective(loss, parts, self.ctx.world * real, n_tok), loss, n_tok)
        if grad_norm is None:
            return None
        sums = {"loss": (loss.detach() * real, n_tok)}
        for part in parts:
            sums.update({k: (v.detach() * real, n) for k, (v, n) in part.sums.items()})
        return Step(n_tok, grad_norm, sums, {k: v for part in parts for k, v in part.values.items()})

    def update(self, total: torch.Tensor, loss: torch.Tensor, tokens: int) -> Optional[torch.Tensor]:
        """Backward from `total` (the batch's `objective`), clipping and the optimizer step, counted
        in the state; the gradient norm before clipping, or None when the update is skipped."""
        t = self.cfg.train
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(total).backward()
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.trained.parameters(), t.clip_norm or float("inf"))
        if self.scaler.is_enabled() and not torch.isfinite(grad_norm):
            self.scaler.step(self.optimizer)  # fp16 overflow: the scaler skips this step and lowers its scale
            self.scaler.update()
            return None
        if not self.finite(loss, grad_norm):
            return None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.state.step += 1
        self.state.tokens += tokens
        return grad_norm

    def finite(self, loss: torch.Tensor, grad_norm: torch.Tensor) -> bool:
        """Whether an update may be taken; counts, logs and (after MAX_BAD_STEPS in a row) gives up
        on non-finite ones. The gradients are synchronised, so every rank decides the same."""
        ok = torch.isfinite(grad_norm)
        if not self.ctx.enabled:
            ok = ok & torch.isfinite(loss)
        if bool(ok):  # one wait for the GPU per step (the loss is read only when logged)
            self.bad_in_row = 0
            return True
        self.bad_in_row += 1
        step = self.state.step
        self.metrics.write({"step": step, "kind": "skipped", "reason": "non-finite loss or gradient"})
        log.warning("step %d: non-finite loss or gradient, update skipped (%d in a row)", step,
                    self.bad_in_row)
        if self.bad_in_row >= MAX_BAD_STEPS:
            raise FloatingPointError(
                f"{self.bad_in_row} non-finite updates in a row: lower train.lr, keep train.clip_norm > 0, "
                "or use train.optimizer=adadelta")
        return False

    def log_window(self, window: Window, step: Step, bar=None) -> None:
        """One training log line: the mean loss (over every rank), tokens/s since the last one, and
        the terms' means and values."""
        elapsed = max(time.time() - window.t0, 1e-9)
        means = window.means(self.ctx, self.device)
        mean = means.pop("loss")
        rec = {"step": self.state.step, "epoch": self.state.epoch, "kind": "train", "loss": mean,
               "ppl": math.exp(min(mean, 50)), "tok_per_s": window.tokens / elapsed,
               "grad_norm": float(step.grad_norm), "lr": self.state.lr,
               "precision": self.precision, **means}  # precision: what train.precision (auto too) resolved to
        self.metrics.write(rec)
        if bar is not None:
            bar.set_postfix(loss=f"{mean:.3f}", ppl=f"{rec['ppl']:.1f}", tok_s=f"{rec['tok_per_s']:.0f}")
        window.reset()

    def after_step(self, last_of_epoch: bool) -> Optional[str]:
        """Mid-epoch validation, the step and time limits and timed saves; the reason to stop, if any."""
        t, state = self.cfg.train, self.state
        if t.valid_every and state.step % t.valid_every == 0 and not last_of_epoch:
            self.checkpoint("valid")
            stop = state.stop_reason(t)
            if stop is not None:
                return stop
        if t.max_steps and state.step >= t.max_steps:
            return f"reached max_steps={t.max_steps}"
        # rank 0's clock and signals decide for every rank (one broadcast), so all stop at one step
        over = bool(t.max_minutes) and state.seconds >= t.max_minutes * 60
        due = bool(t.save_every_minutes) and state.seconds - self.saved_at >= t.save_every_minutes * 60
        over, due, self.interrupted = distributed.broadcast((over, due, self.stop_requests.signum), self.ctx)
        if self.interrupted is not None:
            name = signal.Signals(self.interrupted).name
            log.warning("%s: stopping at step %d to save a checkpoint (send it again to stop at once)",
                        name, state.step)
            return f"interrupted by {name}"
        if over:
            return f"reached max_minutes={t.max_minutes}"
        if due:
            self.checkpoint("timed", validating=False)
            self.saved_at = state.seconds
        return None

    def checkpoint(self, tag: str, validating: bool = True) -> None:
        """Validate (unless a timed save), then write the checkpoint. A timed save leaves the best
        weights alone wherever there is validation data to judge them by."""
        record = {"step": self.state.step, "epoch": self.state.epoch}
        improved = self.validate(record) if validating else [self.valid is None] * len(self.models)
        if self.ctx.main:
            self.save_checkpoint(tag, record, improved)

    def validate(self, record: dict) -> list[bool]:
        """Validate on rank 0 (scores into `record`) and take its decisions (best score, patience,
        learning rate) on every rank; for each of `self.models`, whether it improved."""
        improved = [self.valid is None] * len(self.models)
        if self.ctx.main and self.valid is not None:
            record.update(self.validation_scores(self.valid))
            improved = [self.state.after_validation(record, self.cfg.train),
                        *(ok for term in self.terms for ok in term.judge(self.state, record))]
        improved, outcome = distributed.broadcast((improved, self.state.validation_outcome()), self.ctx)
        for key, value in outcome.items():
            setattr(self.state, key, value)
        for group in self.optimizer.param_groups:
            group["lr"] = self.state.lr
        return improved

    def validation_scores(self, valid: Validation) -> dict:
        """Rank 0's validation scores (module-level `validation_scores`), then the terms'."""
        metric = self.cfg.train.valid_metric  # chrF's decode also gives BLEU, for the log and its curves
        scores = validation_scores(self.translator, valid, self.cfg, with_bleu=metric in ("bleu", "chrf"),
                                   with_chrf=metric == "chrf")
        for term in self.terms:
            scores.update(term.validation_scores(self))
        return scores

    def save_checkpoint(self, tag: str, record: dict, improved: list[bool]) -> None:
        """The log record; the best weights (of each model of `self.models` whose flag in `improved`
        is set), the last weights and the resumable state; with train.keep_last, a snapshot in
        checkpoints/ (the oldest pruned)."""
        t, state = self.cfg.train, self.state
        best = state.best  # kept as "higher is better": a loss is stored negated
        if best is not None and t.valid_metric == "loss":
            best = -best
        record.update(kind=tag, lr=state.lr, best=best)
        self.metrics.write(record)
        for model, model_dir, better in zip(self.models, self.model_dirs, improved):
            save_model_files(model, model_dir, better, state.step, t.keep_last)
        save_train_state(self.model_dir, self.trained, self.optimizer, state.saved())
        shown = " ".join(f"{k}={v:.4g}" for k, v in record.items() if isinstance(v, float))
        log.info("step %d %s %s", state.step, tag, shown)

    def finish(self, stop: Optional[str]) -> None:
        """A run that has ended (`stop`: why; None: max_epochs): the ranks' weight checksums in the
        log, and DONE."""
        state = self.state
        if self.ctx.enabled:  # every rank must hold the same weights; say so in the log
            sums = distributed.weight_checksums(self.trained, self.ctx)
            self.metrics.write({"step": state.step, "kind": "ranks", "world": self.ctx.world,
                                "weight_checksums": sums, "identical": len(set(sums)) == 1})
        why = stop or f"reached max_epochs={self.cfg.train.max_epochs}"
        log.info("training stopped: %s; model in %s", why, self.model_dir)
        if self.ctx.main:
            done = {"reason": stop or "max_epochs", "step": state.step}
            atomic_write_text(self.model_dir / "DONE", json.dumps(done) + "\n")

    # setting up: what __init__ calls

    def setup_device(self) -> tuple[distributed.Context, torch.device]:
        """This rank's place in the process group (if any) and its device; only rank 0 logs below
        warnings."""
        ctx, device = distributed.setup(self.cfg.train.device)
        if not ctx.main:
            log.setLevel(logging.WARNING)
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        return ctx, device

    def build(self, resume: bool) -> None:
        """The data, the model and the terms' setup (their data and models). Bad data stops every
        rank with one message and leaves no half-made model directory behind."""
        files = corpus_files(self.cfg, "train")
        if files is None:
            raise CheckpointError("config: data.train_src/train_tgt (or data.train_tsv) are required to "
                                  "train")
        for split in filter(None, (files, corpus_files(self.cfg, "valid"))):  # not fetched yet: say so first
            for _, path in split.roles():
                if not path.exists():
                    raise MissingFileError(path)
        created = not self.model_dir.exists()
        if self.ctx.main:  # only rank 0 makes it: a failed start removes it, and no rank makes it again
            self.model_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.src_tok, self.tgt_tok, self.train_data = self.load_data(files, resume)
            self.valid = validation_set(self.cfg, self.src_tok, self.tgt_tok)
            self.model = build_model(self.cfg.model, len(self.src_tok), len(self.tgt_tok)).to(self.device)
            self.trained: torch.nn.Module = self.model  # what the optimizer updates (a term may widen it)
            self.models: list[Model] = [self.model]  # the models the run trains, each saved in
            self.model_dirs = [self.model_dir]  # its own directory
            for term in self.terms:
                term.setup(self)
        except BaseException:
            if created and self.ctx.main:
                shutil.rmtree(self.model_dir, ignore_errors=True)
            raise

    def load_data(self, files: Any, resume: bool) -> tuple[Any, Any, ParallelData | PreparedData]:
        """Tokenisers (built and saved by rank 0 on a fresh run) and the training pairs (encoded by
        rank 0, mapped by every rank)."""
        cfg, model_dir, ctx = self.cfg, self.model_dir, self.ctx
        if not resume:  # rank 0 builds the vocabularies; the others read them
            on_main_rank(ctx, lambda: save_tokenizers(model_dir, cfg.vocab, *vocabularies(cfg, files)))
            if ctx.main:
                cfg.save(model_dir / "config.json")
        distributed.barrier(ctx)
        src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
        if not cfg.data.prepared:
            return src_tok, tgt_tok, in_memory_pairs(cfg, files, src_tok, tgt_tok)
        made = on_main_rank(ctx, lambda: prepared_pairs(cfg, files, src_tok, tgt_tok))  # rank 0 prepares
        return src_tok, tgt_tok, made if ctx.main else open_prepared(made.path)  # checked again where mapped

    def term_state(self) -> dict[str, Any]:
        """The terms' entries of TrainState.terms, with their initial values."""
        return {k: v for term in self.terms for k, v in term.state.items()}

    def resumed_state(self) -> TrainState:
        """The weights, optimizer, random state and TrainState of the last checkpoint."""
        saved = load_train_state(self.model_dir, self.trained, self.optimizer)
        state = TrainState.restored(saved, self.cfg.train.lr, self.term_state())
        log.info("resumed %s at step %d (epoch %d, batch %d)", self.model_dir, state.step, state.epoch,
                 state.position)
        return state

    def data_parallel(self) -> torch.nn.Module:
        """What the forward pass runs: `trained`, under torchrun wrapped in DistributedDataParallel."""
        if not self.ctx.enabled:
            return self.trained
        from torch.nn.parallel import DistributedDataParallel

        t = self.cfg.train
        ids = [self.device.index] if self.device.type == "cuda" else None
        net = DistributedDataParallel(self.trained, device_ids=ids)
        log.info("data parallel over %d ranks: global batch %d %s", self.ctx.world, t.batch_size, t.batch_by)
        return net

    def resolve_precision(self) -> str:
        """train.precision, with "auto" measured on rank 0 (engine/precision.py) and shared."""
        t = self.cfg.train
        if t.precision != "auto":
            return t.precision
        work = f"batch {t.batch_size} {t.batch_by}"
        size = model_size(self.cfg, len(self.src_tok), len(self.tgt_tok), work)
        chosen = choose("train", self.device, size, self._probe) if self.ctx.main else None
        chosen = distributed.broadcast(chosen, self.ctx)
        log.info("precision: %s (train.precision auto)", chosen)
        return chosen

    def _probe(self, precision: str) -> float:
        """Seconds for three training steps in `precision` on a copy of the model; the run's own
        weights, optimizer and random state are left as they were."""
        t = self.cfg.train
        model = copy.deepcopy(self.model)
        optimizer = make_optimizer(self.cfg, model.parameters())
        batches = make_batches(self.train_data, t.batch_size, t.batch_by, t.batching, t.sort_k, t.seed, 0)[:3]
        rng = torch.get_rng_state()
        dtype = torch.bfloat16 if precision == "bf16" else None
        start = time.perf_counter()
        for idx in batches:
            batch = collate(self.train_data.examples_at(idx)).to(self.device)
            with torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None):
                loss = batch_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        torch.set_rng_state(rng)
        return time.perf_counter() - start


def loss_terms(cfg: Config) -> list[LossTerm]:
    """The terms `cfg`'s train section adds to the NLL: guided alignment (train.guided_alignment)
    and the agreement of the two directions (train.agreement); config validation refuses both
    at once."""
    t = cfg.train
    terms: list[LossTerm] = []
    if t.guided_alignment:
        terms.append(GuidedAlignment(cfg))
    if t.agreement:
        terms.append(Agreement(cfg))
    return terms


def _bar(**kw):
    from tqdm import tqdm

    return tqdm(dynamic_ncols=True, **kw)
