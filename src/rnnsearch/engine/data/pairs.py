"""A config's corpus: its files, its vocabularies and its training pairs, encoded.

Below the trainer (engine/train/trainer.py) and the statistical aligner (engine/align/eflomal.py), which both
start from what `prepare` makes: `rnnsearch data prepare CONFIG` is this module's `prepare`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

import torch

from rnnsearch.config import Config, ConfigError
from rnnsearch.engine.checkpoint import CheckpointError, read_config
from rnnsearch.engine.data.parallel import ParallelData, read_parallel
from rnnsearch.engine.data.prepared import ParallelFiles, PreparedData, prepare_or_load, sample_pairs
from rnnsearch.engine.data.vocab import build_tokenizers, load_tokenizers, save_tokenizers
from rnnsearch.io import DataError

log = logging.getLogger("rnnsearch")


def corpus_files(cfg: Config, split: str) -> Optional[ParallelFiles]:
    """The files of data.{split}_src/_tgt or data.{split}_tsv; None when the config names none."""
    d = cfg.data
    src, tgt, tsv = getattr(d, f"{split}_src"), getattr(d, f"{split}_tgt"), getattr(d, f"{split}_tsv")
    if src is None and tsv is None:
        return None
    return ParallelFiles(src, tgt, tsv)


def load_pairs(cfg: Config, split: str) -> Optional[tuple[list[str], list[str]]]:
    """The (sources, targets) of a split's files, read whole; None when the config names none."""
    files = corpus_files(cfg, split)
    return None if files is None else read_parallel(files.src, files.tgt, files.tsv)


@torch.no_grad()
def _build_tokenizers(cfg: Config, files: ParallelFiles) -> tuple:
    """Vocabularies from the text as the model will see it (control characters cleaned, case as
    configured): every pair, or a seeded sample of vocab.sample_pairs of a larger corpus, read
    streaming so that a corpus of millions of pairs is never held in memory."""
    n = cfg.vocab.sample_pairs or sys.maxsize
    src_norm, tgt_norm = sample_pairs(files, n, cfg.train.seed, cfg.data.lowercase)
    sides = (("source", src_norm, files.src or files.tsv), ("target", tgt_norm, files.tgt or files.tsv))
    for side, texts, path in sides:
        if not any(t.strip() for t in texts):
            raise DataError(f"{path}: no {side} text to build a vocabulary from (every line is blank once "
                            f"control characters are cleaned)")
    log.info("building %s vocabularies (size %d) from %d pairs", cfg.vocab.kind, cfg.vocab.size,
             len(src_norm))
    return build_tokenizers(cfg.vocab, src_norm, tgt_norm, cfg.train.seed)


def vocabularies(cfg: Config, files: ParallelFiles) -> tuple:
    """The (source, target) tokenizers of a fresh run: those `rnnsearch data prepare` saved in the
    model directory for this very corpus and vocabulary setting, else built now."""
    model_dir = Path(cfg.model_dir)
    try:
        saved = read_config(model_dir)
        same = (saved.data, saved.vocab, saved.train.seed) == (cfg.data, cfg.vocab, cfg.train.seed)
        tokenizers = load_tokenizers(model_dir, cfg.vocab) if same else None
    except (CheckpointError, ConfigError, DataError):
        tokenizers = None
    if tokenizers is None:
        return _build_tokenizers(cfg, files)
    log.info("using the vocabularies already in %s (same corpus and vocab settings)", model_dir)
    return tokenizers


def prepare(cfg: Config) -> PreparedData:
    """`rnnsearch data prepare`: what a fresh `rnnsearch train` of `cfg` does before its first
    step, done ahead of time: the vocabularies, saved in the model directory (or those of the run
    already there), and the training pairs prepared; the run then starts in seconds."""
    files = corpus_files(cfg, "train")
    if files is None:
        raise ConfigError("config: data.train_src/train_tgt (or data.train_tsv) are required to prepare")
    model_dir = Path(cfg.model_dir)
    if (model_dir / "train_state.safetensors").exists():  # a run's own vocabularies, as --resume reads them
        cfg = read_config(model_dir)
        src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
    else:
        model_dir.mkdir(parents=True, exist_ok=True)
        src_tok, tgt_tok = vocabularies(cfg, files)
        save_tokenizers(model_dir, cfg.vocab, src_tok, tgt_tok)
        cfg.save(model_dir / "config.json")
    return prepared_pairs(cfg, files, src_tok, tgt_tok)


def prepared_pairs(cfg: Config, files: ParallelFiles, src_tok, tgt_tok) -> PreparedData:
    """The training pairs encoded once into memory-mapped arrays (engine/data/prepared.py), reused while
    the corpus, the vocabularies and the encoding options stay the same."""
    d = cfg.data
    cache = d.prepared_dir or Path(cfg.model_dir) / "prepared"
    return prepare_or_load(files, src_tok, tgt_tok, cache, max_len=d.max_len, lowercase=d.lowercase,
                           reverse_source=d.reverse_source, workers=d.prepare_workers or None)


def in_memory_pairs(cfg: Config, files: ParallelFiles, src_tok, tgt_tok) -> ParallelData:
    """The training pairs read and encoded into memory (data.prepared: false)."""
    d = cfg.data
    srcs, tgts = read_parallel(files.src, files.tgt, files.tsv)
    return ParallelData.encode(srcs, tgts, src_tok, tgt_tok, d.max_len, d.reverse_source, d.lowercase,
                               name="train", files=files.describe())
