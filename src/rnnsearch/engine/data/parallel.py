"""Parallel corpora: reading, filtering, encoding and length-aware batching.

Batching schemes (``train.batching``):

* ``paper`` — Appendix B: every ``sort_k`` updates take ``sort_k x batch`` pairs
  from the shuffled corpus, sort them by length and cut them into ``sort_k``
  minibatches (their order shuffled), so each batch holds similar lengths.
* ``bucket`` — sort the whole (shuffled) corpus by length, cut, shuffle the batches:
  least padding.
* ``random`` — no sorting (the padding-heavy default of several toolkits).

``train.batch_by: tokens`` makes ``batch_size`` a budget of padded target tokens.
"""

from __future__ import annotations

import logging
import random
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from rnnsearch.engine.data.vocab import BOS, EOS, PAD, UNK
from rnnsearch.io import DataError, read_aligned, read_lines

log = logging.getLogger("rnnsearch")


def read_parallel(src: str | Path | None = None, tgt: str | Path | None = None,
                  tsv: str | Path | None = None) -> tuple[list[str], list[str]]:
    """Read line-aligned source/target files (plain or .gz) or one TSV (source<TAB>target)."""
    if tsv is not None:
        lines = read_lines(tsv)
        srcs, tgts = [], []
        for n, line in enumerate(lines, 1):
            if line.count("\t") != 1:
                if not line.strip():
                    srcs.append("")
                    tgts.append("")
                    continue
                raise DataError(
                    f"{tsv}:{n}: expected 2 tab-separated columns, found {line.count(chr(9)) + 1}")
            s, t = line.split("\t")
            srcs.append(s)
            tgts.append(t)
        return srcs, tgts
    if src is None or tgt is None:
        raise DataError("give a source and a target file, or one TSV file")
    srcs, tgts = read_aligned(src, tgt)
    return srcs, tgts


def normalize(text: str, lowercase: bool = False) -> str:
    """Control characters become spaces, invisible format characters (soft hyphen,
    zero-width space, BOM) are removed, and whitespace runs collapse to one space."""
    if not text.isprintable():
        text = "".join(_clean_char(ch) for ch in text)
    text = " ".join(text.split())
    return text.lower() if lowercase else text


_KEEP_FORMAT = {"\u200c", "\u200d"}  # zero-width (non-)joiners carry meaning in several scripts


def _clean_char(ch: str) -> str:
    cat = unicodedata.category(ch)
    if cat == "Cc":
        return " "
    if cat == "Cf" and ch not in _KEEP_FORMAT:
        return ""
    return ch


@dataclass
class Example:
    src: list[int]
    tgt: list[int]
    index: int  # line number - 1 in the original files
    # decoder inputs y_{i-1} when they differ from tgt (target word dropout)
    tgt_in: Optional[list[int]] = None


class ParallelData:
    """Encoded pairs, filtered: blank pairs and pairs over `max_len` tokens are dropped."""

    def __init__(self, examples: list[Example], dropped_blank: int = 0, dropped_long: int = 0):
        self.examples = examples
        self.dropped_blank = dropped_blank
        self.dropped_long = dropped_long

    @classmethod
    def encode(cls, srcs: list[str], tgts: list[str], src_tok, tgt_tok, max_len: int,
               reverse_source: bool = False, lowercase: bool = False, name: str = "data",
               files: str = "") -> ParallelData:
        """`name` labels the log line; `files` (the paths read, for the error) follows it in a message."""
        examples, blank, long = [], 0, 0
        for i, (s, t) in enumerate(zip(srcs, tgts)):
            s, t = normalize(s, lowercase), normalize(t, lowercase)
            if not s or not t:
                blank += 1
                continue
            si, ti = src_tok.encode(s), tgt_tok.encode(t)
            if len(si) > max_len or len(ti) > max_len or not si or not ti:
                long += 1
                continue
            if reverse_source:
                si = si[::-1]
            examples.append(Example(si, ti, i))
        log.info("%s: %d pairs kept, %d blank and %d over %d tokens dropped",
                 name, len(examples), blank, long, max_len)
        if not examples:
            where = f"{name} ({files})" if files else name
            raise DataError(f"{where}: no pairs left after dropping {blank} blank and {long} too long "
                            f"(max_len={max_len})")
        return cls(examples, blank, long)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, i: int) -> Example:
        return self.examples[i]

    def examples_at(self, positions: Iterable[int]) -> list[Example]:
        """The pairs at these positions (a batch from make_batches), in that order."""
        return [self.examples[i] for i in positions]

    @cached_property
    def src_lengths(self) -> np.ndarray:
        return np.array([len(e.src) for e in self.examples], dtype=np.int32)

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        return np.array([len(e.tgt) for e in self.examples], dtype=np.int32)


@dataclass
class Batch:
    """Padded tensors of one minibatch (batch-first).

    src       (batch, src_len)   source ids, PAD-padded
    src_mask  (batch, src_len)   True on real source tokens
    tgt_in    (batch, tgt_len)   <s> y_1 .. y_{T-1}: the decoder's previous words
    tgt_out   (batch, tgt_len)   y_1 .. y_T </s>: what it must predict (PAD where padded)
    """

    src: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    indices: list[int]

    def to(self, device) -> Batch:
        return Batch(self.src.to(device, non_blocking=True), self.src_mask.to(device, non_blocking=True),
                     self.tgt_in.to(device, non_blocking=True), self.tgt_out.to(device, non_blocking=True),
                     self.indices)


def pad(seqs: list[list[int]], value: int = PAD) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    # one tensor from padded lists: a tensor per row cost 5x as much, 7% of a tiny model's step
    return torch.tensor([s + [value] * (width - len(s)) for s in seqs], dtype=torch.long)


def drop_words(examples: list[Example], p: float, rng: random.Random, p_target: float = 0.0) -> list[Example]:
    """Word dropout: each source token becomes <unk> with probability p; with `p_target`, each
    previous target word fed to the decoder (not the word it must predict) likewise."""
    out = []
    for e in examples:
        src = [UNK if rng.random() < p else w for w in e.src] if p > 0 else e.src
        tgt_in = [UNK if rng.random() < p_target else w for w in e.tgt] if p_target > 0 else e.tgt_in
        out.append(Example(src, e.tgt, e.index, tgt_in))
    return out


def collate(examples: list[Example]) -> Batch:
    src = pad([e.src for e in examples])
    tgt_in = pad([[BOS] + (e.tgt if e.tgt_in is None else e.tgt_in) for e in examples])
    tgt_out = pad([e.tgt + [EOS] for e in examples])
    return Batch(src, src != PAD, tgt_in, tgt_out, [e.index for e in examples])


def target_tokens(examples: list[Example]) -> int:
    """The target tokens a batch of these examples predicts, </s> included (the non-PAD entries
    of its ``tgt_out``), counted on the CPU: no wait for a GPU."""
    return sum(len(e.tgt) + 1 for e in examples)


def make_batches(data, batch_size: int, by: str = "sentences", scheme: str = "paper", sort_k: int = 20,
                 seed: int = 0, epoch: int = 0) -> list[np.ndarray]:
    """The batches of one epoch of `data` (ParallelData or PreparedData: anything with length
    arrays) as arrays of example positions; deterministic in (seed, epoch)."""
    return make_batches_from_lengths(data.src_lengths, data.tgt_lengths, batch_size, by, scheme, sort_k,
                                     seed, epoch)


def make_batches_from_lengths(src_lengths: np.ndarray, tgt_lengths: np.ndarray, batch_size: int,
                              by: str = "sentences", scheme: str = "paper", sort_k: int = 20, seed: int = 0,
                              epoch: int = 0) -> list[np.ndarray]:
    """The module docstring's schemes from length arrays: one epoch's
    batches as arrays of positions, deterministic in (seed, epoch). Not make_batches' order (numpy
    draws the shuffles), and no Python list of the corpus: 12M pairs take seconds.

    `by="tokens"` makes batch_size a budget of padded target tokens, </s> included: a batch's
    longest target + 1, times its sentences, stays within it (a single longer pair is a batch)."""
    if by not in ("sentences", "tokens") or scheme not in ("paper", "bucket", "random"):
        raise ValueError(f"unknown batching by={by!r} scheme={scheme!r}")
    if batch_size < 1 or sort_k < 1:
        raise ValueError(f"batch_size and sort_k must be at least 1, not {batch_size} and {sort_k}")
    src, tgt = np.asarray(src_lengths), np.asarray(tgt_lengths)
    if src.shape != tgt.shape:
        raise ValueError(f"{len(src)} source lengths but {len(tgt)} target lengths")
    rng = np.random.default_rng([seed % 2 ** 64, epoch % 2 ** 64])
    order = rng.permutation(len(tgt))
    padded = tgt.astype(np.int64) + 1  # a target predicts </s> too
    by_tokens = by == "tokens"
    if scheme == "random":
        return _cut(order, padded, batch_size, by_tokens)
    key = _length_key(src, tgt)
    if scheme == "bucket":
        batches = _cut(order[np.argsort(key[order], kind="stable")], padded, batch_size, by_tokens)
        return [batches[i] for i in rng.permutation(len(batches))]
    return _paper_batches(order, key, padded, batch_size, by_tokens, sort_k, rng)


def _length_key(src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
    """One integer a pair that sorts as (target length, source length): the target first, as it
    drives the decoder loop. A stable sort on it keeps ties in their shuffled order."""
    key = tgt.astype(np.int64) * (int(src.max(initial=0)) + 1) + src
    return key.astype(np.uint16) if key.max(initial=0) < 1 << 16 else key  # numpy radix-sorts 16-bit keys


def _paper_batches(order: np.ndarray, key: np.ndarray, padded: np.ndarray, size: int, by_tokens: bool,
                   sort_k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Appendix B: chunks of sort_k batches' worth of the shuffled pairs, each sorted by length
    and cut, the batches of a chunk shuffled among themselves."""
    n = len(order)
    chunk = sort_k * size
    if by_tokens:  # sort_k batches' worth of pairs of the mean padded length
        chunk = max(1, sort_k * size // max(1, int(padded.sum()) // max(1, n)))
    batches: list[np.ndarray] = []
    for start in range(0, n, chunk):
        part = order[start:start + chunk]
        group = _cut(part[np.argsort(key[part], kind="stable")], padded, size, by_tokens)
        batches.extend(group[i] for i in rng.permutation(len(group)))
    return batches


def _cut(order: np.ndarray, padded: np.ndarray, size: int, by_tokens: bool) -> list[np.ndarray]:
    """Cut ordered positions into batches of `size` sentences or padded target tokens."""
    if len(order) == 0:
        return []
    if not by_tokens:
        return np.split(order, np.arange(size, len(order), size))
    lengths = padded[order]
    batches, start = [], 0
    while start < len(order):
        # a batch holds at most size // (its first length) pairs: look no further
        window = lengths[start:start + max(1, size // int(lengths[start]))]
        cost = np.maximum.accumulate(window) * np.arange(1, len(window) + 1)  # padded tokens of a prefix
        over = np.flatnonzero(cost[1:] > size)
        count = int(over[0]) + 1 if len(over) else len(window)
        batches.append(order[start:start + count])
        start += count
    return batches


def iterate_sorted(seqs: list[list[int]], batch_size: int) -> Iterator[list[int]]:
    """Positions of `seqs` in batches of similar length (for decoding); the caller restores order."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]
