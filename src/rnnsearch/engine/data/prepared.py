"""Prepared corpora: encode a parallel corpus once, then train from memory-mapped arrays.

Reading a corpus into Python strings and int lists costs about 1 KB a pair (12 GB for WMT14
En-Fr's 12M pairs) and minutes of single-core encoding on every start. `prepare_or_load`
encodes it once, streaming (memory stays flat in corpus size) and in worker processes, into a
directory of NumPy arrays that every later run memory-maps:

    src.tokens.npy  tgt.tokens.npy    the token ids of all kept pairs, concatenated (uint16
                                      when the vocabularies have <= 65,536 entries, else uint32)
    src.offsets.npy tgt.offsets.npy   int64, n+1 entries: pair i is tokens[offsets[i]:offsets[i+1]]
    index.npy                         int64, the pair's line number - 1 in the input (Example.index)
    meta.json                         format, fingerprint and what it was made from, counts

Why this format: numpy is already a dependency; a .npy file describes its own dtype and shape
and memory-maps (`np.load(mmap_mode="r")`), so the processes reading it share one copy in the
page cache; one flat array plus offsets is fairseq's MMapIndexedDataset idea without the
dependency, and the lengths batching needs are `np.diff(offsets)`.

The directory is named by a fingerprint of everything the arrays depend on (input bytes,
tokenizer bytes, max_len, lowercase, reverse_source, the format and cleaning versions), so a
changed corpus or setting never reuses stale arrays; it is built under a temporary name and
renamed into place, so an interrupted build never looks complete.

Encoding is ParallelData.encode's exactly (tests check it pair for pair), and both kinds of data
are batched by data.make_batches from their length arrays.
"""

from __future__ import annotations

import array
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, islice
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rnnsearch.engine.data.parallel import Example, normalize
from rnnsearch.engine.data.vocab import SPECIALS, SentencePiece, WordCache, WordVocab
from rnnsearch.io import DataError, count_lines, decode_block, iter_line_blocks

log = logging.getLogger("rnnsearch")

FORMAT_VERSION = 1
CLEANING_VERSION = 1  # bump when data.normalize changes what text it makes: prepared data goes stale
CHUNK_PAIRS = 20_000  # pairs a worker encodes at a time: ~10 MB of text, a few MB of ids
ARRAYS = ("src.tokens", "src.offsets", "tgt.tokens", "tgt.offsets", "index")


@dataclass(frozen=True)
class ParallelFiles:
    """A corpus as read_parallel reads it: line-aligned `src` and `tgt` files (plain or .gz),
    or one `tsv` (source<TAB>target), which wins when given."""

    src: Optional[Path] = None
    tgt: Optional[Path] = None
    tsv: Optional[Path] = None

    def __post_init__(self) -> None:
        for field in ("src", "tgt", "tsv"):
            if getattr(self, field) is not None:
                object.__setattr__(self, field, Path(getattr(self, field)))
        if self.tsv is None and (self.src is None or self.tgt is None):
            raise DataError("give a source and a target file, or one TSV file")

    def roles(self) -> list[tuple[str, Path]]:
        """The input files by role: [("tsv", path)] or [("src", path), ("tgt", path)]."""
        if self.tsv is not None:
            return [("tsv", self.tsv)]
        assert self.src is not None and self.tgt is not None
        return [("src", self.src), ("tgt", self.tgt)]

    def describe(self) -> str:
        """The files, for a message: "a.de, a.en" or "a.tsv"."""
        return ", ".join(str(path) for _, path in self.roles())


# --------------------------------------------------------------------------- reading, streaming


@dataclass(frozen=True)
class _Chunk:
    """Consecutive pairs as raw bytes: one block per input file, its first pair at line start+1."""

    start: int
    blocks: tuple[bytes, ...]


def read_chunks(files: ParallelFiles, size: int) -> Iterator[_Chunk]:
    """The corpus `size` pairs at a time. Line counts that differ raise a placeholder DataError:
    `_first_input_error` finds the message read_parallel gives."""
    if files.tsv is not None:
        start = 0
        for block in iter_line_blocks(files.tsv, size):
            yield _Chunk(start, (b"".join(block),))
            start += len(block)
        return
    assert files.src is not None and files.tgt is not None
    src_blocks, tgt_blocks, start = iter_line_blocks(files.src, size), iter_line_blocks(files.tgt, size), 0
    mismatch = DataError(f"{files.src} and {files.tgt} have different line counts")
    for src in src_blocks:
        tgt = next(tgt_blocks, [])
        if len(tgt) != len(src):
            raise mismatch
        yield _Chunk(start, (b"".join(src), b"".join(tgt)))
        start += len(src)
    if next(tgt_blocks, None) is not None:
        raise mismatch


def chunk_texts(files: ParallelFiles, chunk: _Chunk) -> tuple[list[str], list[str]]:
    """A chunk's source and target lines as read_parallel returns them."""
    if files.tsv is not None:
        return _split_tsv(decode_block(chunk.blocks[0], files.tsv, chunk.start + 1), files.tsv, chunk.start)
    assert files.src is not None and files.tgt is not None
    return (decode_block(chunk.blocks[0], files.src, chunk.start + 1),
            decode_block(chunk.blocks[1], files.tgt, chunk.start + 1))


def _split_tsv(lines: list[str], path: Path, start: int) -> tuple[list[str], list[str]]:
    """read_parallel's TSV rule: exactly one tab, except that a blank line is a blank pair."""
    srcs, tgts = [], []
    for n, line in enumerate(lines, start + 1):
        if line.count("\t") != 1:
            if not line.strip():
                srcs.append("")
                tgts.append("")
                continue
            raise DataError(f"{path}:{n}: expected 2 tab-separated columns, found {line.count(chr(9)) + 1}")
        s, t = line.split("\t")
        srcs.append(s)
        tgts.append(t)
    return srcs, tgts


def _first_input_error(files: ParallelFiles) -> Optional[DataError]:
    """The error read_parallel raises first for these files, or None.

    Streaming finds errors in reading order, but read_parallel reads each file whole (source,
    then target) before it looks at columns or line counts: invalid UTF-8 at the source's last
    line beats a missing target, and a read error beats both. Rescanning (in bounded memory)
    only when something is wrong gives the same message, whichever worker found a problem.
    """
    try:
        if files.tsv is not None:
            count_lines(files.tsv)
            return None
        assert files.src is not None and files.tgt is not None
        n_src, n_tgt = count_lines(files.src), count_lines(files.tgt)
    except DataError as e:
        return e
    if n_src != n_tgt:  # io.check_aligned's message
        return DataError(f"{files.src} ({n_src} lines) and {files.tgt} ({n_tgt} lines) "
                         "have different line counts")
    return None


# --------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class _Job:
    """What a worker needs to encode chunks; tokenizers travel as the bytes of their files."""

    files: ParallelFiles
    src_spec: tuple[str, bytes]
    tgt_spec: tuple[str, bytes]
    max_len: int
    lowercase: bool
    reverse_source: bool
    dtype: str


@dataclass
class _Encoded:
    """One chunk's kept pairs as arrays, and how many it dropped."""

    src_tokens: np.ndarray
    src_lengths: np.ndarray
    tgt_tokens: np.ndarray
    tgt_lengths: np.ndarray
    index: np.ndarray
    blank: int
    long: int


def _tokenizer_spec(tok: Any) -> tuple[str, bytes]:
    """(kind, bytes): the bytes of the tokenizer's file, for fingerprints and for workers."""
    if isinstance(tok, WordVocab):
        return "word", ("\n".join(tok.itos) + "\n").encode("utf-8")
    if isinstance(tok, SentencePiece):
        return "sentencepiece", tok.proto
    raise TypeError(f"cannot prepare data with a {type(tok).__name__} (a WordVocab or SentencePiece)")


def _tokenizer(spec: tuple[str, bytes]) -> WordVocab | SentencePiece:
    kind, data = spec
    if kind == "word":
        return WordVocab(data.decode("utf-8").split("\n")[len(SPECIALS):-1])
    return SentencePiece(data)


def _fast(tok: WordVocab | SentencePiece) -> WordVocab | SentencePiece | WordCache:
    """The tokenizer, a sentencepiece model with a cache of the words it has encoded (same ids)."""
    return WordCache(tok) if isinstance(tok, SentencePiece) else tok


class _Encoder:
    """ParallelData.encode for one chunk at a time, into arrays instead of Example objects."""

    def __init__(self, job: _Job):
        self.job = job
        self.src_tok = _fast(_tokenizer(job.src_spec))
        self.tgt_tok = self.src_tok if job.tgt_spec == job.src_spec else _fast(_tokenizer(job.tgt_spec))

    def __call__(self, chunk: _Chunk) -> _Encoded:
        srcs, tgts = chunk_texts(self.job.files, chunk)
        return self.encode(srcs, tgts, chunk.start)

    def encode(self, srcs: list[str], tgts: list[str], start: int) -> _Encoded:
        job, code = self.job, ("H" if self.job.dtype == "uint16" else "I")
        src_ids, tgt_ids = array.array(code), array.array(code)  # 2-4 bytes an id, not a Python int's 36
        src_len, tgt_len, index = array.array("q"), array.array("q"), array.array("q")
        blank = long = 0
        for i, (s, t) in enumerate(zip(srcs, tgts), start):
            s, t = normalize(s, job.lowercase), normalize(t, job.lowercase)
            if not s or not t:
                blank += 1
                continue
            si, ti = self.src_tok.encode(s), self.tgt_tok.encode(t)
            if len(si) > job.max_len or len(ti) > job.max_len or not si or not ti:
                long += 1
                continue
            src_ids.extend(si[::-1] if job.reverse_source else si)
            tgt_ids.extend(ti)
            src_len.append(len(si))
            tgt_len.append(len(ti))
            index.append(i)
        arr = lambda a, dtype: np.frombuffer(a, dtype=dtype) if len(a) else np.zeros(0, dtype)
        return _Encoded(arr(src_ids, job.dtype), arr(src_len, np.int64), arr(tgt_ids, job.dtype),
                        arr(tgt_len, np.int64), arr(index, np.int64), blank, long)


_WORKER: dict[str, _Encoder] = {}  # a pool worker's encoder, made once by _init_worker


def _init_worker(job: _Job) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it stops the pool
    _WORKER["encoder"] = _Encoder(job)


def _encode_in_worker(chunk: _Chunk) -> _Encoded:
    return _WORKER["encoder"](chunk)


def _encoded_chunks(job: _Job, workers: int, chunk_pairs: int) -> Generator[_Encoded, None, None]:
    """The corpus's chunks encoded, in corpus order, in `workers` processes (in this one for
    workers=1 or a corpus of one chunk, where a pool would only cost its start)."""
    chunks = read_chunks(job.files, chunk_pairs)
    head = list(islice(chunks, 2))
    if workers == 1 or len(head) < 2:
        yield from map(_Encoder(job), chain(head, chunks))
    else:
        yield from _pooled(job, chain(head, chunks), workers)


def _pooled(job: _Job, chunks: Iterator[_Chunk], workers: int) -> Iterator[_Encoded]:
    """Chunks encoded by a process pool, yielded in submission order; at most 2 x workers in
    flight, so memory stays bounded however far the reader could run ahead."""
    # fork: the workers inherit the imported modules (spawn would import torch again in each,
    # ~2 s), and they run only Python and sentencepiece, never torch's threads.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker, initargs=(job,))
    pending: deque[Future[_Encoded]] = deque()
    try:
        for chunk in chunks:
            pending.append(pool.submit(_encode_in_worker, chunk))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# --------------------------------------------------------------------------- writing


class NpyWriter:
    """A 1-D .npy file written by appending: the header is rewritten with the final length at
    the end (numpy pads a header so that any length fits in place)."""

    def __init__(self, path: Path, dtype: Any):
        self.dtype, self.count = np.dtype(dtype), 0
        self.file = open(path, "wb")
        self._header()
        self.data_start = self.file.tell()

    def _header(self) -> None:
        descr = np.lib.format.dtype_to_descr(self.dtype)
        np.lib.format.write_array_header_1_0(self.file, {"descr": descr, "fortran_order": False,
                                                         "shape": (self.count,)})

    def append(self, values: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.count += len(values)

    def finish(self) -> None:
        self.file.seek(0)
        self._header()
        if self.file.tell() != self.data_start:
            raise RuntimeError(f"{self.file.name}: the .npy header changed size")
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


class _SplitWriter:
    """The arrays of a prepared split, appended chunk by chunk; offsets run on across chunks."""

    def __init__(self, folder: Path, dtype: str, stack: ExitStack):
        types = {"src.tokens": dtype, "tgt.tokens": dtype}
        self.arrays = {name: NpyWriter(folder / f"{name}.npy", types.get(name, np.int64)) for name in ARRAYS}
        for writer in self.arrays.values():
            stack.callback(writer.file.close)
        self.ends = {"src": 0, "tgt": 0}
        self.arrays["src.offsets"].append(np.zeros(1, np.int64))
        self.arrays["tgt.offsets"].append(np.zeros(1, np.int64))
        self.blank = self.long = 0

    def append(self, enc: _Encoded) -> None:
        for side, tokens, lengths in (("src", enc.src_tokens, enc.src_lengths),
                                      ("tgt", enc.tgt_tokens, enc.tgt_lengths)):
            self.arrays[f"{side}.tokens"].append(tokens)
            self.arrays[f"{side}.offsets"].append(self.ends[side] + np.cumsum(lengths))
            self.ends[side] += len(tokens)
        self.arrays["index"].append(enc.index)
        self.blank += enc.blank
        self.long += enc.long

    def finish(self) -> dict[str, int]:
        for writer in self.arrays.values():
            writer.finish()
        return {"kept": self.arrays["index"].count, "dropped_blank": self.blank, "dropped_long": self.long,
                "src_tokens": self.ends["src"], "tgt_tokens": self.ends["tgt"]}


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


# --------------------------------------------------------------------------- building


def _workers(workers: Optional[int]) -> int:
    if workers is None:  # the cores this process may run on (a container or taskset may allow fewer)
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    return workers


def _dir_name(name: str, fingerprint: str) -> str:
    return f"{name}-{fingerprint[:16]}"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _describe_inputs(files: ParallelFiles) -> list[dict[str, Any]]:
    """Each input's role, path, size and content hash (of its bytes as stored, .gz or not)."""
    described = []
    with _input_errors(files):
        for role, path in files.roles():
            try:
                described.append({"role": role, "path": str(path.absolute()), "size": path.stat().st_size,
                                  "sha256": _file_sha256(path)})
            except OSError as e:
                raise DataError(f"{path}: cannot read ({e})") from None
    return described


def _fingerprint(meta: dict[str, Any]) -> str:
    """sha256 of what the arrays depend on: contents, not paths (a moved corpus is the same corpus)."""
    content = {key: meta[key] for key in ("format", "cleaning", "max_len", "lowercase", "reverse_source")}
    content["inputs"] = [[i["role"], i["sha256"]] for i in meta["inputs"]]
    content["tokenizers"] = [meta["tokenizers"][side]["sha256"] for side in ("src", "tgt")]
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()


def _plan(files: ParallelFiles, src_tok: Any, tgt_tok: Any, max_len: int, lowercase: bool,
          reverse_source: bool, name: str) -> tuple[_Job, dict[str, Any]]:
    """The job for the workers and the meta.json it will have, fingerprint included (minus counts)."""
    if not name or name.startswith(".") or os.sep in name:
        raise ValueError(f"a prepared split's name must be a plain file name, not {name!r}")
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, not {max_len}")
    specs = {"src": _tokenizer_spec(src_tok), "tgt": _tokenizer_spec(tgt_tok)}
    dtype = "uint16" if max(len(src_tok), len(tgt_tok)) <= 1 << 16 else "uint32"
    job = _Job(files, specs["src"], specs["tgt"], max_len, lowercase, reverse_source, dtype)
    entries = {"src": len(src_tok), "tgt": len(tgt_tok)}
    tokenizers = {side: {"kind": kind, "entries": entries[side], "sha256": hashlib.sha256(data).hexdigest()}
                  for side, (kind, data) in specs.items()}
    meta: dict[str, Any] = {
        "format": FORMAT_VERSION, "cleaning": CLEANING_VERSION, "name": name,
        "inputs": _describe_inputs(files), "tokenizers": tokenizers, "max_len": max_len,
        "lowercase": lowercase, "reverse_source": reverse_source, "token_dtype": dtype}
    meta["fingerprint"] = _fingerprint(meta)
    return job, meta


@contextmanager
def _input_errors(files: ParallelFiles) -> Iterator[None]:
    """Turn a reading error into the one read_parallel would report (see _first_input_error)."""
    try:
        yield
    except DataError as err:
        raise (_first_input_error(files) or err) from None


def _write_split(folder: Path, job: _Job, workers: int, chunk_pairs: int) -> dict[str, int]:
    """Encode the corpus into the arrays in `folder`; the counts of kept and dropped pairs."""
    with ExitStack() as stack:
        writer = _SplitWriter(folder, job.dtype, stack)
        with _input_errors(job.files), closing(_encoded_chunks(job, workers, chunk_pairs)) as encoded:
            for enc in encoded:
                writer.append(enc)
        return writer.finish()


def _log_counts(meta: dict[str, Any]) -> None:
    log.info("%s: %d pairs kept, %d blank and %d over %d tokens dropped", meta["name"], meta["kept"],
             meta["dropped_blank"], meta["dropped_long"], meta["max_len"])


def _build(job: _Job, meta: dict[str, Any], cache_dir: Path, workers: int, chunk_pairs: int) -> PreparedData:
    """Build under a temporary name and rename into place: a crash leaves nothing that looks done."""
    final = cache_dir / _dir_name(meta["name"], meta["fingerprint"])
    tmp = cache_dir / f".{final.name}.tmp-{os.getpid()}"
    cache_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    began = time.perf_counter()
    try:
        meta = {**meta, **_write_split(tmp, job, workers, chunk_pairs)}
        _log_counts(meta)
        if not meta["kept"]:
            raise DataError(f"{meta['name']} ({job.files.describe()}): no pairs left after dropping "
                            f"{meta['dropped_blank']} blank and "
                            f"{meta['dropped_long']} too long (max_len={job.max_len})")
        _write_meta(tmp / "meta.json", meta)
        _fsync_dir(tmp)
        install(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    lines = meta["kept"] + meta["dropped_blank"] + meta["dropped_long"]
    log.info("%s: prepared %s (%d pairs in %.1f s, %d workers)", meta["name"], final, lines,
             time.perf_counter() - began, workers)
    return open_prepared(final, meta["fingerprint"])


def install(tmp: Path, final: Path) -> None:
    try:
        os.rename(tmp, final)
    except OSError:
        if not (final / "meta.json").exists():
            raise
        shutil.rmtree(tmp)  # another process (another rank) prepared the same split first
    _fsync_dir(final.parent)


def prepare_or_load(files: ParallelFiles, src_tok: Any, tgt_tok: Any, cache_dir: str | Path, *, max_len: int,
                    lowercase: bool = False, reverse_source: bool = False, name: str = "train",
                    workers: Optional[int] = None, chunk_pairs: int = CHUNK_PAIRS) -> PreparedData:
    """The prepared split for these inputs and settings: reused when `cache_dir` has it (the
    inputs are hashed to know), else built. A damaged one is refused, not rebuilt.

    Built into `cache_dir/<name>-<fingerprint>`, encoded as ParallelData.encode does, in
    `workers` processes (default: every core this process may use; the same bytes for any worker
    count). Raises read_parallel's DataError for bad input and encode's when no pair is left."""
    job, meta = _plan(files, src_tok, tgt_tok, max_len, lowercase, reverse_source, name)
    path = Path(cache_dir) / _dir_name(name, meta["fingerprint"])
    if not path.exists():
        return _build(job, meta, Path(cache_dir), _workers(workers), chunk_pairs)
    data = open_prepared(path, meta["fingerprint"])
    log.info("%s: reusing prepared %s", name, path)
    _log_counts(data.meta)
    return data


# --------------------------------------------------------------------------- reading prepared splits


class PreparedData:
    """A prepared split, memory-mapped: a pair's ids become Python lists only when asked for.

    Pickles as its path and meta (the copy maps the files again), so handing it to a DataLoader
    worker or another process copies no ids.
    """

    def __init__(self, path: str | Path, meta: dict[str, Any]):
        self.__setstate__({"path": Path(path), "meta": meta})

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "meta": self.meta}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.meta = state["path"], state["meta"]
        self.arrays = {name: _load_array(self.path / f"{name}.npy") for name in ARRAYS}

    def __len__(self) -> int:
        return len(self.arrays["index"])

    @property
    def dropped_blank(self) -> int:
        return int(self.meta["dropped_blank"])

    @property
    def dropped_long(self) -> int:
        return int(self.meta["dropped_long"])

    @property
    def index(self) -> np.ndarray:
        """(n,) int64: each pair's line number - 1 in the input files."""
        return self.arrays["index"]

    @cached_property
    def src_lengths(self) -> np.ndarray:
        """(n,) int32: source tokens of each pair."""
        return np.diff(np.asarray(self.arrays["src.offsets"])).astype(np.int32)

    @cached_property
    def tgt_lengths(self) -> np.ndarray:
        """(n,) int32: target tokens of each pair, without </s>."""
        return np.diff(np.asarray(self.arrays["tgt.offsets"])).astype(np.int32)

    def __getitem__(self, i: int) -> Example:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"pair {i} of a prepared split of {n}")
        i = int(i) % n
        src, tgt = self.arrays["src.offsets"], self.arrays["tgt.offsets"]
        return Example(self.arrays["src.tokens"][src[i]:src[i + 1]].tolist(),
                       self.arrays["tgt.tokens"][tgt[i]:tgt[i + 1]].tolist(), int(self.arrays["index"][i]))

    def examples_at(self, positions: Iterable[int]) -> list[Example]:
        """The pairs at these positions (a batch from make_batches_from_lengths), in that order."""
        return [self[int(i)] for i in positions]


def _load_array(path: Path) -> np.ndarray:
    try:  # a plain ndarray view of the map: slicing an np.memmap costs 3x as much
        return np.load(path, mmap_mode="r").view(np.ndarray)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read this prepared array ({e}); delete {path.parent} "
                        "to prepare it again") from None


def _read_meta(path: Path) -> dict[str, Any]:
    if not path.is_dir():
        raise DataError(f"{path}: no prepared split here")
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a prepared split: cannot read meta.json ({e})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: not a prepared split: meta.json is not an object")
    return meta


def _meta_problem(path: Path, meta: dict[str, Any], fingerprint: Optional[str]) -> Optional[str]:
    """What is wrong with a prepared split's meta.json, or None."""
    try:
        if meta["format"] != FORMAT_VERSION:
            return f"prepared in format {meta['format']}, this rnnsearch reads format {FORMAT_VERSION}"
        if meta["cleaning"] != CLEANING_VERSION:
            return f"prepared with text cleaning version {meta['cleaning']}, now {CLEANING_VERSION}"
        if _fingerprint(meta) != meta["fingerprint"]:
            return "meta.json does not match its fingerprint (edited or damaged)"
        if path.name != _dir_name(meta["name"], meta["fingerprint"]):
            return f"the directory's name does not match its fingerprint {meta['fingerprint'][:16]}"
        if fingerprint is not None and meta["fingerprint"] != fingerprint:
            return (f"made from other inputs or settings (fingerprint {meta['fingerprint'][:16]}, "
                    f"expected {fingerprint[:16]})")
    except (KeyError, TypeError) as e:
        return f"meta.json lacks {e}"
    return None


def _array_problem(data: PreparedData) -> Optional[str]:
    """What makes the arrays disagree with meta.json or with each other, or None."""
    meta, arrays, kept = data.meta, data.arrays, data.meta["kept"]
    for name, values in arrays.items():
        dtype = np.dtype(meta["token_dtype"] if name.endswith("tokens") else np.int64)
        if values.dtype != dtype:
            return f"{name}.npy holds {values.dtype}, not {dtype}"
    if len(arrays["index"]) != kept:
        return f"index.npy has {len(arrays['index'])} entries for {kept} pairs"
    for side, lengths in (("src", data.src_lengths), ("tgt", data.tgt_lengths)):
        offsets, tokens = arrays[f"{side}.offsets"], arrays[f"{side}.tokens"]
        if len(offsets) != kept + 1:
            return f"{side}.offsets.npy has {len(offsets)} entries for {kept} pairs"
        if offsets[0] != 0 or offsets[-1] != len(tokens) or len(tokens) != meta[f"{side}_tokens"]:
            return f"{side}.offsets.npy and {side}.tokens.npy ({len(tokens)} ids) disagree"
        if lengths.min() < 1 or lengths.max() > meta["max_len"]:
            return f"{side} lengths outside 1..{meta['max_len']}"
    return None


def open_prepared(path: str | Path, fingerprint: Optional[str] = None) -> PreparedData:
    """A prepared split, checked: its format and cleaning versions are this rnnsearch's, meta.json
    matches its fingerprint (and `fingerprint`, when given) and the arrays agree with it. A stale,
    foreign or damaged directory raises a DataError naming it and the problem."""
    path = Path(path)
    meta = _read_meta(path)
    problem = _meta_problem(path, meta, fingerprint)
    if problem is None:
        data = PreparedData(path, meta)
        try:
            problem = _array_problem(data)
        except (KeyError, TypeError, ValueError) as e:
            problem = f"meta.json is malformed ({e!r})"
    if problem is not None:
        raise DataError(f"{path}: {problem}; delete it to prepare it again")
    return data


# --------------------------------------------------------------------------- vocabulary sample


def sample_pairs(files: ParallelFiles, n: int, seed: int = 0, lowercase: bool = False,
                 chunk_pairs: int = CHUNK_PAIRS) -> tuple[list[str], list[str]]:
    """Up to `n` line pairs drawn uniformly (reservoir sampling), normalized as the model sees
    them, in corpus order: text to build vocabularies from without holding the corpus in memory
    (sentencepiece's input_sentence_size idea). Every pair when the corpus has at most n, so a
    small corpus gets the vocabulary reading it whole gives. Deterministic in `seed`."""
    rng = np.random.default_rng(seed % 2 ** 64)
    reservoir: list[tuple[int, str, str]] = []
    with _input_errors(files):
        for chunk in read_chunks(files, chunk_pairs):
            srcs, tgts = chunk_texts(files, chunk)
            _reservoir_add(reservoir, srcs, tgts, chunk.start, n, rng)
    reservoir.sort()
    return ([normalize(s, lowercase) for _, s, _ in reservoir],
            [normalize(t, lowercase) for _, _, t in reservoir])


def _reservoir_add(reservoir: list[tuple[int, str, str]], srcs: list[str], tgts: list[str], start: int,
                   n: int, rng: np.random.Generator) -> None:
    """Algorithm R over one chunk: pair i (0-based) replaces a random one of the n kept with
    probability n / (i + 1); the draws for a whole chunk are made at once."""
    fill = min(len(srcs), max(0, n - len(reservoir)))
    reservoir.extend((start + k, srcs[k], tgts[k]) for k in range(fill))
    seen = np.arange(start + fill, start + len(srcs))
    slots = rng.integers(0, seen + 1)
    for k in np.flatnonzero(slots < n):
        reservoir[slots[k]] = (int(seen[k]), srcs[fill + k], tgts[fill + k])
