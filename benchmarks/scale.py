"""What a corpus costs as it grows: preparing it, its disk size, and the memory and speed of a
training process that reads it (prepared, memory-mapped corpora; engine/data/prepared.py).

Corpora of 0.1M, 1M, 3M and 10M pairs are made by repeating a real corpus (Europarl it-en by
default: a development copy, never committed). For each: the seconds to prepare it with 1 and 2
worker processes (pairs/s), the prepared arrays' size on disk, and a training process of the
benchmark model (benchmarks/common.py) running --steps steps: its peak anonymous memory (RssAnon,
sampled, and VmHWM, which counts the mapped file pages it touched as well) and its target
tokens/s. At the smallest size the same training also runs from memory (data.prepared: false),
side by side, as the anchor. Prints JSON (`--out` writes it too):

    python -m benchmarks.scale --corpus $RNNSEARCH_DATA/europarl_it_en --out docs/figures/scale.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from itertools import cycle
from pathlib import Path

from benchmarks.common import BENCH_CONFIG, ROOT, cpu_features, cpu_name, memory_kb
from rnnsearch.config import config_from_dict, load_config, merge_dicts
from rnnsearch.engine.data.pairs import vocabularies
from rnnsearch.engine.data.prepared import ParallelFiles, prepare_or_load
from rnnsearch.engine.data.vocab import save_tokenizers
from rnnsearch.io import count_lines

SIZES = (100_000, 1_000_000, 3_000_000, 10_000_000)


def repeated_corpus(corpus: Path, pairs: int, out: Path, sides=("it", "en")) -> ParallelFiles:
    """`pairs` line pairs of the corpus's train (and train_extra) files, repeated as often as it
    takes, as plain text in `out` (kept for the next run; made again if its line count is off)."""
    files = [out / f"train.{side}" for side in sides]
    if all(f.exists() for f in files) and count_lines(files[0]) == pairs:
        return ParallelFiles(*files)
    out.mkdir(parents=True, exist_ok=True)
    parts = [sorted(corpus.glob(f"train*.{side}.gz")) for side in sides]
    handles = [open(f, "w", encoding="utf-8") for f in files]
    with handles[0], handles[1]:
        written = 0
        for src_part, tgt_part in cycle(zip(*parts)):
            with gzip.open(src_part, "rt", encoding="utf-8") as s, \
                    gzip.open(tgt_part, "rt", encoding="utf-8") as t:
                for a, b in zip(s, t):
                    handles[0].write(a)
                    handles[1].write(b)
                    written += 1
                    if written == pairs:
                        return ParallelFiles(*files)
    raise AssertionError("unreachable")


def bench_config(files: ParallelFiles, model_dir: Path, cache: Path, steps: int, prepared: bool) -> dict:
    return merge_dicts(BENCH_CONFIG, {
        "model_dir": str(model_dir),
        "data": {"train_src": str(files.src), "train_tgt": str(files.tgt), "max_len": 50,
                 "prepared": prepared, "prepared_dir": str(cache)},
        "vocab": {"sample_pairs": 200_000},
        "train": {"max_steps": steps, "max_epochs": 0, "valid_every": 0, "threads": 1, "progress": False,
                  "tensorboard": False, "log_every": min(25, steps), "seed": 1},
    })


def time_preparation(cfg: dict, files: ParallelFiles, cache: Path, workers: int) -> dict:
    """Seconds to prepare the corpus from nothing with `workers` processes, and the result's size."""
    config = config_from_dict(cfg)
    src_tok, tgt_tok = vocabularies(config, files)
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    data = prepare_or_load(files, src_tok, tgt_tok, cache, max_len=config.data.max_len, workers=workers)
    seconds = time.perf_counter() - start
    size = sum(p.stat().st_size for p in data.path.iterdir())
    read = len(data) + data.dropped_blank + data.dropped_long  # every line pair is read and encoded
    return {"workers": workers, "seconds": round(seconds, 1), "pairs_per_s": round(read / seconds),
            "pairs_kept": len(data), "disk_mb": round(size / 2 ** 20, 1)}


def write_model_dir(cfg: dict, files: ParallelFiles) -> None:
    """The vocabularies and config.json a fresh `train` of `cfg` then uses (`data prepare`'s first half)."""
    config = config_from_dict(cfg)
    model_dir = Path(config.model_dir)
    shutil.rmtree(model_dir, ignore_errors=True)
    model_dir.mkdir(parents=True)
    save_tokenizers(model_dir, config.vocab, *vocabularies(config, files))
    config.save(model_dir / "config.json")


def train_process(cfg: dict, work: Path) -> dict:
    """`rnnsearch train` of `cfg` in a process of its own, sampled every 50 ms: peak RssAnon, the
    last VmHWM seen, seconds to the first step and the mean tokens/s of its log after the first."""
    path = work / "config.json"
    path.write_text(json.dumps(cfg))
    env = dict(os.environ, OMP_NUM_THREADS=str(cfg["train"]["threads"] or len(os.sched_getaffinity(0))))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rnnsearch", "train", str(path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak: dict[str, int] = {"RssAnon": 0, "VmHWM": 0}
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()))  # type: ignore[union-attr]
    reader.start()
    while proc.poll() is None:
        for key, value in memory_kb(proc.pid).items():
            peak[key] = max(peak[key], value)
        time.sleep(0.05)
    reader.join()
    if proc.returncode:
        raise SystemExit(f"scale: training failed:\n{err[0][-3000:]}")
    records = [json.loads(x) for x in (Path(cfg["model_dir"]) / "log.jsonl").read_text().splitlines()]
    rates = [r["tok_per_s"] for r in records if r.get("kind") == "train"]
    rates = rates[1:] or rates  # the first window holds the start-up
    return {"seconds": round(time.perf_counter() - start, 1),
            "peak_rss_anon_mb": round(peak["RssAnon"] / 1024), "peak_vm_hwm_mb": round(peak["VmHWM"] / 1024),
            "tok_per_s": round(sum(rates) / len(rates))}


def measure(corpus: Path, pairs: int, work: Path, steps: int, anchor: bool) -> dict:
    files = repeated_corpus(corpus, pairs, work / "corpora" / str(pairs))
    cache = work / "cache" / str(pairs)
    cfg = bench_config(files, work / "runs" / str(pairs), cache, steps, prepared=True)
    write_model_dir(cfg, files)
    row: dict = {"pairs": pairs, "prepare": [time_preparation(cfg, files, cache, w) for w in (1, 2)]}
    row["train"] = train_process(cfg, work)
    if anchor:  # the in-memory path beside it
        memory = bench_config(files, work / "runs" / f"{pairs}-in-memory", cache, steps, prepared=False)
        write_model_dir(memory, files)
        row["train_in_memory"] = train_process(memory, work)
    print(json.dumps(row), file=sys.stderr)
    return row


# Table 2 of the paper: RNNsearch-50 made 288,000 updates of 80 sentences in 2.2 epochs
UPDATES_PER_EPOCH = 288_000 / 2.2


def paper_cost(corpus: Path, work: Path, steps: int, pairs: int = SIZES[0]) -> dict:
    """The paper's RNNsearch-50 (configs/wmt14_en_fr_paper.yaml: 30k words a side, 1,000 units,
    batch 80, Adadelta, fp32) trained `steps` updates on every core, on 0.1M pairs of the corpus
    standing in for WMT'14 (news and parliament sentences are of like length): tokens/s, seconds
    an update, and so the hours an epoch of Table 1's corpus takes here."""
    files = repeated_corpus(corpus, pairs, work / "corpora" / str(pairs))
    paper = load_config(ROOT / "configs" / "wmt14_en_fr_paper.yaml").to_dict()
    cfg = merge_dicts(paper, {
        "model_dir": str(work / "runs" / "paper"),
        "data": {"train_src": str(files.src), "train_tgt": str(files.tgt), "valid_src": None,
                 "valid_tgt": None, "prepared_dir": str(work / "cache" / "paper")},
        "train": {"max_steps": steps, "max_epochs": 0, "threads": 0, "progress": False,
                  "log_every": min(5, steps),
                  "save_every_minutes": 0, "tensorboard": False}})
    write_model_dir(cfg, files)
    run = train_process(cfg, work)
    data = vocabularies_and_pairs(cfg, files)
    per_update = 80 * (float(data.tgt_lengths.mean()) + 1)  # target tokens of an update, </s> included
    seconds = per_update / run["tok_per_s"]
    return {**run, "steps": steps, "threads": len(os.sched_getaffinity(0)),
            "target_tokens_per_update": round(per_update), "seconds_per_update": round(seconds, 2),
            "updates_per_epoch": round(UPDATES_PER_EPOCH),
            "hours_per_epoch": round(UPDATES_PER_EPOCH * seconds / 3600, 1)}


def vocabularies_and_pairs(cfg: dict, files: ParallelFiles):
    """The prepared pairs a run of `cfg` trained on (its vocabularies, its cache)."""
    config = config_from_dict(cfg)
    src_tok, tgt_tok = vocabularies(config, files)
    return prepare_or_load(files, src_tok, tgt_tok, config.data.prepared_dir, max_len=config.data.max_len)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True,
                    help="a folder with train*.it.gz / train*.en.gz (Europarl it-en's layout)")
    ap.add_argument("--work", type=Path, default=Path("runs/scale"), help="corpora, caches and runs go here")
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES),
                    help="corpus sizes in pairs (none: only --paper-steps)")
    ap.add_argument("--steps", type=int, default=200, help="training steps a size")
    ap.add_argument("--paper-steps", type=int, default=0,
                    help="also train the paper's RNNsearch-50 this many updates: the cost of Table 1 here")
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    sizes = sorted(args.sizes)
    rows = [measure(args.corpus, n, args.work, args.steps, anchor=n == sizes[0]) for n in sizes]
    paper = paper_cost(args.corpus, args.work, args.paper_steps) if args.paper_steps else None
    result = {"benchmark": "scale", "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(),
              "cpu_features": cpu_features(), "cores": len(os.sched_getaffinity(0)),
              "model": "benchmark model (benchmarks/common.py), bpe 8k a side, batch 64, fp32, 1 thread",
              "memory_note": "RssAnon: anonymous memory (the mapped corpus is page cache, not counted); "
                             "VmHWM: resident peak, mapped file pages touched included",
              "sizes": rows, "paper_model": paper}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
