"""JoeyNMT, OpenNMT-py and Marian as anchors for the side-by-side benchmark (benchmarks.bench):
install, configure, run, read logs.

Each anchor lives in its own virtualenv, made by `ensure_venv` (the Python ones with the torch
version this process runs, so all use the same kernels; Marian is C++ and gets none). Nothing of
theirs is in this repository: the script installs them from PyPI and writes their configs or
command lines at run time.

What each anchor needs to run beside torch 2.13 (recorded in docs/benchmarks.md):

* OpenNMT-py 3.5.1 declares torch<2.3. It is installed with --no-deps and its other
  requirements are installed explicitly. Its checkpoints pickle an argparse.Namespace, which
  torch >= 2.6 refuses to load by default (weights_only=True): its processes run with
  TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (they load only the checkpoints this script made).
  No source is patched.
* JoeyNMT 2.3.0 imports importlib_metadata without declaring it: installed explicitly. Its
  "plateau" scheduler passes verbose= to ReduceLROnPlateau, which torch 2.13 no longer takes:
  it is given a constant-rate schedule (exponential, factor 1.0) instead, which is what the
  benchmark wants anyway.
* Marian 1.12.42 is the `pymarian` wheel, run through its `pymarian` command (Marian's own main:
  `pymarian train`, `decode`, `convert` are marian, marian-decoder and marian-conv).

JoeyNMT and OpenNMT-py are configured as close to the benchmark's RNNsearch as they allow; the
differences (their decoders are 512 wide with input feeding and an attention-vector layer, where
RNNsearch's decoder state is 256 with a maxout deep output) are listed in docs/benchmarks.md,
and each system's FLOPs per token are counted for its own architecture.

Marian's `--type s2s` (Nematus/dl4mt's form) on the same BPE 8k pieces (Marian's vocabularies
are built from them, with its own </s> and <unk>), emb 256, 256 a direction, Adam 0.001, clip 1,
batches of 64 sentences, no dropout, the loss per target token. How it differs from RNNsearch
(docs/benchmarks.md, "Marian", links here):

* decoder: a conditional GRU, two GRU cells a step (y_{i-1} and s_{i-1} -> s'_i; the attention
  queried with s'_i; c_i and s'_i -> s_i), where RNNsearch has one GRU with input [E y_{i-1}; c_i]
  and the attention queried with s_{i-1} (Appendix A); the state is 256 wide in both;
* output: a tanh layer [E y_{i-1}; s_i; c_i] -> 256, then 256 x V, reading the new s_i, where
  RNNsearch's deep output t~_i = U_o s_{i-1} + V_o E y_{i-1} + C_o c_i (2 x 512) is max-pooled in
  pairs to t_i (512) before a 512 x V layer: no maxout, an output layer half as wide;
* attention: as wide as the annotations, 512 (W_comb_att 256 x 512, Wc_att 512 x 512, v 512),
  where RNNsearch's alignment model W_a, U_a, v_a is n' = 256;
* initial state: s_0 = tanh(W mean_j h_j), the annotations' mean, where RNNsearch's is
  s_0 = tanh(W_s <-h_1);
* embeddings untied in both (Marian's default); the GRUs apply the reset gate to U h (as
  torch's), where RNNsearch's default is the paper's (before U); beam scores divided by the
  length in both (--normalize 1, alpha 1).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from benchmarks.common import memory_kb

# torch >= 2.6 loads checkpoints weights-only by default; the anchors pickle more than weights
OLD_TORCH_LOAD = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}

ANCHORS = {
    "opennmt": {
        "package": "OpenNMT-py==3.5.1",
        "no_deps": True,  # it pins torch<2.3; every other requirement of its wheel, explicitly:
        "requirements": ["configargparse", "ctranslate2>=4,<5", "tensorboard>=2.3", "flask", "waitress",
                         "pyonmttok>=1.37,<2", "pyyaml", "sacrebleu", "rapidfuzz", "pyahocorasick",
                         "fasttext-wheel", "spacy", "six"],
        "check": "import onmt.bin.train, onmt.bin.translate, onmt.bin.build_vocab",
    },
    "joeynmt": {
        "package": "joeynmt==2.3.0",
        "no_deps": False,
        "requirements": ["importlib-metadata"],  # imported by joeynmt.helpers, not declared
        "check": "import joeynmt.training, joeynmt.prediction",
    },
    "marian": {  # C++ (CPU and CUDA) in one 600 MB wheel; no torch, so none is installed
        "package": "pymarian==1.12.42",
        "no_deps": False,
        "torch": False,
        "requirements": [],
        "check": "from pymarian import Trainer, Translator",
    },
}


def _pip_torch() -> str:
    import torch

    return "torch==" + torch.__version__.split("+")[0]


def ensure_venv(name: str, root: Path, log) -> Path:
    """The python of anchor `name`'s virtualenv under root, installing it on first use."""
    spec = ANCHORS[name]
    venv = root / name
    python = venv / "bin" / "python"
    marker = venv / "rnnsearch-bench.json"
    wanted = {"package": spec["package"], "requirements": spec["requirements"]}
    if spec.get("torch", True):
        wanted["torch"] = _pip_torch()
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return python
    log(f"installing {spec['package']} {wanted.get('torch', '')} into {venv} (once; a few minutes)")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip_log = venv / "pip.log"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    torch = [wanted["torch"]] if "torch" in wanted else []
    if torch:  # first and pinned: an unpinned torch from an anchor's requirements would pull a CUDA build
        run(pip + torch, pip_log, append=True)
    if spec["no_deps"]:
        run(pip + ["--no-deps", spec["package"]], pip_log, append=True)
        run(pip + torch + spec["requirements"], pip_log, append=True)
    else:
        run(pip + torch + [spec["package"]] + spec["requirements"], pip_log, append=True)
    run([str(python), "-W", "ignore", "-c", spec["check"]], venv / "check.log")
    marker.write_text(json.dumps(wanted))
    return python


@dataclass
class Run:
    """One finished process: its wall time, peak resident memory and output."""

    seconds: float
    peak_rss_mb: float
    output: str


def run(cmd: list[str], log_file: Path, env: Optional[dict] = None, append: bool = False) -> Run:
    """Run cmd to completion. Its peak RSS is its own VmHWM, read every 50 ms while it runs: wait4's
    ru_maxrss can hold this process's peak instead (Linux carries a parent's high-water mark across
    fork and exec; with four models loaded here, every decoder read 730 MB). wait4's figure only
    where /proc gave none (no /proc, or a process gone within 50 ms)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    hwm_kb = 0
    with open(log_file, "a" if append else "w") as out, open(os.devnull) as inp:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=inp,
                                env={**os.environ, **(env or {})})
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            hwm_kb = max(hwm_kb, memory_kb(proc.pid).get("VmHWM", 0))
            time.sleep(0.05)
    seconds = time.perf_counter() - start
    text = log_file.read_text(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = "\n".join(text.splitlines()[-25:])
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited with {code}; log {log_file}:\n{tail}")
    return Run(seconds, (hwm_kb or usage.ru_maxrss) / 1024, text)


def steady(values: list[float], skip: int = 2) -> float:
    """Median of the logged throughputs after the first `skip` windows (start-up, data loading)."""
    vals = sorted(values[skip:] if len(values) > skip + 2 else values)
    if not vals:
        raise RuntimeError("no throughput was logged")
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


# -- OpenNMT-py ------------------------------------------------------------------

def opennmt_config(work: Path, data: Path, steps: int, sizes: dict) -> Path:
    cfg = {
        "save_data": str(work), "overwrite": True,
        "src_vocab": str(work / "vocab.src"), "tgt_vocab": str(work / "vocab.tgt"),
        "src_vocab_size": 100000, "tgt_vocab_size": 100000,
        "data": {"corpus_1": {"path_src": str(data / "train.src"), "path_tgt": str(data / "train.tgt")},
                 "valid": {"path_src": str(data / "valid.src"), "path_tgt": str(data / "valid.tgt")}},
        "encoder_type": "brnn", "decoder_type": "rnn", "rnn_type": "GRU", "layers": 1,
        "word_vec_size": sizes["emb"], "hidden_size": 2 * sizes["hidden"],  # brnn: half a direction
        "global_attention": "mlp", "input_feed": 1, "bridge": False,
        "dropout": [sizes.get("dropout", 0.0)],
        "optim": "adam", "learning_rate": sizes.get("lr", 0.001), "max_grad_norm": 1.0,
        "batch_size": sizes["batch"], "batch_type": "sents", "normalization": "tokens",
        "train_steps": steps, "valid_steps": 10 * steps, "save_checkpoint_steps": sizes.get("save", steps),
        "keep_checkpoint": -1,
        "save_model": str(work / "model"), "report_every": 20, "num_workers": 0, "seed": 1,
    }
    path = work / "config.yaml"
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=1))  # JSON is YAML
    return path


def opennmt_rates(log: str) -> list[float]:
    """Target tokens/s of each report: "Step 40/  200; ...; 1816/1866 tok/s;" is source/target."""
    return [float(m.group(1)) for m in re.finditer(r"Step \s*\d+/\s*\d+;.*?[\d.]+/\s*([\d.]+) tok/s;", log)]


def opennmt_seconds(log: str, sentences: int) -> float:
    """Decoding time without the model load: its per-sentence average (ms, one decimal) x n."""
    return float(re.search(r"Average translation time \(ms\): ([\d.]+)", log).group(1)) * sentences / 1000


def opennmt_train(python: Path, work: Path, data: Path, steps: int, sizes: dict) -> dict:
    cfg = opennmt_config(work, data, steps, sizes)
    bindir = python.parent
    if not (work / "vocab.tgt").exists():
        run([str(bindir / "onmt_build_vocab"), "-config", str(cfg), "-n_sample", "-1"], work / "vocab.log")
    done = run([str(bindir / "onmt_train"), "-config", str(cfg)], work / "train.log", env=OLD_TORCH_LOAD)
    rates = opennmt_rates(done.output)
    return {"tgt_tok_per_s": steady(rates), "reports": len(rates), "seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "model": str(work / f"model_step_{steps}.pt")}


def opennmt_translate(python: Path, model: str, src: Path, out: Path, beam: int, batch: int,
                      flags: tuple[str, ...] = ()) -> dict:
    """onmt_translate's time; `flags` e.g. ("-precision", "int8"): its dynamic 8-bit quantisation
    (CPU; 3.5.1 refuses the old -int8 as deprecated)."""
    done = run([str(python.parent / "onmt_translate"), "-model", model, "-src", str(src), "-output", str(out),
                "-beam_size", str(beam), "-batch_size", str(batch), "-batch_type", "sents", "-report_time",
                *flags], out.with_suffix(".log"), env=OLD_TORCH_LOAD)
    n = sum(1 for _ in open(src))
    return {"seconds": opennmt_seconds(done.output, n), "process_seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb}


# -- JoeyNMT -------------------------------------------------------------------------

def joeynmt_config(work: Path, data: Path, steps: int, sizes: dict, beam: int = 1,
                   test_only: bool = False, dev: str = "valid") -> Path:
    """JoeyNMT's config; with sizes["save"], it validates (on `dev`) and keeps a checkpoint every
    that many steps."""
    side = lambda lang: {"lang": lang, "level": "word", "lowercase": False, "normalize": False,  # noqa: E731
                         "max_length": 200, "min_length": 1, "voc_min_freq": 1, "voc_limit": 100000}
    data_cfg = {"train": str(data / "train"), "dev": str(data / dev), "test": str(data / "test"),
                "dataset_type": "plain", "src": side("src"), "trg": side("tgt")}
    if test_only:  # decode the test set only (JoeyNMT's test mode would decode dev too)
        del data_cfg["dev"]
    cfg = {
        "name": "bench", "joeynmt_version": "2.3.0", "model_dir": str(work / "model"), "use_cuda": False,
        "data": data_cfg,
        "testing": {"n_best": 1, "beam_size": beam, "beam_alpha": 1.0 if beam > 1 else 0.0,
                    "batch_size": sizes["batch"], "batch_type": "sentence", "eval_metrics": ["bleu"]},
        "training": {"optimizer": "adam", "learning_rate": sizes.get("lr", 0.001), "clip_grad_norm": 1.0,
                     # it needs a scheduler, and its "plateau" passes an argument torch 2.13 removed
                     # (verbose): an exponential decay by 1.0 keeps the rate constant
                     "scheduling": "exponential", "decrease_factor": 1.0,
                     "batch_size": sizes["batch"], "batch_type": "sentence", "normalization": "tokens",
                     "epochs": 1000, "updates": steps, "validation_freq": sizes.get("save", steps),
                     "logging_freq": 20, "early_stopping_metric": "ppl", "overwrite": True, "shuffle": True,
                     "random_seed": 1, "keep_best_ckpts": -1 if "save" in sizes else 1, "fp16": False,
                     "print_valid_sents": []},
        "model": {
            "initializer": "xavier_uniform", "embed_initializer": "normal", "init_rnn_orthogonal": True,
            "encoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": {"embedding_dim": sizes["emb"]},
                        "hidden_size": sizes["hidden"], "bidirectional": True, "dropout": 0.0,
                        "num_layers": 1},
            "decoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": {"embedding_dim": sizes["emb"]},
                        "hidden_size": 2 * sizes["hidden"], "dropout": 0.0, "hidden_dropout": 0.0,
                        "num_layers": 1, "input_feeding": True, "init_hidden": "bridge",
                        "attention": "bahdanau"},
        },
    }
    path = work / ("config.yaml" if not test_only else f"test_beam{beam}.yaml")
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg, indent=1))
    return path


def joeynmt_rates(log: str) -> list[float]:
    """Target tokens/s of each report: "..., Tokens per Sec:     1093, Lr: ..."."""
    return [float(m.group(1)) for m in re.finditer(r"Tokens per Sec:\s*([\d.]+)", log)]


def joeynmt_seconds(log: str) -> float:
    """Decoding time of the last data set decoded (the test set): "Generation took 1.7146[sec]."."""
    return [float(x) for x in re.findall(r"Generation took ([\d.]+)\[sec\]", log)][-1]


def joeynmt_train(python: Path, work: Path, data: Path, steps: int, sizes: dict) -> dict:
    cfg = joeynmt_config(work, data, steps, sizes)
    done = run([str(python), "-m", "joeynmt", "train", str(cfg), "--skip-test"], work / "train.log")
    rates = joeynmt_rates(done.output)
    return {"tgt_tok_per_s": steady(rates), "reports": len(rates), "seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "model": str(work / "model")}


def joeynmt_translate(python: Path, work: Path, data: Path, out: Path, beam: int, sizes: dict) -> dict:
    cfg = joeynmt_config(work, data, 1000, sizes, beam=beam, test_only=True)  # steps unused by test
    done = run([str(python), "-m", "joeynmt", "test", str(cfg), "-o", str(out)], out.with_suffix(".log"))
    return {"seconds": joeynmt_seconds(done.output), "process_seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "output": str(out) + ".test"}


def anchor_flops_per_target_token(emb: int, enc_hidden: int, dec_hidden: int, vocab: int,
                                  src_per_tgt: float, src_len: float) -> float:
    """Training FLOPs per target token of the anchors' RNN (counted like RNNsearch's).

    Per target token: output layer d*V, attention-vector layer [c_i; s_i] -> d ((ctx + d)*d),
    input-feeding GRU 3d*(m + d + d), query projection d*d and, per source word, the MLP score
    and the weighted sum (d + ctx). Per source word: bidirectional encoder
    2*3e*(m + e) and the key projection ctx*d (once, as JoeyNMT does; OpenNMT-py recomputes
    it every step, which is not counted). Training = 3 x forward, FLOPs = 2 x MACs.
    """
    m, e, d = emb, enc_hidden, dec_hidden
    ctx = 2 * e
    per_tgt = d * vocab + (ctx + d) * d + 3 * d * (m + d + d) + d * d + src_len * (d + ctx)
    per_src = 2 * 3 * e * (m + e) + ctx * d
    return 3 * 2 * (per_tgt + per_src * src_per_tgt)


# -- Marian -----------------------------------------------------------------------------

# Marian's CPU GEMM types beyond fp32, each a way of decoding the fp32 model: "online" ones pack or
# quantise the npz model's weights as it loads (--optimize --gemm-type: fbgemm; packed8 picks its
# AVX-512 or AVX2 kernel itself); the others are converted first (`pymarian convert -g TYPE`,
# i.e. marian-conv) and decoded from the .bin. `needs`: the CPU flag (lscpu) the kernel requires.
MARIAN_GEMMS = {
    "marian-packed8": {"gemm": "packed8", "convert": False, "needs": "avx2", "quantize": "int8"},
    "marian-packed16": {"gemm": "packed16", "convert": False, "needs": "avx2", "quantize": "fp16"},
    "marian-conv-packed8avx2": {"gemm": "packed8avx2", "convert": True, "needs": "avx2", "quantize": "int8"},
    "marian-conv-packed8avx512": {"gemm": "packed8avx512", "convert": True, "needs": "avx512f",
                                  "quantize": "int8"},
    "marian-conv-packed16": {"gemm": "packed16", "convert": True, "needs": "avx2", "quantize": "fp16"},
    "marian-conv-intgemm8": {"gemm": "intgemm8", "convert": True, "needs": "ssse3", "quantize": "int8"},
    "marian-conv-intgemm16": {"gemm": "intgemm16", "convert": True, "needs": "sse2", "quantize": "int16"},
}


def marian_variants(cpu_flags: list[str] | set[str]) -> dict[str, dict]:
    """The decoding variants of Marian's fp32 model that this CPU can run (MARIAN_GEMMS by flag)."""
    flags = set(cpu_flags)
    return {name: {"model_of": "marian", **{k: v for k, v in spec.items() if k != "needs"}}
            for name, spec in MARIAN_GEMMS.items() if spec["needs"] in flags}


def marian_model_options(sizes: dict) -> list[str]:
    """Marian's s2s at the benchmark's sizes: a bidirectional GRU encoder of sizes["hidden"] a
    direction, a one-layer conditional GRU decoder of the same width, additive attention, the
    output through a tanh layer of sizes["emb"], embeddings untied, no dropout or layer norm."""
    emb, hidden = str(sizes["emb"]), str(sizes["hidden"])
    return ["--type", "s2s", "--dim-emb", emb, "--dim-rnn", hidden, "--enc-type", "bidirectional",
            "--enc-cell", "gru", "--enc-depth", "1", "--dec-cell", "gru", "--dec-depth", "1",
            "--dec-cell-base-depth", "2", "--dropout-rnn", "0", "--dropout-src", "0", "--dropout-trg", "0"]


def marian_train_command(python: Path, work: Path, data: Path, steps: int, sizes: dict,
                         threads: int) -> list[str]:
    """`pymarian train` (Marian's own command line) on the benchmark's pieces: Adam, the loss per
    target token (as rnnsearch's), clipping at 1, batches of sizes["batch"] sentences sorted within
    100 batches (no --mini-batch-fit), a checkpoint every sizes["save"] updates, a report every 20;
    Marian builds its vocabularies (vocab.src.yml, vocab.tgt.yml) from the training pieces."""
    return [str(python.parent / "pymarian"), "train", "--model", str(work / "model.npz"),
            "--train-sets", str(data / "train.src"), str(data / "train.tgt"),
            "--vocabs", str(work / "vocab.src.yml"), str(work / "vocab.tgt.yml"),
            *marian_model_options(sizes),
            "--optimizer", "adam", "--learn-rate", str(sizes.get("lr", 0.001)), "--clip-norm", "1",
            "--cost-type", "ce-mean-words", "--mini-batch", str(sizes["batch"]), "--maxi-batch", "100",
            "--max-length", "200", "--after", f"{steps}u", "--disp-freq", "20u",
            "--save-freq", f"{sizes.get('save', steps)}u", "--cpu-threads", str(threads), "--seed", "1"]


def marian_rates(log: str) -> list[float]:
    """Target tokens/s of each report: "Ep. 1 : Up. 20 : Sen. 1,280 : Cost 6.86 : Time 5.51s :
    701.47 words/s : gNorm 0.6165" (Marian's "words" are the target labels, </s> included)."""
    return [float(m.group(1)) for m in re.finditer(r"Ep\. \S+ : Up\. \d+ : .*? : ([\d.]+) words/s", log)]


def marian_seconds(log: str) -> float:
    """Decoding time without the model load: "Total time: 3.40120s wall" (timed after loading)."""
    return float(re.search(r"Total time: ([\d.]+)s wall", log).group(1))


class MarianError(RuntimeError):
    """A Marian command that failed; the message is what Marian said (marian_error)."""


def marian_error(log: str, fallback: str = "") -> str:
    """What Marian said when it failed: its "Error: ..." lines, each once (else `fallback`'s first
    line: the command and its exit status)."""
    errors = [line.split("Error: ", 1)[1] for line in log.splitlines() if "Error: " in line]
    return "; ".join(dict.fromkeys(errors)) or (fallback.splitlines() or [""])[0]


def marian_run(cmd: list[str], log_file: Path) -> Run:
    """run, a failure raised as MarianError with Marian's own words from the whole log (a crash's
    call stack pushes them out of run's tail)."""
    try:
        return run(cmd, log_file)
    except RuntimeError as err:
        raise MarianError(marian_error(log_file.read_text(errors="replace"), str(err))) from err


def vocab_size(path: Path) -> int:
    """Entries of one of Marian's .yml vocabularies ("piece": id, a line each)."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def marian_train(python: Path, work: Path, data: Path, steps: int, sizes: dict, threads: int) -> dict:
    """Train from scratch in `work` (emptied first: Marian resumes a model it finds there)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    done = run(marian_train_command(python, work, data, steps, sizes, threads), work / "train.log")
    rates = marian_rates(done.output)
    vocabs = [str(work / "vocab.src.yml"), str(work / "vocab.tgt.yml")]
    return {"tgt_tok_per_s": steady(rates), "reports": len(rates), "seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb, "model": str(work / "model.npz"), "vocabs": vocabs,
            "tgt_vocab": vocab_size(Path(vocabs[1]))}


def marian_convert(python: Path, model: str, gemm: str) -> str:
    """marian-conv: `model` (.npz) as a .bin of GEMM type `gemm` beside it (once)."""
    out = Path(model).with_name(f"{Path(model).stem}.{gemm}.bin")
    if not out.exists():
        marian_run([str(python.parent / "pymarian"), "convert", "--from", model, "--to", str(out),
                    "--gemm-type", gemm], out.with_suffix(".log"))
    return str(out)


def marian_decode_command(python: Path, model: str, vocabs: list[str], src: Path, out: Path, beam: int,
                          batch: int, threads: int, gemm: str | None = None) -> list[str]:
    """`pymarian decode` (marian-decoder): batches of `batch` sentences sorted by length within 100
    batches, scores divided by the length (--normalize 1, as rnnsearch's alpha 1); `gemm`: an
    online GEMM type (--optimize --gemm-type)."""
    online = ["--optimize", "--gemm-type", gemm] if gemm else []
    return [str(python.parent / "pymarian"), "decode", "--models", model, "--vocabs", *vocabs,
            "--input", str(src), "--output", str(out), "--beam-size", str(beam), "--normalize", "1",
            "--mini-batch", str(batch), "--maxi-batch", "100", "--maxi-batch-sort", "src",
            "--cpu-threads", str(threads), "--quiet-translation", *online]


def marian_translate(python: Path, model: str, vocabs: list[str], src: Path, out: Path, beam: int,
                     batch: int, threads: int, gemm: str | None = None) -> dict:
    done = marian_run(marian_decode_command(python, model, vocabs, src, out, beam, batch, threads, gemm),
                      out.with_suffix(".log"))
    return {"seconds": marian_seconds(done.output), "process_seconds": done.seconds,
            "peak_rss_mb": done.peak_rss_mb}


def marian_flops_per_target_token(emb: int, hidden: int, vocab: int, src_per_tgt: float,
                                  src_len: float) -> float:
    """Training FLOPs per target token of Marian's s2s (counted like RNNsearch's).

    Per target token: the output layer m*V and the tanh layer before it ([y_{i-1}; s_i; c_i] -> m:
    (m + n + ctx)*m), the conditional GRU's first cell 3n*(m + n) and second 3n*(ctx + n), the
    attention's query projection n*ctx and, per source word, its score and the weighted sum
    (ctx + ctx; the attention is ctx = 2n wide). Per source word: the bidirectional encoder
    2*3n*(m + n) and the key projection ctx*ctx. s_0 (once a sentence) is left out. Training =
    3 x forward, FLOPs = 2 x MACs.
    """
    m, n = emb, hidden
    ctx = 2 * n
    per_tgt = (m * vocab + (m + n + ctx) * m + 3 * n * (m + n) + 3 * n * (ctx + n) + n * ctx
               + src_len * 2 * ctx)
    per_src = 2 * 3 * n * (m + n) + ctx * ctx
    return 3 * 2 * (per_tgt + per_src * src_per_tgt)
