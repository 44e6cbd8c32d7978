"""What a training run starts from and stops by: its model directory (fresh, or resumed with the
saved config and the limits given now), the seed and CPU threads, the optimizer (Appendix B:
Adadelta, or Adam), and SIGINT/SIGTERM, which stop it at a checkpoint it can resume from."""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import Config, TrainConfig
from rnnsearch.engine.checkpoint import CheckpointError, read_config

log = logging.getLogger("rnnsearch")


def prepare_model_dir(cfg: Config, resume: bool) -> Config:
    """The config to train with: on resume the saved one (with `cfg`'s limits), the directory
    cleared of a previous run's DONE and half-written files; a fresh run must not overwrite one."""
    model_dir = Path(cfg.model_dir)
    if resume:
        cfg = resume_config(cfg, model_dir)
        (model_dir / "DONE").unlink(missing_ok=True)
        for stale in model_dir.glob(".*.tmp"):  # of a killed run
            stale.unlink()
    elif (model_dir / "train_state.safetensors").exists():
        raise CheckpointError(f"{model_dir}: already holds a training run; use --resume to continue it "
                              "or choose another model_dir")
    return cfg



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



def seed_and_threads(t: TrainConfig) -> None:
    """Python's and torch's random numbers from train.seed; torch's CPU threads: train.threads, or
    with 0 (and no OMP_NUM_THREADS) one a free core, so that a run beside a busy process does not
    oversubscribe the cores (two 2-thread runs on 2 cores ran 20x slower than one thread each)."""
    random.seed(t.seed)
    torch.manual_seed(t.seed)
    if t.threads:
        torch.set_num_threads(t.threads)
    elif "OMP_NUM_THREADS" not in os.environ:
        free, cores, load = free_cores()
        torch.set_num_threads(free)
        log.info("threads: %d (%d cores, %.1f busy; train.threads or OMP_NUM_THREADS sets them)",
                 free, cores, load)



def free_cores(load: float | None = None) -> tuple[int, int, float]:
    """(threads for this process, the cores it may run on, the busy cores): the cores of its
    affinity less those busy now (rounded), shared among torchrun's local ranks, at least one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    load = busy_cores() if load is None else load
    ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return max(1, (cores - min(cores - 1, round(load))) // ranks), cores, load



def busy_cores(seconds: float = 0.25) -> float:
    """How many cores other processes keep busy now: /proc/stat's busy share over `seconds`
    times the machine's cores (this process sleeps meanwhile); else the 1-minute load average,
    which lags (a finished `pip install` still counts for a minute)."""
    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        return sum(ticks), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = 1.0 - (idle1 - idle0) / max(total1 - total0, 1)
    return busy * (os.cpu_count() or 1)



def make_optimizer(cfg: Config, params) -> torch.optim.Optimizer:
    t = cfg.train
    assert t.eps is not None  # resolved when the config is made (TrainConfig.__post_init__)
    if t.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=t.lr, rho=t.rho, eps=t.eps, weight_decay=t.weight_decay)
    # fused: one kernel over every parameter instead of a loop over tensors, 28 -> 5.5 ms a step on
    # the benchmark model (docs/benchmarks.md, "CPU changes measured")
    return torch.optim.Adam(params, lr=t.lr, eps=t.eps, weight_decay=t.weight_decay, fused=True)



class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by SIGINT or SIGTERM after writing a resumable checkpoint (no DONE)."""

    def __init__(self, signum: int, model_dir: Path, step: int):
        self.signum, self.model_dir, self.step = signum, model_dir, step
        super().__init__(f"training interrupted by {signal.Signals(signum).name} at step {step}; its "
                         f"checkpoint is saved: `rnnsearch train --resume {model_dir}` continues it")



class StopRequests:
    """SIGINT (Ctrl-C) and SIGTERM while a run trains: the first asks it to stop after the current
    update and save a checkpoint to resume from, so at most one update's work is lost instead of
    everything since the last save; a second one stops at once, the way it would without this.
    A signal the process started out ignoring stays ignored, as Python leaves it: a shell without
    job control starts its background jobs so, for a Ctrl-C at the terminal not to stop them.
    Installed only in the main thread (Python delivers signals there); a no-op elsewhere."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.signum: Optional[int] = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._request) for s in self.SIGNALS
                              if signal.getsignal(s) is not signal.SIG_IGN}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    def _request(self, signum: int, frame) -> None:
        if self.signum is None:
            self.signum = signum
            return
        self.__exit__()  # asked twice: the handlers from before this run take the signal now
        signal.raise_signal(signum)

