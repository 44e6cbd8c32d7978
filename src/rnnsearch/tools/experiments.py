"""``rnnsearch experiment``: controlled comparisons of attention models, one command each.

    length-curve  RNNencdec-30/-50 vs RNNsearch-30/-50 by source length (paper Figure 2)
    reverse       reversed source input for RNNencdec and RNNsearch (Sutskever et al. 2014)
    scores        additive vs dot vs general vs scaled dot: BLEU, speed, attention sharpness

Every model of an experiment gets the same size and the same training budget (wall-clock
minutes, or a number of steps, which other work on the machine cannot shorten); its validation
curve is kept so that an undertrained model is visible as such.
All experiments on a corpus share one directory (default ``experiments/CORPUS``): the data,
a pool of models named by a hash of their full config (RNNsearch-50 of the length curve is
also the unreversed RNNsearch of ``reverse`` and the additive model of ``scores``), and one
folder of results per experiment. Finished models are reused and interrupted ones resumed,
so a re-run continues where it stopped. Writes results.json, results.md and plots.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

from rnnsearch.config import apply_overrides, config_from_dict, merge_dicts
from rnnsearch.engine.decode.evaluate import bleu_by_length, score_corpus
from rnnsearch.io import DataError, atomic_write_text, read_lines

log = logging.getLogger("rnnsearch")

NAMES = ("length-curve", "reverse", "scores")
SIZE = {"emb": 128, "hidden": 128, "align": 128, "maxout": 128}


def experiment_systems(name: str) -> dict[str, dict]:
    """The systems of experiment `name` (one of NAMES): label -> what sets it apart (architecture,
    score function, max_len, reversed source), as config keys merged into every model's base.

    Every system names all four, so equal models of different experiments have equal
    definitions and share one trained model.
    """
    def system(arch: str, max_len: int = 50, reverse: bool = False, score: str = "additive") -> dict:
        return {"model": {"arch": arch, "score": score},
                "data": {"max_len": max_len, "reverse_source": reverse}}

    if name == "length-curve":
        return {f"{arch}-{n}": system(arch.lower(), max_len=n)
                for arch in ("RNNencdec", "RNNsearch") for n in (30, 50)}
    if name == "reverse":
        return {f"{arch}{' reversed' if rev else ''}": system(arch.lower(), reverse=rev)
                for arch in ("RNNencdec", "RNNsearch") for rev in (False, True)}
    return {score: system("rnnsearch", score=score) for score in ("additive", "dot", "general", "scaled_dot")}


def _model_name(raw: dict) -> str:
    """A pool directory name: readable, plus a hash of the experiment's own settings for it (not
    of the library's defaults, so a new config option does not orphan trained models). The thread
    count is left out: a model resumed with more threads, or on another machine, is the same model."""
    import hashlib

    identity = {**raw, "train": {k: v for k, v in raw.get("train", {}).items() if k != "threads"}}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    m, d = raw["model"], raw["data"]
    parts = [m["arch"], str(d["max_len"])] + (["reversed"] if d["reverse_source"] else [])
    if m["arch"] == "rnnsearch":
        parts.append(m["score"])
    return "-".join(parts) + "-" + key


def corpus_splits(corpus: str, out: Path, data_root: Path, train_sentences: int, seed: int,
            test_sentences: int = 1000, max_clauses: int = 5, valid_sentences: int = 1000) -> dict[str, str]:
    """The train, valid and test files of an experiment's corpus, by split and side ("train.src",
    ...): the synthetic corpus generated into `out`/data, or a real corpus found under `data_root`
    (a message says how to fetch it when it is not), cut to seeded subsamples of the sizes asked."""
    d = out / "data"
    if corpus == "synthetic":
        from rnnsearch.tools.apple_corpus import generate

        paths = {k: str(d / k)
                 for k in ("train.src", "train.tgt", "valid.src", "valid.tgt", "test.src", "test.tgt")}
        if not (d / "test.tgt").exists():
            test = generate(test_sentences, seed=seed + 2, min_clauses=1, max_clauses=max_clauses)
            valid = generate(max(10, test_sentences // 5), seed=seed + 1, min_clauses=1,
                             max_clauses=max_clauses, exclude={" ".join(p.src) for p in test})
            train = generate(train_sentences, seed=seed, min_clauses=1, max_clauses=max_clauses,
                             exclude={" ".join(p.src) for p in test + valid})
            for split, pairs in (("train", train), ("valid", valid), ("test", test)):
                atomic_write_text(d / f"{split}.src", "\n".join(" ".join(p.src) for p in pairs) + "\n")
                atomic_write_text(d / f"{split}.tgt", "\n".join(" ".join(p.tgt) for p in pairs) + "\n")
        return paths
    if corpus == "europarl-it-en":
        root = data_root / "europarl_it_en"
        names = {"train": "train", "valid": "valid", "test": "test"}
        src_lang, tgt_lang = "it", "en"
        # what `rnnsearch data get europarl-it-en` writes: one file a side
        v7 = data_root / "europarl_v7_it_en"
        fetch: Optional[str] = (f"rnnsearch data get europarl-it-en --dir {data_root} && "
                                f"rnnsearch data split --files {v7}/all.it.gz {v7}/all.en.gz --dir {root}")
    else:
        root = data_root / "multi30k"
        names = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
        src_lang, tgt_lang = "de", "en"
        from rnnsearch.tools.download import fetch_hint

        fetch = fetch_hint(root / "train.de.gz")
    if not root.exists():
        raise DataError(f"{root}: corpus not found (run: {fetch}; or give --data DIR holding {root.name}/)")

    def split_file(name: str) -> str:  # data get writes .gz, data split plain text: take what is there
        gz = root / f"{name}.gz"
        return str(gz if gz.exists() or not (root / name).exists() else root / name)

    paths = {f"{k}.src": split_file(f"{v}.{src_lang}") for k, v in names.items()}
    paths.update({f"{k}.tgt": split_file(f"{v}.{tgt_lang}") for k, v in names.items()})
    # CPU budgets: seeded subsamples of each split, written next to the models and logged
    for split, n in (("train", train_sentences), ("valid", valid_sentences), ("test", test_sentences)):
        if n:
            _subsample(paths, split, n, seed, d, corpus)
    return paths


def _subsample(paths: dict, split: str, n: int, seed: int, d: Path, corpus: str) -> None:
    import random

    # a new sample, new models
    targets = {side: d / f"{split}-{n}-seed{seed}.{side}" for side in ("src", "tgt")}
    # an earlier run wrote it: no need to read the corpus again
    if not all(t.exists() for t in targets.values()):
        src, tgt = read_lines(paths[f"{split}.src"]), read_lines(paths[f"{split}.tgt"])
        if n >= len(src):
            return
        keep = sorted(random.Random(seed).sample(range(len(src)), n))
        for side, lines in (("src", src), ("tgt", tgt)):
            atomic_write_text(targets[side], "\n".join(lines[i] for i in keep) + "\n")
        log.info("%s: %s is a seeded subsample of %d of %d pairs", corpus, split, n, len(src))
    paths.update({f"{split}.{side}": str(t) for side, t in targets.items()})


def _base(corpus: str, paths: dict, minutes: float, steps: int, seed: int) -> dict:
    word = corpus == "synthetic"
    # a step budget replaces the minutes (max_steps only appears then: older pools keep their names)
    budget = {"max_minutes": 0.0, "max_steps": steps} if steps else {"max_minutes": minutes}
    return {
        "data": {"train_src": paths["train.src"], "train_tgt": paths["train.tgt"],
                 "valid_src": paths["valid.src"], "valid_tgt": paths["valid.tgt"],
                 "max_len": 80, "valid_bleu_sentences": 200},
        "vocab": {"kind": "word" if word else "bpe", "size": 1000 if word else 8000},
        "model": dict(SIZE, dropout_emb=0.2, dropout_hidden=0.2, dropout_readout=0.2),
        "train": {"optimizer": "adam", "lr": 0.002, "batch_size": 64, "batching": "bucket",
                  "max_epochs": 1000, **budget, "valid_every": 0 if word else 400, "seed": seed,
                  "progress": False, "precision": "fp32"},  # every system alike (--set may change it)
        "decode": {"beam": 5, "precision": "fp32"},
    }


def _mean_entropy(weights: list) -> float:
    rows = [row for w in weights if w for row in w]
    return sum(-sum(p * math.log(p) for p in row if p > 0) for row in rows) / max(len(rows), 1)


def _training_log(model_dir: Path) -> dict:
    """Training speed, steps and the validation curve, read from the model's log.jsonl."""
    records = [json.loads(x) for x in (model_dir / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    train_recs = [r for r in records if r.get("kind") == "train"]
    state = model_dir / "train_state.json"  # its seconds add up every resumed call of the run
    seconds = json.loads(state.read_text(encoding="utf-8")).get("seconds") if state.exists() else None
    return {
        **({"train_seconds": round(seconds, 1)} if seconds is not None else {}),
        "train_tok_per_s": round(sum(r["tok_per_s"] for r in train_recs) / max(len(train_recs), 1), 1),
        "train_steps": max((r["step"] for r in records if "step" in r), default=0),
        "curve": [{"step": r["step"], "valid_bleu": r.get("valid_bleu"), "valid_loss": r["valid_loss"]}
                  for r in records if "valid_loss" in r],
    }


def _train_pool(models: dict[Path, dict], jobs: int) -> dict[Path, float]:
    """Train (or resume) every pool model not yet finished: in this process one after another, or
    with ``jobs`` > 1 as that many ``rnnsearch train`` processes at once (each model's output in
    models/NAME.log). Returns the seconds each spent training in this call."""
    from rnnsearch.engine.train.trainer import train

    todo = {d: raw for d, raw in models.items() if not (d / "DONE").exists()}
    seconds = {d: 0.0 for d in models}
    if jobs <= 1:
        for d, raw in todo.items():
            started = time.time()
            train(config_from_dict(raw, source=f"experiment model {d.name}"),
                  resume=(d / "train_state.safetensors").exists())
            seconds[d] = time.time() - started
        return seconds
    with ThreadPoolExecutor(jobs) as pool:
        seconds.update(zip(todo, pool.map(lambda item: _train_process(*item), todo.items())))
    return seconds


def _train_process(model_dir: Path, raw: dict) -> float:
    """One pool model trained by a ``rnnsearch train`` process of its own; its seconds."""
    log_file = model_dir.parent / f"{model_dir.name}.log"
    threads = str(raw["train"].get("threads") or 1)
    if (model_dir / "train_state.safetensors").exists():
        # this pool's share of the cores, not the count the run was started with (its config.json's):
        # a run begun alone with every core would otherwise take them all beside the other jobs
        args = ["--resume", str(model_dir), "--set", f"train.threads={threads}"]
    else:
        config = model_dir.parent / f"{model_dir.name}.json"
        atomic_write_text(config, json.dumps(raw, indent=1) + "\n")  # JSON is YAML
        args = [str(config)]
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    started = time.time()
    with open(log_file, "w", encoding="utf-8") as out:
        code = subprocess.run([sys.executable, "-m", "rnnsearch", "train", *args], stdout=out,
                              stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        tail = log_file.read_text(encoding="utf-8").strip().splitlines()[-5:]
        raise DataError(f"{log_file}: training {model_dir.name} failed (exit {code}): " + " | ".join(tail))
    return time.time() - started


def _score_system(label: str, model_dir: Path, src: list[str], ref: list[str], buckets,
                  trained_seconds: float) -> dict:
    """Score one trained pool model on the test set; returns its results entry."""
    from rnnsearch.engine.checkpoint import read_config
    from rnnsearch.engine.decode.loading import load

    cfg = read_config(model_dir)
    model = load(model_dir, device="cpu" if cfg.train.device == "auto" else cfg.train.device)
    begin = time.time()
    hyps = [t.text for t in model.translate(src, beam=5, attention=False)]
    decode_s = time.time() - begin
    entry = {"label": label, "model_dir": str(model_dir), "config": cfg.to_dict(),
             **{k: v for k, v in score_corpus(hyps, ref).items()
                if k in ("bleu", "chrf", "bleu_signature")},
             "by_length": bleu_by_length(src, hyps, ref, buckets),
             "decode_sent_per_s": round(len(src) / decode_s, 1),
             "trained_seconds_this_run": round(trained_seconds, 1)}
    entry.update(_training_log(model_dir))
    if model.cfg.model.arch == "rnnsearch":
        entry["attention_entropy"] = round(_mean_entropy(model.force(src[:200], ref[:200])), 4)
    return entry


def write_results(results: dict, out: Path) -> None:
    """Write an experiment's results (as :func:`run_experiments` returns them, or merged from
    several runs) into `out`: results.json, results.md, by_length.png and training_curves.png."""
    from rnnsearch.tools.plotting import plot_length_curves, plot_training_curves

    name, corpus = results["experiment"], results["corpus"]
    atomic_write_text(out / "results.json", json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(out / "results.md", results_markdown(results))
    plot_length_curves({s["label"]: s["by_length"] for s in results["systems"]}, out / "by_length.png",
                       title=f"{name} on {corpus}: BLEU by source length")
    plot_training_curves({s["label"]: s["curve"] for s in results["systems"]}, out / "training_curves.png",
                         budget=budget_text(results))


def run_experiments(names: Sequence[str], corpus: str = "synthetic", minutes: float = 3.0,
                    out_dir: str | Path | None = None, data_root: str | Path = "data",
                    train_sentences: int = 30000, seed: int = 1, buckets=(10, 20, 30, 40, 50, 60),
                    test_sentences: int = 1000, max_clauses: int = 5, overrides: Sequence[str] = (),
                    steps: int = 0, jobs: int = 1, train: bool = True,
                    only: Sequence[str] = ()) -> list[dict]:
    """``rnnsearch experiment NAME ...``: experiments `names` (of NAMES) on one corpus, each
    scored and written into ``out_dir/NAME``; returns the results of each, in order.

    The models they need, shared ones once, are trained first (finished ones in `out_dir` reused)
    — `jobs` at a time, each a process with ``train.threads`` threads (default: the cores shared
    out among the jobs) — then each experiment is evaluated on the test set and by source length
    into results.json, results.md, by_length.png and training_curves.png. `overrides`
    (``model.hidden=512``, ``train.device=cuda``) apply to every model; what sets an experiment's
    systems apart (architecture, score, length limit, reversal) cannot be overridden. Models of
    other settings get other pool directories, so sizes never mix. `steps` > 0 gives every model
    that many training steps instead of `minutes` of wall clock.

    With `train` False nothing is trained: the systems whose models have finished (a long run
    may still be training the others, in this `out_dir` or another process) are scored and
    written, and the rest listed under ``not_trained``; a later full run writes over them.
    `only` (system labels, e.g. ``RNNsearch-50``) trains just those systems' models — a long run
    shared out between machines or sessions — and scores them with whichever others have finished."""
    _check_arguments(names, minutes, steps, jobs)
    root = Path(out_dir or f"experiments/{corpus}")
    paths = corpus_splits(corpus, root, Path(data_root), train_sentences, seed, test_sentences, max_clauses)
    test = read_lines(paths["test.src"]), read_lines(paths["test.tgt"])
    base = apply_overrides(_base(corpus, paths, minutes, steps, seed), list(overrides))
    config_from_dict(base, source="experiment --set")  # a bad key or value fails here, before any training
    plan, models = _plan(names, base, root, jobs)
    chosen = _chosen(plan, names, only)
    trained = {d: 0.0 for d in models}
    if train:
        trained.update(_train_pool({d: raw for d, raw in models.items() if d in chosen}, jobs))
    done = {d for d in models if (d / "DONE").exists()}  # training leaves DONE when it returns
    if not train and not done:  # scoring what has finished, and nothing has
        raise DataError(f"{root / 'models'}: no model of {', '.join(names)} has finished training "
                        f"yet (of {', '.join(d.name for d in models)})")
    head = {"corpus": corpus, "seed": seed,
            **({"steps_per_model": steps} if steps else {"minutes_per_model": minutes}),
            "overrides": list(overrides), "jobs": jobs, "scored_on": _machine_text(),
            "test_sentences": len(test[0]), "train_data": paths["train.src"]}
    scored: dict[Path, dict] = {}  # pool directory -> its scores: a model shared by experiments once
    out = []
    for n in names:
        results = _score_experiment(n, head, plan[n], done, done == set(models), scored, test, buckets,
                                    trained)
        if results["systems"]:
            write_results(results, root / n)
        out.append(results)
    return out


def _check_arguments(names: Sequence[str], minutes: float, steps: int, jobs: int) -> None:
    """Known experiments, a positive budget and at least one job, or a DataError saying what is wrong."""
    bad = [n for n in names if n not in NAMES]
    if bad or not names:
        raise DataError(f"unknown experiment {', '.join(map(repr, bad)) or '(none)'} "
                        f"(choose from {', '.join(NAMES)})")
    if steps < 0 or (not steps and minutes <= 0) or jobs < 1:
        raise DataError(f"the training budget must be positive (minutes {minutes}, steps {steps}) "
                        f"and jobs at least 1 (got {jobs})")


def _plan(names: Sequence[str], base: dict, root: Path,
          jobs: int) -> tuple[dict[str, dict[str, Path]], dict[Path, dict]]:
    """Each experiment's systems with the pool directory of each (experiment -> label -> directory),
    and the raw config of every pool model, a model shared by experiments once."""
    plan: dict[str, dict[str, Path]] = {n: {} for n in names}
    models: dict[Path, dict] = {}
    for n in names:
        for label, system in experiment_systems(n).items():
            raw = merge_dicts(base, system)
            model_dir = root / "models" / _model_name(raw)  # named before the threads: the same model
            raw["model_dir"] = str(model_dir)
            if jobs > 1 and not raw["train"].get("threads"):  # a share of the cores each, not all each
                raw["train"] = {**raw["train"], "threads": max(1, (os.cpu_count() or 1) // jobs)}
            plan[n][label], models[model_dir] = model_dir, raw
    return plan, models


def _chosen(plan: dict[str, dict[str, Path]], names: Sequence[str], only: Sequence[str]) -> set[Path]:
    """The pool directories of the systems `only` names (every one if it names none)."""
    labels = {label: d for n in names for label, d in plan[n].items()}
    unknown = [label for label in only if label not in labels]
    if unknown:
        raise DataError(f"no system {', '.join(map(repr, unknown))} in {', '.join(names)} "
                        f"(choose from {', '.join(map(repr, labels))})")
    return {labels[label] for label in only} if only else {d for n in names for d in plan[n].values()}


def _score_experiment(name: str, head: dict, plan: dict[str, Path], done: set[Path], all_done: bool,
                      scored: dict[Path, dict], test: tuple[list[str], list[str]], buckets,
                      trained: dict[Path, float]) -> dict:
    """Experiment `name`'s results: `head`, its finished systems scored (each pool model once,
    kept in `scored`) and, unless every model has finished, the systems not trained yet."""
    results: dict[str, Any] = {"experiment": name, **head, "systems": []}
    if not all_done:
        results["not_trained"] = [label for label, d in plan.items() if d not in done]
    for label, model_dir in plan.items():
        if model_dir not in done:
            continue
        if model_dir not in scored:
            scored[model_dir] = _score_system(label, model_dir, *test, buckets, trained[model_dir])
            log.info("%s: BLEU %.2f", label, scored[model_dir]["bleu"])
        results["systems"].append({**scored[model_dir], "label": label})
    return results


def _machine_text() -> str:
    """Date, CPU (and GPU where there is one) and torch of the scoring run, for the record."""
    import datetime

    import torch

    from rnnsearch.engine.precision import machine

    gpu = f", {machine(torch.device('cuda'))}" if torch.cuda.is_available() else ""
    return (f"{datetime.date.today().isoformat()}, {machine(torch.device('cpu'))}{gpu}, "
            f"{os.cpu_count()} cores, torch {torch.__version__}")


def budget_text(r: dict) -> str:
    """What every model of results `r` was given: "5000 training steps" or "3.0 minutes of training"."""
    if r.get("steps_per_model"):
        return f"{r['steps_per_model']} training steps"
    return f"{r['minutes_per_model']} minutes of training"


def results_markdown(r: dict) -> str:
    if not r["systems"]:
        return f"{r['experiment']} on {r['corpus']}: no system trained yet ({', '.join(r['not_trained'])}).\n"
    buckets = [b["bucket"] for b in r["systems"][0]["by_length"]]
    head = ["system", "BLEU", "chrF"] + buckets + ["steps (training time)", "train tok/s", "decode sent/s"]
    if any("attention_entropy" in s for s in r["systems"]):
        head.append("attention entropy")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in r["systems"]:
        cells = [s["label"], f"{s['bleu']:.2f}", f"{s['chrf']:.2f}"]
        cells += ["–" if b["bleu"] is None else f"{b['bleu']:.1f} ({b['sentences']})" for b in s["by_length"]]
        hours = f" ({s['train_seconds'] / 3600:.1f} h)" if s.get("train_seconds") else ""
        cells += [str(s.get("train_steps", "–")) + hours, f"{s['train_tok_per_s']:.0f}",
                  f"{s['decode_sent_per_s']:.0f}"]
        if "attention entropy" in head:
            cells.append(f"{s['attention_entropy']:.3f}" if "attention_entropy" in s else "–")
        lines.append("| " + " | ".join(cells) + " |")
    sig = r["systems"][0].get("bleu_signature", "")
    # systems merged in from a later session carry where they were scored (benchmarks/europarl_20k.py)
    apart = [f"{s['label']} {s['scored_on']}" for s in r["systems"]
             if s.get("scored_on", r.get("scored_on")) != r.get("scored_on")]
    return (f"{r['experiment']} on {r['corpus']}, {budget_text(r)} per model, "
            f"seed {r['seed']}, {r['test_sentences']} test sentences"
            + (f", with {' '.join(r['overrides'])}" if r.get("overrides") else "")
            + "; BLEU per bucket with (sentences); "
            f"sacrebleu {sig}" + (f"; scored {r['scored_on']}" if r.get("scored_on") else "")
            + "\n\n" + "\n".join(lines) + "\n"
            + (f"\nScored apart from the others: {'; '.join(apart)}.\n" if apart else "")
            + (f"\nNot trained yet: {', '.join(r['not_trained'])}.\n" if r.get("not_trained") else ""))
