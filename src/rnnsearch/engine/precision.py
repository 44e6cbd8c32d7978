"""``precision: auto``: bf16 matrix products only where they measure faster on this machine.

bf16 is not faster everywhere: a CPU without bf16 matrix units (no AVX512-BF16, no AMX)
converts and emulates, and even with them small products and the casts around them can cost
more than they save (docs/benchmarks.md has both cases). So ``auto`` is fp32 without measuring
where the hardware has no bf16 units, and elsewhere times the real work both ways the first
time — a few decoding passes, or a few training steps on a copy of the model — and keeps the
faster. The verdict is cached per machine, torch version and model size in
``$RNNSEARCH_CACHE/precision.json`` (default ``~/.cache/rnnsearch``), so the probe runs once.
"""

from __future__ import annotations

import functools
import json
import logging
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import torch

from rnnsearch.config import Config, decode_options
from rnnsearch.io import atomic_write_text, default_cache

log = logging.getLogger("rnnsearch")

MARGIN = 1.05  # bf16 must be this much faster: a tie keeps fp32's exact products


def cache_file() -> Path:
    return default_cache() / "precision.json"


def model_size(cfg: Config, src_vocab: int, tgt_vocab: int, work: str) -> str:
    """The part of a cache key that says which model and work a verdict is for."""
    m = cfg.model
    return (f"{m.arch} emb {m.emb} hidden {m.hidden} align {m.align} maxout {m.maxout} "
            f"vocab {src_vocab}/{tgt_vocab} {work}")


BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo flags of CPU bf16 matrix instructions


@functools.cache
def cpu_info() -> tuple[str, set[str]]:
    """The CPU's model name and feature flags, from /proc/cpuinfo (empty where there is none)."""
    name, flags = platform.processor() or platform.machine(), set[str]()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return name, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            name = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
    return name, flags


def has_bf16_units(device: torch.device) -> bool:
    """Whether bf16 products can be fast here at all: a GPU that supports bf16, or a CPU with
    AVX512-BF16 or AMX-BF16."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return bool(BF16_FLAGS & cpu_info()[1])


def machine(device: torch.device) -> str:
    """The GPU's name, or the CPU's with the bf16 instructions it has: two CPUs may report one
    name (both of this project's AMD EPYC VMs say "AMD EPYC") and differ in exactly those."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    name, flags = cpu_info()
    units = sorted(flags & BF16_FLAGS)
    return f"{name} ({' '.join(units)})" if units else name


def choose(kind: str, device: torch.device, size: str, timer: Callable[[str], float]) -> str:
    """fp32 or bf16 for `kind` ("train" or "decode") of a model of `size` on `device`.
    `timer(precision)` runs the work once and returns its seconds; each precision is timed
    twice, interleaved, and the faster run of each compared."""
    if not has_bf16_units(device):
        return "fp32"
    key = f"{kind} | {machine(device)} | torch {torch.__version__} | {size}"
    path = cache_file()
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    if cache.get(key) in ("fp32", "bf16"):
        return cache[key]
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for _ in range(2):
        for precision in times:
            times[precision].append(timer(precision))
    fp32, bf16 = min(times["fp32"]), min(times["bf16"])
    choice = "bf16" if fp32 > bf16 * MARGIN else "fp32"
    log.info("precision auto (%s): %s (a probe took %.3fs in fp32, %.3fs in bf16; cached in %s)",
             kind, choice, fp32, bf16, path)
    cache[key] = choice
    try:
        atomic_write_text(path, json.dumps(cache, indent=1) + "\n")
    except OSError as e:  # a read-only home: measure again next time
        log.warning("precision auto: could not cache the choice in %s (%s)", path, e)
    return choice


class PrecisionProbe:
    """decode.precision for one loaded model: fp32 or bf16, with "auto" measured (:func:`choose`)
    the first time it is asked and kept. `decode(sources)` decodes lists of source piece ids as
    the model's decoding does (Translator's); `vocab` is (source, target) vocabulary sizes;
    `quantized` "int8" (products swapped for int8 ones) is always fp32."""

    def __init__(self, cfg: Config, device: torch.device, vocab: tuple[int, int],
                 decode: Callable[[list[list[int]]], object], quantized: str = "none"):
        self.cfg, self.device, self.vocab, self.decode, self.quantized = cfg, device, vocab, decode, quantized
        self.auto: Optional[str] = None  # what "auto" chose, once

    def resolve(self, precision: Optional[str] = None) -> str:
        """fp32 or bf16: `precision`, else decode.precision; "auto" measures which decodes
        faster here, once."""
        precision = decode_options(self.cfg.decode, {"precision": precision}).precision
        if self.quantized != "none":  # int8 products; what is left (softmaxes, gates) stays fp32
            return "fp32"
        if precision != "auto":
            return precision
        if self.auto is None:
            size = model_size(self.cfg, *self.vocab, f"beam {self.cfg.decode.beam}")
            self.auto = choose("decode", self.device, size, self.probe)
        return self.auto

    def probe(self, precision: str) -> float:
        """Seconds to decode 32 fixed 16-piece sources with the model's beam in `precision`."""
        g = torch.Generator().manual_seed(0)
        pieces = torch.randint(4, self.vocab[0], (32, 16), generator=g).tolist()
        start = time.perf_counter()
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            self.decode(pieces)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start
