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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from rnnsearch.engine.vocab import BOS, EOS, PAD, UNK
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
               reverse_source: bool = False, lowercase: bool = False, name: str = "data") -> ParallelData:
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
            raise DataError(f"{name}: no pairs left after dropping {blank} blank and {long} too long "
                            f"(max_len={max_len})")
        return cls(examples, blank, long)

    def __len__(self) -> int:
        return len(self.examples)


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


def _cut(order: list[int], lengths: list[int], size: int, by_tokens: bool) -> list[list[int]]:
    """Cut an ordered list of example ids into batches of `size` sentences or padded tokens."""
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        if by_tokens:
            new_longest = max(longest, lengths[i])
            if cur and new_longest * (len(cur) + 1) > size:
                batches.append(cur)
                cur, new_longest = [], lengths[i]
            cur.append(i)
            longest = new_longest
        else:
            cur.append(i)
            if len(cur) == size:
                batches.append(cur)
                cur = []
    if cur:
        batches.append(cur)
    return batches


def target_tokens(examples: list[Example]) -> int:
    """The target tokens a batch of these examples predicts, </s> included (the non-PAD entries
    of its ``tgt_out``), counted on the CPU: no wait for a GPU."""
    return sum(len(e.tgt) + 1 for e in examples)


def make_batches(data: ParallelData, batch_size: int, by: str = "sentences", scheme: str = "paper",
                 sort_k: int = 20, seed: int = 0, epoch: int = 0) -> list[list[int]]:
    """The batches of one epoch as lists of example positions; deterministic in (seed, epoch)."""
    rng = random.Random(seed * 100_003 + epoch)
    n = len(data)
    # Sort key: target length first (it drives the decoder loop), then source length.
    lengths = [len(e.tgt) + 1 for e in data.examples]
    key = [(len(e.tgt), len(e.src)) for e in data.examples]
    order = list(range(n))
    rng.shuffle(order)
    by_tokens = by == "tokens"
    if scheme == "random":
        return _cut(order, lengths, batch_size, by_tokens)
    if scheme == "bucket":
        order.sort(key=lambda i: key[i])
        batches = _cut(order, lengths, batch_size, by_tokens)
        rng.shuffle(batches)
        return batches
    # paper: chunks of sort_k batches' worth of pairs, each sorted and cut.
    if by_tokens:
        mean = max(1, sum(lengths) // n)
        chunk = max(1, sort_k * batch_size // mean)
    else:
        chunk = sort_k * batch_size
    batches = []
    for start in range(0, n, chunk):
        part = sorted(order[start:start + chunk], key=lambda i: key[i])
        group = _cut(part, lengths, batch_size, by_tokens)
        rng.shuffle(group)
        batches.extend(group)
    return batches


def iterate_sorted(seqs: list[list[int]], batch_size: int) -> Iterator[list[int]]:
    """Positions of `seqs` in batches of similar length (for decoding); the caller restores order."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]
