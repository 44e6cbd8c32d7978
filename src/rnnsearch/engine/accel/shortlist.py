"""Lexical shortlists: the output layer over the target pieces a sentence can plausibly use.

Most of a decoding step's multiply-adds are the output layer, one row per target piece for every
hypothesis. A shortlist (Jean et al. 2015; Marian's --shortlist, CTranslate2's vmap) restricts it
per sentence to

* the `frequent` most frequent target pieces of the training targets, and
* the `per_source` likeliest translations of each of the sentence's source pieces: from the
  training corpus's token links when `rnnsearch data align` has made them (p(t | s) of the
  links), else from co-occurrence in the training pairs (the Dice coefficient of s and t,
  counted on up to COOCCURRENCE_PAIRS pairs),
* with </s> and <unk> always in.

Search (inflight.py) takes the union over the sentences in flight and a softmax over it alone.
A shortlist is a file (`rnnsearch shortlist build`, default <model_dir>/shortlist.npz):

    frequent   (K,) int32      target ids, most frequent first
    table      (V_src, k) int32 per source id its likeliest target ids, best first, -1 padded
    meta       JSON            settings, source of the table, the tokenizers' SHA-256s

It is refused for a model whose tokenizers are not the ones it was built with.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from rnnsearch.config import Config, VocabConfig
from rnnsearch.engine.checkpoint import read_config
from rnnsearch.engine.data.vocab import EOS, UNK, tokenizer_files
from rnnsearch.io import DataError, atomic_write

log = logging.getLogger("rnnsearch")

FORMAT_VERSION = 1
FILE_NAME = "shortlist.npz"
COOCCURRENCE_PAIRS = 200_000
LINK_CHUNK = 1_000_000  # pairs whose links are counted at once


@dataclass
class Shortlist:
    frequent: np.ndarray
    table: np.ndarray
    meta: dict[str, Any]

    def allowed(self, src: torch.Tensor, src_mask: torch.Tensor, tgt_vocab: int) -> torch.Tensor:
        """(B, tgt_vocab) bool: the target ids each source row of `src` (B, S) may produce."""
        out = torch.zeros(src.size(0), tgt_vocab, dtype=torch.bool, device=src.device)
        out[:, torch.as_tensor(self.frequent, dtype=torch.long, device=src.device)] = True
        out[:, [EOS, UNK]] = True
        table = torch.as_tensor(self.table, dtype=torch.long, device=src.device)
        ids = table[src.clamp(max=table.size(0) - 1)]  # (B, S, k)
        ids = ids.masked_fill(~src_mask.unsqueeze(-1), -1)
        rows = torch.arange(src.size(0), device=src.device).view(-1, 1, 1).expand_as(ids)
        keep = ids >= 0
        out[rows[keep], ids[keep]] = True
        return out

    def save(self, path: str | Path) -> None:
        """Written whole or not at all."""
        meta = np.frombuffer(json.dumps(self.meta).encode("utf-8"), dtype=np.uint8)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                np.savez(f, frequent=self.frequent, table=self.table, meta=meta)

        atomic_write(path, write)


def tokenizer_digests(model_dir: Path, vocab: VocabConfig) -> dict[str, str]:
    """SHA-256 of the model directory's tokenizer files (those of its vocab section), the
    shortlist's key."""
    names = sorted(set(tokenizer_files(vocab.kind, vocab.joint)))
    return {name: hashlib.sha256((model_dir / name).read_bytes()).hexdigest() for name in names}


def load_shortlist(path: str | Path, model_dir: Path, src_vocab: int, vocab: VocabConfig) -> Shortlist:
    """A shortlist file, checked: made for this model's tokenizers (`vocab`: its config's vocab
    section), ids within its vocabularies."""
    path = Path(path)
    try:
        with np.load(path) as z:
            frequent, table = z["frequent"], z["table"]
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
    except (OSError, ValueError, KeyError) as e:
        raise DataError(f"{path}: not a shortlist ({e}); make one with `rnnsearch shortlist build`") from None
    if meta.get("format") != FORMAT_VERSION:
        raise DataError(f"{path}: shortlist format {meta.get('format')}, this rnnsearch reads "
                        f"{FORMAT_VERSION}")
    if meta.get("tokenizers") != tokenizer_digests(model_dir, vocab):
        raise DataError(f"{path}: built for other tokenizers than {model_dir}'s; build it again with "
                        f"`rnnsearch shortlist build --model {model_dir}`")
    if table.shape[0] != src_vocab:
        raise DataError(f"{path}: a table of {table.shape[0]} source ids, the model has {src_vocab}")
    return Shortlist(frequent, table, meta)


def _top_per_source(keys: np.ndarray, counts: np.ndarray, scores: np.ndarray, n_src: int, n_tgt: int,
                    k: int) -> np.ndarray:
    """(n_src, k) table: per source id the k target ids of highest score (ties: more count, lower
    id), -1 padded. keys = src * n_tgt + tgt, unique."""
    src, tgt = keys // n_tgt, keys % n_tgt
    order = np.lexsort((tgt, -counts, -scores, src))
    src, tgt = src[order], tgt[order]
    start = np.searchsorted(src, np.arange(n_src))
    rank = np.arange(len(src)) - start[src]
    keep = rank < k
    table = np.full((n_src, k), -1, dtype=np.int32)
    table[src[keep], rank[keep]] = tgt[keep]
    return table


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    keys = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    unique, where = np.unique(keys, return_inverse=True)
    return unique, np.bincount(where, weights=counts).astype(np.int64)


def link_counts(data, alignment, n_tgt: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, counts) of linked (source id, target id) token pairs over the aligned split."""
    src_tok, src_off = data.arrays["src.tokens"], data.arrays["src.offsets"]
    tgt_tok, tgt_off = data.arrays["tgt.tokens"], data.arrays["tgt.offsets"]
    offsets = np.asarray(alignment.offsets)
    parts = []
    for start in range(0, len(alignment), LINK_CHUNK):
        end = min(start + LINK_CHUNK, len(alignment))
        flat = alignment.flat[2 * offsets[start]:2 * offsets[end]]
        links = np.asarray(flat).reshape(-1, 2).astype(np.int64)
        pair = np.repeat(np.arange(start, end), np.diff(offsets[start:end + 1]))
        s = np.asarray(src_tok)[np.asarray(src_off)[pair] + links[:, 0]].astype(np.int64)
        t = np.asarray(tgt_tok)[np.asarray(tgt_off)[pair] + links[:, 1]].astype(np.int64)
        parts.append(np.unique(s * n_tgt + t, return_counts=True))
    return _merge(parts) if parts else (np.zeros(0, np.int64), np.zeros(0, np.int64))


def cooccurrence_counts(data, n_tgt: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """(keys, pair counts) of (source id, target id) occurring in the same pair, each pair
    counting a combination once, over up to COOCCURRENCE_PAIRS pairs; and the pairs counted."""
    n = len(data)
    picked = np.arange(n) if n <= COOCCURRENCE_PAIRS else np.sort(
        np.random.default_rng(seed).choice(n, COOCCURRENCE_PAIRS, replace=False))
    parts, keys = [], []
    for k in picked.tolist():
        e = data[k]
        s, t = np.unique(np.asarray(e.src, np.int64)), np.unique(np.asarray(e.tgt, np.int64))
        keys.append((s[:, None] * n_tgt + t[None, :]).ravel())
        if len(keys) >= 20_000:
            parts.append(np.unique(np.concatenate(keys), return_counts=True))
            keys = []
    if keys:
        parts.append(np.unique(np.concatenate(keys), return_counts=True))
    unique, counts = _merge(parts)
    return unique, counts, len(picked)


def build_shortlist(model_dir: str | Path, frequent: int = 1000, per_source: int = 20,
                    use_links: Optional[bool] = None, cfg: Optional[Config] = None) -> Shortlist:
    """The shortlist of a trained model, from its training split (prepared again if absent): the
    `frequent` commonest target pieces and `per_source` translations a source piece, from the
    split's alignment where `data align` made one (unless `use_links` is False), else from
    co-occurrence. `cfg`: the model's configuration where it is loaded already (else read)."""
    from rnnsearch.engine.align.eflomal import find_alignment
    from rnnsearch.engine.data.pairs import corpus_files, prepared_pairs
    from rnnsearch.engine.data.vocab import load_tokenizers

    model_dir = Path(model_dir)
    # where the directory is now, not where it was trained: its prepared cache is found from here
    cfg = dataclasses.replace(cfg or read_config(model_dir), model_dir=str(model_dir))
    src_tok, tgt_tok = load_tokenizers(model_dir, cfg.vocab)
    n_src, n_tgt = len(src_tok), len(tgt_tok)
    files = corpus_files(cfg, "train")
    if files is None:
        raise DataError(f"{model_dir}/config.json names no training data: a shortlist is counted on it")
    data = prepared_pairs(cfg, files, src_tok, tgt_tok)
    freq = np.bincount(np.asarray(data.arrays["tgt.tokens"]), minlength=n_tgt)
    top = np.argsort(-freq, kind="stable")[:frequent].astype(np.int32)
    alignment = find_alignment(data) if use_links is not False else None
    if use_links and alignment is None:
        raise DataError(f"no alignment of {data.path}: run `rnnsearch data align` on the model's config "
                        "first")
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "frequent": frequent, "per_source": per_source,
                            "tokenizers": tokenizer_digests(model_dir, cfg.vocab), "split": str(data.path)}
    if alignment is not None:
        keys, counts = link_counts(data, alignment, n_tgt)
        per_src = np.bincount(keys // n_tgt, weights=counts, minlength=n_src)
        scores = counts / per_src[keys // n_tgt]  # p(t | s) of the links
        meta.update(source="links", alignment=str(alignment.path))
    else:
        keys, counts, pairs = cooccurrence_counts(data, n_tgt, cfg.train.seed)
        src_pairs = np.bincount(keys // n_tgt, weights=counts, minlength=n_src)
        tgt_pairs = np.bincount(keys % n_tgt, weights=counts, minlength=n_tgt)
        scores = 2 * counts / (src_pairs[keys // n_tgt] + tgt_pairs[keys % n_tgt])  # Dice
        meta.update(source="cooccurrence", pairs=pairs)
    table = _top_per_source(keys, counts, scores, n_src, n_tgt, per_source)
    log.info("shortlist: %d frequent target pieces, %d translations per source piece (%s)", len(top),
             per_source, meta["source"])
    return Shortlist(top, table, meta)
