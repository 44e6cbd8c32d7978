"""What several benchmarks share: the benchmark model, the Multi30k corpus, the machine's
description, the GEMM rate, BLEU, logging and the JSON result."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import sacrebleu
import torch

from rnnsearch.engine.precision import cpu_info

ROOT = Path(__file__).resolve().parents[1]  # the repository

# The benchmark model: the anchors' sizes (emb 256, bidirectional encoder 2 x 256, alignment 256,
# maxout 512), sentencepiece BPE 8k per side, batches of 64 sentences, Adam 0.001, clipping at 1.
BENCH_CONFIG = {
    "model": {"emb": 256, "hidden": 256, "align": 256, "maxout": 512},
    "vocab": {"kind": "bpe", "size": 8000},
    "train": {"optimizer": "adam", "lr": 0.001, "clip_norm": 1.0, "batch_size": 64, "batching": "bucket",
              "precision": "fp32"},
    "decode": {"precision": "fp32"},
}
SIZES = {"emb": 256, "hidden": 256, "batch": 64}  # what the anchors are given

# $RNNSEARCH_DATA/multi30k (a development copy) when set, else where
# `rnnsearch data get multi30k` writes
DEFAULT_MULTI30K = Path(os.environ.get("RNNSEARCH_DATA") or "data") / "multi30k"


def memory_kb(pid: int) -> dict[str, int]:
    """RssAnon and VmHWM of a process, in kB (empty once it has exited, or without /proc)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in text.splitlines())
            if k in ("RssAnon", "VmHWM")}


def has_multi30k(corpus: Path) -> bool:
    """Whether `corpus` holds Multi30k's training text (plain or .gz)."""
    return (corpus / "train.de.gz").exists() or (corpus / "train.de").exists()


def find(corpus: Path, stem: str) -> Path:
    """The file `stem` of a Multi30k directory, plain or .gz; exits naming it if neither is there."""
    for name in (stem, stem + ".gz"):
        if (corpus / name).exists():
            return corpus / name
    raise SystemExit(f"bench: {corpus} has no {stem} (or {stem}.gz); give --corpus a Multi30k directory")


def cpu_name() -> str:
    """The CPU's model name (rnnsearch's own reading of /proc/cpuinfo): the one name results carry."""
    return cpu_info()[0]


def cpu_features() -> list[str]:
    """The flags that decide this CPU's speed here (two machines may share one model name): the
    vector width, and the bf16 and int8 matrix instructions."""
    wanted = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx")
    return sorted(f for f in cpu_info()[1] if f.startswith(wanted))


def cpu_flags() -> set[str]:
    """Every flag /proc/cpuinfo gives this CPU (what picks Marian's GEMM types)."""
    return set(cpu_info()[1])


def architecture() -> str:
    """The instruction set as Python reports it ("x86_64", "aarch64"): not the CPU's name."""
    return f"{platform.machine()} {platform.processor() or ''}".strip()


def sync(device) -> None:
    """Wait for the GPU's queued work (nothing to wait for on a CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def gemm_gflops(n: int = 1024, repeats: int = 10, dtype: torch.dtype = torch.float32,
                device: str = "cpu") -> float:
    """This machine's matrix-multiply rate through torch (fp32 unless asked), for n x n x n products
    (on a GPU: n 8192, where large products reach the tensor cores' rate)."""
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    for _ in range(2):
        a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9


def bleu(hyp_lines: list[str], refs: list[str]) -> float:
    """Corpus BLEU (sacrebleu, 13a, cased), two decimals."""
    return round(sacrebleu.corpus_bleu(hyp_lines, [refs]).score, 2)


def log(msg: str) -> None:
    """A time-stamped progress line on stderr (stdout carries the JSON)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def print_result(result: dict, *files: Path, ensure_ascii: bool = True) -> None:
    """Print `result` as indented JSON, and write the same text to each of `files`."""
    text = json.dumps(result, indent=1, ensure_ascii=ensure_ascii)
    for path in files:
        path.write_text(text + "\n")
    print(text)
