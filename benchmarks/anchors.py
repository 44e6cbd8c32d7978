"""JoeyNMT and OpenNMT-py as anchors for the side-by-side benchmark (benchmarks.bench): install,
configure, run, read logs.

Each anchor lives in its own virtualenv, made by `ensure_venv` with the torch version this
process runs (so all three systems use the same kernels). Nothing of theirs is in this
repository: the script installs them from PyPI and writes their configs at run time.

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

Both are configured as close to the benchmark's RNNsearch as they allow; the differences
(their decoders are 512 wide with input feeding and an attention-vector layer, where
RNNsearch's decoder state is 256 with a maxout deep output) are listed in docs/benchmarks.md,
and each system's FLOPs per token are counted for its own architecture.
"""

from __future__ import annotations

import json
import os
import re
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
    wanted = {"package": spec["package"], "torch": _pip_torch(), "requirements": spec["requirements"]}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return python
    log(f"installing {spec['package']} with {wanted['torch']} into {venv} (once; a few minutes)")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip_log = venv / "pip.log"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    # torch first and pinned: an unpinned torch from an anchor's requirements would pull a CUDA build
    run(pip + [wanted["torch"]], pip_log, append=True)
    if spec["no_deps"]:
        run(pip + ["--no-deps", spec["package"]], pip_log, append=True)
        run(pip + [wanted["torch"]] + spec["requirements"], pip_log, append=True)
    else:
        run(pip + [wanted["torch"], spec["package"]] + spec["requirements"], pip_log, append=True)
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
