"""Time to BLEU: each system trains on Multi30k De→En for the same wall-clock budget, and the
model it had at fixed minutes is scored on test_2016_flickr (beam 5, sacrebleu). Run by
``python -m benchmarks.bench --curve``; see docs/benchmarks.md, "Time to BLEU".

The clock of a system starts when its training command is launched, so whatever it does before
its first step (reading text, building vocabularies, building the model) counts against it, as
it does for a user. Each system saves checkpoints often (rnnsearch: ``train.save_every_minutes``;
the anchors: every ``--save-steps`` steps), and a watcher keeps, for every scoring point, the
newest checkpoint whose file was complete by then; the rest are deleted as training goes, so
the disk holds a handful at a time. After the last point (plus a grace period for a checkpoint
being written) the process is stopped. Scoring happens after all training, so decoding never
competes with a timed run.

Systems:

* ``rnnsearch``: the shipped CPU recipe, ``configs/multi30k_de_en_cpu.yaml`` (its validation at
  epoch ends included in its clock, as for a user);
* ``rnnsearch-bench``: the side-by-side benchmark's model (common.BENCH_CONFIG: the anchors'
  sizes, no regularisation);
* ``opennmt``, ``joeynmt`` and ``marian``: as in the side-by-side benchmark (anchors.py) but for
  OpenNMT-py's learning rate (``BEST_LR``: its best known setting here), with checkpoints every
  ``--save-steps`` steps (Marian's ``model.iterN.npz``, its threads ``--cpu-threads``); JoeyNMT
  saves only when it validates, so it validates on the first 100 validation sentences (about a
  second each time).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from benchmarks import anchors
from benchmarks.common import BENCH_CONFIG, ROOT, SIZES, bleu, gemm_gflops

GRACE = 45.0  # seconds past the last point before the process is stopped: a checkpoint finishes
SYSTEMS = ("rnnsearch", "rnnsearch-bench", "opennmt", "joeynmt", "marian")
# An anchor's best known learning rate for this task, its default here: Adam 2e-3 took OpenNMT-py
# to 30 BLEU in 11.9 minutes against 12.8 at the side-by-side run's 1e-3 (the 2026-12-01 curve,
# docs/benchmarks.md); "opennmt@lr0.001" is the other.
BEST_LR = {"opennmt": 0.002}
OPTIONS = {"lr": "lr", "drop": "dropout"}  # NAME@lrX, NAME@dropX: what each changes


def system_options(name: str) -> tuple[str, dict[str, float]]:
    """"opennmt@lr0.002@drop0.3" -> ("opennmt", {"lr": 0.002, "dropout": 0.3}): a system with its
    learning rate (any system) or its dropout (OpenNMT-py) changed."""
    base, *options = name.split("@")
    out = {}
    for option in options:
        prefix = next((p for p in OPTIONS if option.startswith(p)), None)
        if prefix is None or (prefix == "drop" and base != "opennmt"):
            raise ValueError(f"{name}: unknown option @{option} (@lrX for any system, @dropX for opennmt)")
        out[OPTIONS[prefix]] = float(option[len(prefix):])
    return base, out


def interval(offset: float, points: list[float]) -> int:
    """Index of the first point (minutes) at or after `offset` seconds; len(points) if past them all."""
    for k, p in enumerate(points):
        if offset <= p * 60:
            return k
    return len(points)


def prune(files: list[Path], start: float, points: list[float], settle: float = 10.0) -> None:
    """Delete every checkpoint that a newer one, settled for `settle` seconds (written through),
    supersedes at the same scoring point, and every one past the last point."""
    now = time.time()
    seen = []
    for f in files:
        try:
            seen.append((f.stat().st_mtime, f))
        except FileNotFoundError:
            continue
    seen.sort()
    newest_settled: dict[int, float] = {}
    for mtime, _ in seen:
        if now - mtime >= settle:
            newest_settled[interval(mtime - start, points)] = mtime
    for mtime, f in seen:
        k = interval(mtime - start, points)
        if k == len(points) or mtime < newest_settled.get(k, -1.0):
            f.unlink(missing_ok=True)


def pick(files: list[Path], start: float, points: list[float]) -> list[tuple[float, Path | None, float]]:
    """For each point: (minutes, the newest checkpoint written by then or None, its minute)."""
    stamped = sorted((f.stat().st_mtime - start, f) for f in files if f.exists())
    out = []
    for p in points:
        before = [(t, f) for t, f in stamped if t <= p * 60]
        out.append((p, before[-1][1], before[-1][0] / 60) if before else (p, None, 0.0))
    return out


def timed_run(cmd: list[str], log_file: Path, env: dict, checkpoints, points: list[float]) -> dict:
    """Run `cmd` until the last point (+GRACE), pruning checkpoints as it goes; the picks by point."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "w") as out, open(os.devnull) as inp:
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=inp,
                                env={**os.environ, **env}, start_new_session=True)
        deadline = start + points[-1] * 60 + GRACE
        while time.time() < deadline and proc.poll() is None:
            time.sleep(2.0)
            prune(checkpoints(), start, points)
        ended_early = proc.poll() is not None
        if not ended_early:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if ended_early and proc.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-25:])
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}; log {log_file}:\n{tail}")
    prune(checkpoints(), start, points, settle=0.0)
    return {"start": start, "picks": pick(checkpoints(), start, points)}


def minutes_to(target: float, points: list[list[float]]) -> float | None:
    """The first minute at which the curve (linear between points, from (0, 0)) reaches `target`."""
    prev = (0.0, 0.0)
    for m, b in points:
        if b is not None and b >= target:
            m0, b0 = prev
            return round(m0 + (target - b0) / (b - b0) * (m - m0), 2) if b > b0 else m
        if b is not None:
            prev = (m, b)
    return None


# -- the systems --------------------------------------------------------------------------

def one_thread(threads: int) -> dict:
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT / "src")}


def train_rnnsearch(name: str, work: Path, data: dict, args, base_config: dict, lr: float | None) -> dict:
    d = data["dir"]
    cfg = json.loads(json.dumps(base_config))
    if lr is not None:
        cfg.setdefault("train", {})["lr"] = lr
    model = work / "model"
    cfg["model_dir"] = str(model)
    cfg["data"] = {**cfg.get("data", {}),
                   "train_src": str(d / "train.raw.src"), "train_tgt": str(d / "train.raw.tgt")}
    if name == "rnnsearch":
        cfg["data"].update(valid_src=str(d / "valid.raw.src"), valid_tgt=str(d / "valid.raw.tgt"))
    else:  # the benchmark model has no validation (as in the side-by-side runs)
        cfg["data"]["max_len"] = 200
    cfg.setdefault("train", {}).update({
        "max_epochs": 0, "max_minutes": args.points[-1] + 5, "save_every_minutes": args.save_minutes,
        "keep_last": 10 ** 6, "progress": False, "tensorboard": False, "threads": args.threads,
        "log_every": 50})
    work.mkdir(parents=True, exist_ok=True)
    path = work / "config.yaml"
    path.write_text(json.dumps(cfg, indent=1))  # JSON is YAML
    snaps = lambda: list((model / "checkpoints").glob("step-*.safetensors"))  # noqa: E731
    return timed_run([sys.executable, "-m", "rnnsearch", "train", str(path)], work / "train.log",
                     one_thread(args.threads), snaps, args.points)


def score_rnnsearch(snapshot: Path, work: Path, data: dict, threads: int) -> list[str]:
    """Decode with one snapshot: a model directory of links to the run's files and this weight file."""
    model = snapshot.parent.parent
    view = work / f"view-{snapshot.stem}"
    view.mkdir(parents=True, exist_ok=True)
    for f in model.iterdir():
        if f.is_file() and f.suffix != ".safetensors" and not (view / f.name).exists():
            (view / f.name).symlink_to(f)
    (view / "model.safetensors").unlink(missing_ok=True)
    (view / "model.safetensors").symlink_to(snapshot)
    out = work / f"{snapshot.stem}.beam5"
    anchors.run([sys.executable, "-m", "rnnsearch", "translate", "--model", str(view), "--input",
                 str(data["dir"] / "test.raw.src"), "--output", str(out), "--beam", "5", "--device", "cpu"],
                out.with_suffix(".log"), env=one_thread(threads))
    return out.read_text().splitlines()


def train_opennmt(work: Path, data: dict, args, python: Path, lr: float | None,
                  dropout: float | None = None) -> dict:
    sizes = {**anchors_sizes(), "save": args.save_steps, **({"lr": lr} if lr else {}),
             **({"dropout": dropout} if dropout is not None else {})}
    cfg_path = anchors.opennmt_config(work, data["dir"], 10 ** 6, sizes)
    bindir = python.parent
    if not (work / "vocab.tgt").exists():
        anchors.run([str(bindir / "onmt_build_vocab"), "-config", str(cfg_path), "-n_sample", "-1"],
                    work / "vocab.log")
    ckpts = lambda: list(work.glob("model_step_*.pt"))  # noqa: E731
    return timed_run([str(bindir / "onmt_train"), "-config", str(cfg_path)], work / "train.log",
                     {**anchors.OLD_TORCH_LOAD, **one_thread(args.threads)}, ckpts, args.points)


def train_joeynmt(work: Path, data: dict, args, python: Path, lr: float | None) -> dict:
    sizes = {**anchors_sizes(), "save": args.save_steps, **({"lr": lr} if lr else {})}
    cfg_path = anchors.joeynmt_config(work, data["dir"], 10 ** 6, sizes, dev="valid100")
    ckpts = lambda: [p for p in (work / "model").glob("*.ckpt") if p.stem.isdigit()]  # noqa: E731
    cmd = [str(python), "-m", "joeynmt", "train", str(cfg_path), "--skip-test"]
    return timed_run(cmd, work / "train.log", one_thread(args.threads), ckpts, args.points)


def train_marian(work: Path, data: dict, args, python: Path, lr: float | None) -> dict:
    sizes = {**anchors_sizes(), "save": args.save_steps, **({"lr": lr} if lr else {})}
    shutil.rmtree(work, ignore_errors=True)  # Marian resumes a model it finds
    work.mkdir(parents=True)
    cmd = anchors.marian_train_command(python, work, data["dir"], 10 ** 6, sizes, args.threads)
    ckpts = lambda: list(work.glob("model.iter*.npz"))  # noqa: E731
    return timed_run(cmd, work / "train.log", one_thread(args.threads), ckpts, args.points)


def anchors_sizes() -> dict:
    """The sizes the anchors are given (a copy: each run adds its own keys)."""
    return dict(SIZES)


def score_anchor(name: str, ckpt: Path, work: Path, data: dict, python: Path, threads: int) -> list[str]:
    out = work / f"{ckpt.stem}.beam5"
    env = one_thread(threads)
    if name == "opennmt":
        cmd = [str(python.parent / "onmt_translate"), "-model", str(ckpt),
               "-src", str(data["dir"] / "test.src"), "-output", str(out), "-beam_size", "5",
               "-batch_size", "64", "-batch_type", "sents"]
        anchors.run(cmd, out.with_suffix(".log"), env={**anchors.OLD_TORCH_LOAD, **env})
        lines = out.read_text().splitlines()
    elif name == "marian":
        vocabs = [str(ckpt.parent / "vocab.src.yml"), str(ckpt.parent / "vocab.tgt.yml")]
        anchors.marian_translate(python, str(ckpt), vocabs, data["dir"] / "test.src", out, 5, 64, threads)
        lines = out.read_text().splitlines()
    else:
        cfg = anchors.joeynmt_config(ckpt.parent.parent, data["dir"], 1000, anchors_sizes(), beam=5,
                                     test_only=True)
        anchors.run([str(python), "-m", "joeynmt", "test", str(cfg), "--ckpt", str(ckpt), "-o", str(out)],
                    out.with_suffix(".log"), env=env)
        lines = Path(str(out) + ".test").read_text().splitlines()
    return [data["tgt_tok"].sp.decode_pieces(x.split()) for x in lines]


# -- the run ------------------------------------------------------------------------------

def run_curve(args, data: dict, pythons: dict, log) -> dict:
    """Train every system of `args.systems` for the same minutes (`args.jobs` at a time), then
    score the checkpoint each had at every point; the curves, minutes to 30 BLEU and GEMM rates."""
    work = Path(args.work).resolve() / "curve"
    shipped = yaml.safe_load((ROOT / args.rnnsearch_config).read_text())
    shipped.pop("model_dir", None)

    def train(name: str) -> dict:
        where = work / name
        base, options = system_options(name)
        lr = options.get("lr", BEST_LR.get(base))
        log(f"curve: training {name} (lr {lr or 'as configured'}) for {args.points[-1]} minutes in {where}")
        if base == "rnnsearch":
            return train_rnnsearch(base, where, data, args, shipped, lr)
        if base == "rnnsearch-bench":
            return train_rnnsearch(base, where, data, args, BENCH_CONFIG, lr)
        if base == "opennmt":
            return train_opennmt(where, data, args, pythons[base], lr, options.get("dropout"))
        if base == "marian":
            return train_marian(where, data, args, pythons[base], lr)
        return train_joeynmt(where, data, args, pythons[base], lr)

    gemm = [gemm_gflops()]
    with ThreadPoolExecutor(args.jobs) as pool:  # --jobs systems at a time, each with --threads threads
        runs = dict(zip(args.systems, pool.map(train, args.systems)))
    gemm.append(gemm_gflops())

    def score(item) -> tuple[str, float, float | None]:
        name, (minutes, ckpt, saved) = item
        if ckpt is None:
            return name, minutes, None
        where = work / name / "scores"
        if name.startswith("rnnsearch"):
            hyps = score_rnnsearch(ckpt, where, data, args.threads)
        else:
            base = system_options(name)[0]
            hyps = score_anchor(base, ckpt, where, data, pythons[base], args.threads)
        value = bleu(hyps, data["test_refs"])
        log(f"curve: {name} at {minutes} min ({ckpt.name}, saved at {saved:.2f} min): BLEU {value}")
        return name, minutes, value

    items = [(name, p) for name in args.systems for p in runs[name]["picks"]]
    with ThreadPoolExecutor(args.jobs) as pool:
        scored = list(pool.map(score, items))
    systems = {}
    for name in args.systems:
        points = [[m, b] for n, m, b in scored if n == name]
        saved = [[p, round(s, 2), c.name if c else None] for p, c, s in runs[name]["picks"]]
        systems[name] = {"points": points, "minutes_to_30": minutes_to(30.0, points), "checkpoints": saved}
    return {"systems": systems, "gemm_gflops": [round(g, 1) for g in gemm]}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"rnnsearch": "rnnsearch (configs/multi30k_de_en_cpu.yaml)",
              "rnnsearch-bench": "rnnsearch, the anchors' model, no regularisation",
              "opennmt": "OpenNMT-py 3.5.1", "joeynmt": "JoeyNMT 2.3.0", "marian": "Marian 1.12.42 (s2s)"}

    def label(name: str) -> str:
        base, options = system_options(name)
        lr = options.get("lr", BEST_LR.get(base))
        drop = f", dropout {options['dropout']:g}" if "dropout" in options else ""
        return labels.get(base, base) + (f", Adam {lr:g}" if lr else "") + drop

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for name, s in result["systems"].items():
        pts = [(m, b) for m, b in s["points"] if b is not None]
        ax.plot([0] + [m for m, _ in pts], [0] + [b for _, b in pts], marker="o", label=label(name))
    ax.axhline(30, color="grey", lw=0.8, ls=":")
    threads = "1 thread" if result["threads"] == 1 else f"{result['threads']} threads"
    ax.set_xlabel(f"training wall-clock, minutes ({threads} a system, {result['jobs']} at a time)")
    ax.set_ylabel("BLEU, test_2016_flickr, beam 5")
    ax.set_title(f"Multi30k De→En on {result['machine']}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
