"""Statistical word alignment of a training corpus, at the level the model trains on.

    rnnsearch data align CONFIG [--set KEY=VALUE]

prepares the config's training pairs as `rnnsearch data prepare` does (engine/data/prepared.py), then

1. writes the words of the kept pairs (whitespace words of the text as data.normalize leaves it,
   lower-cased for the aligner's counts as eflomal's own front end does) in eflomal's numeric
   input format, streaming, and runs eflomal (Östling & Tiedemann 2016; PyPI `eflomal`, the
   `align` extra: pip install -e ".[align]") in both directions;
2. symmetrises each pair's two link sets with grow-diag-final-and (alignment.symmetrize);
3. maps every word link (i, j) onto the model's tokens: every piece of source word i with every
   piece of target word j, at the positions the prepared split holds them (the source reversed
   when data.reverse_source is), so a link indexes exactly the ids a training pair is made of;
4. counts the symmetrised links into a lexical translation table.

It installs, beside the prepared split in the prepared cache (data.prepared_dir, else
<model_dir>/prepared), a directory `align-<fingerprint>`:

    links.npy     int16 (int32 past 32,767 tokens), the links of all kept pairs, flat: source
                  position, target position, source position, ... (Alignment reads it as (L, 2))
    offsets.npy   int64, n+1 entries: pair k of the split has links[offsets[k]:offsets[k+1]]
    index.npy     int64, the split's index.npy (Example.index, line number - 1) it is keyed to
    links.txt     word-level Pharaoh lines "i-j", one a corpus line, the source in reading order,
                  empty for the pairs the split dropped (blank or over max_len)
    lexicon.tsv   source_word<TAB>target_word<TAB>p(target|source): the symmetrised links' counts
                  normalised per source word, the top_k targets of each (so a word's
                  probabilities sum to at most 1), sorted by source word, then by descending
                  probability; words as the model reads them (cased unless data.lowercase)
    meta.json     format, fingerprint, the split's fingerprint, settings, eflomal's version, counts

The fingerprint is the split's (which covers corpus bytes, tokenizers, max_len, lowercase,
reverse_source) plus this format's version, eflomal's version and the settings: a changed corpus,
vocabulary or setting aligns again, never reusing stale links. The directory is built under a
temporary name and renamed into place, as prepared splits are.

A word whose pieces cannot be told apart (its encoding alone differs from its encoding in the
sentence, and "▁" marks do not separate the words either) leaves its pair without piece links;
meta.json counts such pairs as "unmapped". Memory: eflomal holds the corpus itself; the
conversion streams it, except the lexicon's counts (one entry a distinct word pair).
"""

from __future__ import annotations

import array
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Optional

import numpy as np

from rnnsearch.config import Config
from rnnsearch.engine.align.links import Links, format_pharaoh, symmetrize
from rnnsearch.engine.checkpoint import read_config
from rnnsearch.engine.data.pairs import prepare
from rnnsearch.engine.data.parallel import normalize
from rnnsearch.engine.data.prepared import (
    CHUNK_PAIRS,
    NpyWriter,
    ParallelFiles,
    PreparedData,
    chunk_texts,
    install,
    read_chunks,
)
from rnnsearch.engine.data.vocab import SentencePiece, load_tokenizers
from rnnsearch.io import DataError

log = logging.getLogger("rnnsearch")

FORMAT_VERSION = 1
EFLOMAL_MAX_WORDS = 0x400  # eflomal leaves sentences of this many words or more unaligned
INSTALL_HINT = 'pip install -e ".[align]" (or pip install eflomal)'


@dataclass(frozen=True)
class AlignSettings:
    """eflomal's options (its Python Aligner's defaults) and what is made of its links."""

    model: int = 3  # 1: IBM model 1, 2: + HMM, 3: + fertility
    samplers: int = 3  # independent Gibbs samplers, averaged
    rel_iterations: float = 1.0  # iterations relative to eflomal's default for the corpus size
    null_prior: float = 0.2
    symmetrize: str = "grow-diag-final-and"  # or intersection, union (alignment.symmetrize)
    top_k: int = 10  # lexicon.tsv: targets kept per source word


def require_eflomal() -> Any:
    """The eflomal module, or a DataError saying how to install it."""
    try:
        import eflomal
    except ImportError:
        raise DataError(f"data align needs eflomal, the statistical word aligner: {INSTALL_HINT}") from None
    return eflomal


def eflomal_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("eflomal")
    except PackageNotFoundError:
        return "unknown"


# --------------------------------------------------------------------------- words to pieces


def piece_counts(words: Sequence[str], ids: Sequence[int], encode_word: Callable[[str], Sequence[int]],
                 pieces: Optional[Sequence[str]] = None) -> Optional[list[int]]:
    """How many of a sentence's token `ids` (in reading order) each whitespace word makes, or None.

    First each word's own encoding (sentencepiece encodes the words of normalised text
    independently: vocab.WordCache), accepted when together they are `ids`; else the pieces' "▁"
    marks (alignment.word_spans), when they start exactly len(words) words."""
    counts, pos = [], 0
    for word in words:
        own = list(encode_word(word))
        if list(ids[pos:pos + len(own)]) != own:
            break
        counts.append(len(own))
        pos += len(own)
    if len(counts) == len(words) and pos == len(ids):
        return counts
    if pieces is None or not pieces or not pieces[0].startswith("▁"):
        return None
    starts = [k for k, p in enumerate(pieces) if p.startswith("▁")]
    if len(starts) != len(words):
        return None
    return [b - a for a, b in zip(starts, starts[1:] + [len(pieces)])]


def piece_links(word_links: Links, src_counts: Sequence[int], tgt_counts: Sequence[int],
                reverse_source: bool = False) -> np.ndarray:
    """(L, 2) int64 token links from word links: every piece of source word i with every piece of
    target word j; source positions counted from the end when the model reads the source
    reversed (data.reverse_source). Sorted by source, then target position."""
    src_start, tgt_start = [0, *accumulate(src_counts)], [0, *accumulate(tgt_counts)]
    n_src = src_start[-1]
    out = []
    for i, j in word_links:
        targets = range(tgt_start[j], tgt_start[j + 1])
        for p in range(src_start[i], src_start[i + 1]):
            out += [(n_src - 1 - p if reverse_source else p, q) for q in targets]
    return np.array(sorted(out), dtype=np.int64).reshape(-1, 2)


class _PieceMapper:
    """Word links of pair k of a prepared split -> its token links, checked against its ids."""

    LIMIT = 1 << 20  # distinct words whose encodings are kept (as vocab.WordCache)

    def __init__(self, data: PreparedData, src_tok: Any, tgt_tok: Any):
        self.data, self.reverse = data, bool(data.meta["reverse_source"])
        self.toks = {"src": src_tok, "tgt": tgt_tok}
        self.caches: dict[str, dict[str, list[int]]] = {"src": {}, "tgt": {}}
        self.unmapped = 0

    def _encode_word(self, side: str) -> Callable[[str], list[int]]:
        cache, tok = self.caches[side], self.toks[side]

        def encode(word: str) -> list[int]:
            ids = cache.get(word)
            if ids is None:
                if len(cache) >= self.LIMIT:
                    cache.clear()
                ids = cache[word] = tok.encode(word)
            return ids

        return encode

    def counts(self, side: str, k: int, words: list[str]) -> Optional[list[int]]:
        offsets, tokens = self.data.arrays[f"{side}.offsets"], self.data.arrays[f"{side}.tokens"]
        ids = tokens[offsets[k]:offsets[k + 1]].tolist()
        if side == "src" and self.reverse:
            ids.reverse()
        tok = self.toks[side]
        pieces = tok.pieces(ids) if isinstance(tok, SentencePiece) else None
        return piece_counts(words, ids, self._encode_word(side), pieces)

    def links(self, k: int, src_words: list[str], tgt_words: list[str], word_links: Links) -> np.ndarray:
        src, tgt = self.counts("src", k, src_words), self.counts("tgt", k, tgt_words)
        if src is None or tgt is None:
            self.unmapped += 1
            return np.zeros((0, 2), np.int64)
        return piece_links(word_links, src, tgt, self.reverse)


# --------------------------------------------------------------------------- lexicon


class Lexicon:
    """Counts of linked (source word, target word) pairs -> p(target | source)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}

    def add(self, src_words: Sequence[str], tgt_words: Sequence[str], links: Links) -> None:
        for i, j in links:
            self.counts.setdefault(src_words[i], Counter())[tgt_words[j]] += 1

    def rows(self, top_k: int) -> Iterator[tuple[str, str, float]]:
        """(source, target, count / source's count of links), top_k a source word, sorted by
        source word, then descending probability (ties: target word)."""
        for src in sorted(self.counts):
            counts = self.counts[src]
            total = sum(counts.values())
            for tgt, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]:
                yield src, tgt, n / total

    def write(self, path: Path, top_k: int) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for src, tgt, p in self.rows(top_k):
                f.write(f"{src}\t{tgt}\t{p:.6g}\n")


# --------------------------------------------------------------------------- the corpus and eflomal


def split_files(data: PreparedData) -> ParallelFiles:
    """The corpus files a prepared split was made from, refused when one has changed size since."""
    paths = {}
    for item in data.meta["inputs"]:
        path = Path(item["path"])
        if not path.exists() or path.stat().st_size != item["size"]:
            raise DataError(f"{path}: changed since {data.path} was prepared from it; prepare it again")
        paths[item["role"]] = path
    return ParallelFiles(**paths)


def _corpus_words(data: PreparedData) -> Iterator[tuple[int, Optional[int], list[str], list[str]]]:
    """Every corpus line as (line index, position in the split or None where the split dropped
    it, source words, target words), the words of the normalised text the split encoded."""
    files, index, lowercase = split_files(data), data.index, bool(data.meta["lowercase"])
    k, kept = 0, len(index)
    for chunk in read_chunks(files, CHUNK_PAIRS):
        srcs, tgts = chunk_texts(files, chunk)
        for line, (src, tgt) in enumerate(zip(srcs, tgts), chunk.start):
            if k < kept and int(index[k]) == line:
                yield line, k, normalize(src, lowercase).split(), normalize(tgt, lowercase).split()
                k += 1
            else:
                yield line, None, [], []
    if k != kept:
        raise DataError(f"{data.path}: {kept - k} of its pairs are past the end of the corpus; "
                        "prepare it again")


class _EflomalText:
    """One side in eflomal's input format: a header "SENTENCES VOCABULARY", then a line a
    sentence "LENGTH ID ID ..." (ids from 0). Written as it comes; the header, padded, is filled
    in at the end."""

    HEADER = 47

    def __init__(self, path: Path):
        self.path, self.file = path, open(path, "w", encoding="ascii")
        self.file.write(" " * self.HEADER + "\n")
        self.vocab: dict[str, int] = {}
        self.n = 0

    def add(self, words: list[str]) -> None:
        ids = [self.vocab.setdefault(w.lower(), len(self.vocab)) for w in words]
        if len(ids) >= EFLOMAL_MAX_WORDS:
            ids = []
        self.file.write(" ".join(map(str, [len(ids), *ids])) + "\n")
        self.n += 1

    def finish(self) -> None:
        self.file.seek(0)
        self.file.write(f"{self.n} {len(self.vocab)}".ljust(self.HEADER) + "\n")
        self.file.close()


def _run_eflomal(data: PreparedData, work: Path, settings: AlignSettings) -> int:
    """eflomal's forward and reverse links of the split's pairs, as `work`/fwd and `work`/rev
    (Pharaoh, source-target in both); the number of pairs."""
    eflomal = require_eflomal()
    src, tgt = _EflomalText(work / "src.eflomal"), _EflomalText(work / "tgt.eflomal")
    try:
        for _, k, src_words, tgt_words in _corpus_words(data):
            if k is not None:
                src.add(src_words)
                tgt.add(tgt_words)
    finally:
        src.finish()
        tgt.finish()
    began = time.perf_counter()
    try:
        eflomal.align(str(src.path), str(tgt.path), links_filename_fwd=str(work / "fwd"),
                      links_filename_rev=str(work / "rev"), model=settings.model,
                      n_samplers=settings.samplers, rel_iterations=settings.rel_iterations,
                      null_prior=settings.null_prior, quiet=True)
    except (subprocess.CalledProcessError, OSError) as e:
        raise DataError(f"eflomal failed on {src.path} and {tgt.path} ({e})") from None
    log.info("eflomal aligned %d pairs in %.1f s", src.n, time.perf_counter() - began)
    return src.n


def _read_links(line: str, where: str, n_src: int, n_tgt: int) -> Links:
    links = set()
    for item in line.split():
        i, _, j = item.partition("-")
        try:
            link = int(i), int(j)
        except ValueError:
            raise DataError(f"{where}: bad link {item!r} (expected i-j)") from None
        if not (0 <= link[0] < n_src and 0 <= link[1] < n_tgt):
            raise DataError(f"{where}: link {item} outside a pair of {n_src} and {n_tgt} words")
        links.add(link)
    return links


# --------------------------------------------------------------------------- building, reading


class _LinkWriter:
    """links.npy and offsets.npy, appended pair by pair through a buffer."""

    def __init__(self, folder: Path, dtype: str):
        self.links = NpyWriter(folder / "links.npy", dtype)
        self.offsets = NpyWriter(folder / "offsets.npy", np.int64)
        self.buffer, self.ends, self.total = array.array("q"), array.array("q", [0]), 0

    def append(self, links: np.ndarray) -> None:
        self.buffer.extend(links.ravel().tolist())
        self.total += len(links)
        self.ends.append(self.total)
        if len(self.buffer) >= 1 << 16:
            self.flush()

    def flush(self) -> None:
        if len(self.buffer):
            self.links.append(np.frombuffer(self.buffer, np.int64))
        if len(self.ends):
            self.offsets.append(np.frombuffer(self.ends, np.int64))
        self.buffer, self.ends = array.array("q"), array.array("q")

    def finish(self) -> None:
        self.flush()
        self.links.finish()
        self.offsets.finish()


LinksOf = Callable[[int, list[str], list[str]], Links]  # (line index, source words, target words) -> links


def _convert(data: PreparedData, out: Path, mapper: _PieceMapper, links_of: LinksOf,
             top_k: int) -> dict[str, int]:
    """links.txt, the token links and lexicon.tsv of the split's kept pairs, their word links
    given by `links_of`."""
    writer, lexicon = _LinkWriter(out, _link_dtype(data)), Lexicon()
    counts = {"word_links": 0}
    with open(out / "links.txt", "w", encoding="utf-8") as text:
        for line, k, src_words, tgt_words in _corpus_words(data):
            if k is None:
                text.write("\n")
                continue
            links = links_of(line, src_words, tgt_words)
            text.write(format_pharaoh(links) + "\n")
            lexicon.add(src_words, tgt_words, links)
            writer.append(mapper.links(k, src_words, tgt_words, links))
            counts["word_links"] += len(links)
    writer.finish()
    lexicon.write(out / "lexicon.tsv", top_k)
    return {**counts, "links": writer.total, "unmapped": mapper.unmapped,
            "lexicon_words": len(lexicon.counts)}


def _symmetrised(work: Path, settings: AlignSettings, stack: ExitStack) -> LinksOf:
    """eflomal's two directions of each pair (files of `work`, read in order), symmetrised."""
    fwd = stack.enter_context(open(work / "fwd", encoding="utf-8"))
    rev = stack.enter_context(open(work / "rev", encoding="utf-8"))

    def links_of(line: int, src_words: list[str], tgt_words: list[str]) -> Links:
        sizes = len(src_words), len(tgt_words)
        where = f"eflomal's %s links of the pair at line {line + 1}"
        forward = _read_links(fwd.readline(), where % "forward", *sizes)
        backward = _read_links(rev.readline(), where % "reverse", *sizes)
        return symmetrize(forward, backward, settings.symmetrize)

    return links_of


class _LinksFile:
    """A Pharaoh file of word links, a line a corpus line, read in step with the corpus: the
    line of each kept pair parsed and checked (the lines of dropped pairs are skipped unread)."""

    def __init__(self, path: Path, stack: ExitStack):
        self.path, self.file, self.read = path, stack.enter_context(open(path, encoding="utf-8")), 0

    def __call__(self, line: int, src_words: list[str], tgt_words: list[str]) -> Links:
        while self.read <= line:
            text = self.file.readline()
            if not text:
                raise DataError(f"{self.path}: {self.read} lines, but the corpus has more (the pair at "
                                f"line {line + 1} has no links line); give a line a corpus line")
            self.read += 1
        return _read_links(text, f"{self.path}:{line + 1}", len(src_words), len(tgt_words))

    def check_end(self, lines: int) -> None:
        """Refuse a file longer than the corpus (`lines`): it belongs to another one."""
        while self.read < lines and self.file.readline():
            self.read += 1
        if self.file.readline():
            raise DataError(f"{self.path}: more lines than the corpus's {lines}; give a line a corpus line")


def _fsync_files(folder: Path) -> None:
    """Everything in `folder` on disk before it is renamed into place (a crash leaves it whole or absent)."""
    for path in [*folder.iterdir(), folder]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _link_dtype(data: PreparedData) -> str:
    return "int16" if int(data.meta["max_len"]) <= np.iinfo(np.int16).max else "int32"


def _plan(data: PreparedData, settings: AlignSettings) -> dict[str, Any]:
    if settings.symmetrize not in ("grow-diag-final-and", "intersection", "union"):
        raise DataError(f"align: symmetrize must be grow-diag-final-and, intersection or union, "
                        f"not {settings.symmetrize!r}")
    if settings.top_k < 1:
        raise DataError(f"align: top_k must be at least 1, not {settings.top_k}")
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "prepared": data.meta["fingerprint"],
                            "eflomal": eflomal_version(), "settings": asdict(settings)}
    meta["fingerprint"] = _fingerprint(meta)
    return meta


def _fingerprint(meta: dict[str, Any]) -> str:
    keys = ("format", "prepared", "eflomal", "links_file", "settings")  # eflomal's or a file's
    content = {key: meta[key] for key in keys if key in meta}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode("utf-8")).hexdigest()


def _dir_name(fingerprint: str) -> str:
    return f"align-{fingerprint[:16]}"


def align_prepared(data: PreparedData, src_tok: Any, tgt_tok: Any,
                   settings: AlignSettings = AlignSettings()) -> Alignment:
    """The alignment of a prepared split's pairs (made with these tokenizers): reused when the
    prepared cache holds it for this split and these settings, else made by eflomal and installed."""
    require_eflomal()

    def fill(tmp: Path, meta: dict[str, Any]) -> None:
        (tmp / "work").mkdir()
        meta["pairs"] = _run_eflomal(data, tmp / "work", settings)
        with ExitStack() as stack:
            links_of = _symmetrised(tmp / "work", settings, stack)
            meta.update(_convert(data, tmp, _PieceMapper(data, src_tok, tgt_tok), links_of, settings.top_k))
        shutil.rmtree(tmp / "work")

    return _installed(data, _plan(data, settings), fill)


def links_from_file(data: PreparedData, src_tok: Any, tgt_tok: Any, path: str | Path,
                    top_k: int = AlignSettings.top_k) -> Alignment:
    """The word links of a Pharaoh file (a line a corpus line, `i-j` over the whitespace words of
    the text as data.normalize leaves it: the form of links.txt; the lines of pairs the split
    drops are not read) mapped onto the split's tokens and installed like eflomal's, keyed by the
    file's bytes: train.guided_alignment=PATH."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such links file (train.guided_alignment)")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "prepared": data.meta["fingerprint"],
                            "links_file": {"sha256": digest.hexdigest(), "name": path.name},
                            "settings": {"top_k": top_k}}
    meta["fingerprint"] = _fingerprint(meta)

    def fill(tmp: Path, meta: dict[str, Any]) -> None:
        with ExitStack() as stack:
            links_of = _LinksFile(path, stack)
            meta.update(_convert(data, tmp, _PieceMapper(data, src_tok, tgt_tok), links_of, top_k))
            m = data.meta
            links_of.check_end(int(m["kept"]) + int(m["dropped_blank"]) + int(m["dropped_long"]))
        meta["pairs"] = len(data)

    return _installed(data, meta, fill)


def _installed(data: PreparedData, meta: dict[str, Any],
               fill: Callable[[Path, dict[str, Any]], None]) -> Alignment:
    """The alignment `meta` describes: the installed one, or `fill`ed into a temporary directory
    (its counts added to `meta`) and renamed into place beside the split."""
    final = data.path.parent / _dir_name(meta["fingerprint"])
    if final.exists():
        log.info("reusing alignment %s", final)
        return open_alignment(final, meta["fingerprint"])
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    began = time.perf_counter()
    try:
        fill(tmp, meta)
        np.save(tmp / "index.npy", np.asarray(data.index))
        meta["seconds"] = round(time.perf_counter() - began, 1)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        _fsync_files(tmp)
        if meta["unmapped"]:
            log.warning("%d of %d pairs have no token links: their words and tokens could not be matched",
                        meta["unmapped"], meta["pairs"])
        install(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("aligned %d pairs into %s in %.1f s", meta["pairs"], final, meta["seconds"])
    return open_alignment(final, meta["fingerprint"])


def align_config(cfg: Config, settings: AlignSettings = AlignSettings()) -> Alignment:
    """`rnnsearch data align CONFIG`: the training pairs prepared (engine.corpus.prepare: the run's
    vocabularies, or new ones saved in the model directory), then aligned."""
    require_eflomal()
    data = prepare(cfg)
    model_dir = Path(cfg.model_dir)
    src_tok, tgt_tok = load_tokenizers(model_dir, read_config(model_dir).vocab)  # those prepare used
    return align_prepared(data, src_tok, tgt_tok, settings)


class Alignment:
    """An installed alignment, memory-mapped: pair k of its prepared split has links[k], an
    (m, 2) array of (source position, target position) in the split's token ids."""

    def __init__(self, path: Path, meta: dict[str, Any]):
        self.path, self.meta = path, meta
        self.flat = np.load(path / "links.npy", mmap_mode="r")
        self.offsets = np.load(path / "offsets.npy", mmap_mode="r")
        self.index = np.load(path / "index.npy", mmap_mode="r")

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> np.ndarray:
        """(m, 2): the token links of pair k of the prepared split (the pair at self.index[k])."""
        start, end = int(self.offsets[k]), int(self.offsets[k + 1])
        return np.asarray(self.flat[2 * start:2 * end]).reshape(-1, 2)

    def for_line(self, line: int) -> Optional[np.ndarray]:
        """The token links of the pair at this line index (Example.index), None for a dropped one."""
        k = int(np.searchsorted(self.index, line))
        return self[k] if k < len(self.index) and int(self.index[k]) == line else None

    @property
    def lexicon(self) -> Path:
        return self.path / "lexicon.tsv"


def open_alignment(path: str | Path, fingerprint: Optional[str] = None) -> Alignment:
    """An installed alignment, checked: its meta.json, name and arrays agree (and its fingerprint is
    `fingerprint`, when given); else a DataError naming the directory and the problem."""
    path = Path(path)
    try:
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        problem = _meta_problem(path, meta, fingerprint)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: cannot read meta.json ({e}); delete it to align again") from None
    if problem is None:
        try:
            alignment = Alignment(path, meta)
            problem = _array_problem(alignment)
        except (OSError, ValueError, KeyError, TypeError) as e:
            problem = f"cannot read its arrays ({e})"
    if problem is not None:
        raise DataError(f"{path}: {problem}; delete it to align again")
    return alignment


def _array_problem(alignment: Alignment) -> Optional[str]:
    ends, kept = alignment.offsets, alignment.meta["pairs"]
    if len(ends) != kept + 1 or len(alignment.index) != kept:
        return f"offsets.npy or index.npy does not hold {kept} pairs"
    if int(ends[0]) != 0 or 2 * int(ends[-1]) != len(alignment.flat):
        return "offsets.npy and links.npy disagree"
    return None


def _meta_problem(path: Path, meta: dict[str, Any], fingerprint: Optional[str]) -> Optional[str]:
    if meta["format"] != FORMAT_VERSION:
        return f"aligned in format {meta['format']}, this rnnsearch reads format {FORMAT_VERSION}"
    if _fingerprint(meta) != meta["fingerprint"] or path.name != _dir_name(meta["fingerprint"]):
        return "meta.json does not match its fingerprint or the directory's name"
    if fingerprint is not None and fingerprint != meta["fingerprint"]:
        return f"made from another split or settings (fingerprint {meta['fingerprint'][:16]})"
    return None


def find_alignment(data: PreparedData) -> Optional[Alignment]:
    """The newest installed alignment of this prepared split (whatever its settings), or None."""
    found = []
    for path in data.path.parent.glob("align-*"):
        try:
            meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("prepared") == data.meta["fingerprint"]:
            found.append((path.stat().st_mtime, path))
    return open_alignment(max(found)[1]) if found else None
