"""Prepared corpora: encoded once into memory-mapped arrays, exactly as ParallelData.encode
encodes, the same errors as read_parallel, atomic and keyed by a fingerprint; batching from
length arrays; a streaming vocabulary sample."""

import gzip
import json
import logging
import os
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from rnnsearch.engine.data import parallel as data_module
from rnnsearch.engine.data import prepared as prepared
from rnnsearch.engine.data.parallel import ParallelData, make_batches_from_lengths, normalize, read_parallel
from rnnsearch.engine.data.prepared import (
    ParallelFiles,
    PreparedData,
    open_prepared,
    prepare_or_load,
    sample_pairs,
)
from rnnsearch.engine.data.vocab import SentencePiece, WordVocab
from rnnsearch.io import (
    DataError,
    EmptyFileError,
    MissingFileError,
    count_lines,
    decode_block,
    iter_line_blocks,
    read_lines,
)

WORDS = "Ein Haus eine Katze der Hund sieht mag klein gross rot Baum".split()


def corpus_lines(n: int = 40, seed: int = 0) -> tuple[list[str], list[str]]:
    """Mixed case, blank and whitespace-only pairs, control and format characters, line
    separators that are not "\\n", and lines over the max_len of 8 the tests use."""
    rng = random.Random(seed)
    src, tgt = [], []
    for i in range(n):
        sent = [rng.choice(WORDS) for _ in range(rng.randint(1, 6 if i % 9 else 12))]
        src.append(" ".join(sent))
        tgt.append(" ".join(w.upper() for w in reversed(sent)))
    src[3], tgt[5], src[7], tgt[7] = "", "   ", "", ""
    src[10] = "Ein\x07Haus\u00adchen\u200b rot\u2028Baum\x0bklein\x1cHund\x85der"  # cleaned by normalize
    tgt[11] = "A  \t CAT\x0c"
    return src, tgt


def write_pair(folder: Path, src: list[str], tgt: list[str], newline: str = "\n") -> ParallelFiles:
    (folder / "c.src").write_bytes(("\ufeff" + newline.join(src) + newline).encode("utf-8"))
    (folder / "c.tgt").write_bytes((newline.join(tgt)).encode("utf-8"))  # no final newline
    return ParallelFiles(folder / "c.src", folder / "c.tgt")


def word_vocab(lines: list[str], size: int = 30) -> WordVocab:
    return WordVocab.build([normalize(s) for s in lines], size)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[str]]:
    return corpus_lines()


@pytest.fixture(scope="module")
def bpe(corpus):
    src, tgt = corpus
    return SentencePiece.build([normalize(s, True) for s in src + tgt], 60, "bpe")


def prepare(files: ParallelFiles, tok, cache: Path, **kw) -> PreparedData:
    kw = {"max_len": 8, "workers": 1, "chunk_pairs": 7, **kw}
    return prepare_or_load(files, tok, tok, cache, **kw)


def npy_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


# --------------------------------------------------------------------------- encoding


@pytest.mark.parametrize("kind", ["word", "bpe"])
@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("reverse_source", [False, True])
def test_examples_equal_parallel_data_encode(tmp_path, corpus, bpe, kind, lowercase, reverse_source):
    files = write_pair(tmp_path, *corpus, newline="\r\n")
    srcs, tgts = read_parallel(files.src, files.tgt)
    tok = word_vocab(srcs + tgts) if kind == "word" else bpe
    expected = ParallelData.encode(srcs, tgts, tok, tok, 8, reverse_source, lowercase)
    got = prepare(files, tok, tmp_path / "cache", lowercase=lowercase, reverse_source=reverse_source)
    assert got.examples_at(range(len(got))) == expected.examples
    assert (got.dropped_blank, got.dropped_long) == (expected.dropped_blank, expected.dropped_long)
    assert got.dropped_blank == 3 and got.dropped_long > 0
    assert got.src_lengths.tolist() == [len(e.src) for e in expected.examples]
    assert got.tgt_lengths.tolist() == [len(e.tgt) for e in expected.examples]
    assert got.index.tolist() == [e.index for e in expected.examples]


def test_tsv_and_gzip_inputs_equal_read_parallel(tmp_path, corpus):
    src, tgt = ([line.replace("\t", " ") for line in side] for side in corpus)
    text = "\n".join(f"{s}\t{t}" if s or t else "" for s, t in zip(src, tgt)) + "\n"
    with gzip.open(tmp_path / "c.tsv.gz", "wb") as f:
        f.write(text.encode("utf-8"))
    files = ParallelFiles(tsv=tmp_path / "c.tsv.gz")
    tok = word_vocab(src + tgt)
    expected = ParallelData.encode(*read_parallel(tsv=files.tsv), tok, tok, 8)
    assert prepare(files, tok, tmp_path / "cache").examples_at(range(len(expected))) == expected.examples


def test_log_line_and_no_pairs_left_are_encodes(tmp_path, caplog):
    files = write_pair(tmp_path, ["a b c", "", "a"], ["x y z", "w", "x y"])
    tok = word_vocab(["a b c x y z w"])
    with caplog.at_level(logging.INFO, logger="rnnsearch"):
        prepare(files, tok, tmp_path / "cache", max_len=2, name="valid")
    assert "valid: 1 pairs kept, 1 blank and 1 over 2 tokens dropped" in caplog.text
    files = write_pair(tmp_path, ["a b c", ""], ["x y z", "w"])
    with pytest.raises(DataError) as expected:
        ParallelData.encode(["a b c", ""], ["x y z", "w"], tok, tok, 2, name="valid", files=files.describe())
    assert str(files.src) in str(expected.value)  # the files the pairs came from
    with pytest.raises(DataError) as got:
        prepare(files, tok, tmp_path / "empty", max_len=2, name="valid")
    assert str(got.value) == str(expected.value)
    assert list((tmp_path / "empty").iterdir()) == []  # nothing left behind


# --------------------------------------------------------------------------- format


def test_format_is_npy_arrays_and_meta(tmp_path, corpus):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0] + corpus[1])
    data = prepare(files, tok, tmp_path / "cache")
    assert data.path.parent == tmp_path / "cache" and data.path.name.startswith("train-")
    arrays = {name: np.load(data.path / f"{name}.npy", mmap_mode="r") for name in prepared.ARRAYS}
    assert arrays["src.tokens"].dtype == np.uint16 and arrays["src.offsets"].dtype == np.int64
    assert arrays["index"].dtype == np.int64 and len(arrays["index"]) == len(data)
    assert len(arrays["tgt.offsets"]) == len(data) + 1
    assert arrays["tgt.offsets"][0] == 0 and arrays["tgt.offsets"][-1] == len(arrays["tgt.tokens"])
    assert np.array_equal(np.diff(arrays["src.offsets"]), data.src_lengths)
    meta = json.loads((data.path / "meta.json").read_text())
    assert meta["fingerprint"].startswith(data.path.name.split("-")[1])
    assert meta["kept"] == len(data) and meta["dropped_blank"] == 3 and meta["max_len"] == 8
    assert meta["token_dtype"] == "uint16" and meta["format"] == prepared.FORMAT_VERSION
    assert [i["role"] for i in meta["inputs"]] == ["src", "tgt"]
    assert meta["inputs"][0]["size"] == files.src.stat().st_size
    tok.save(tmp_path / "vocab.txt")  # the tokenizer's hash is its file's
    assert meta["tokenizers"]["src"]["sha256"] == prepared._file_sha256(tmp_path / "vocab.txt")


def test_large_vocabularies_store_uint32(tmp_path):
    files = write_pair(tmp_path, ["w70000 w3"], ["w69999"])
    tok = WordVocab([f"w{i}" for i in range(70_001)])
    data = prepare(files, tok, tmp_path / "cache")
    assert data.arrays["src.tokens"].dtype == np.uint32 and data.meta["token_dtype"] == "uint32"
    assert data[0].src == [tok.stoi["w70000"], tok.stoi["w3"]] and data[0].tgt == [tok.stoi["w69999"]]


# --------------------------------------------------------------------------- parallel build


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_any_worker_count_writes_the_same_bytes(tmp_path, corpus, bpe, kind):
    files = write_pair(tmp_path, *(corpus_lines(200, seed=1)))
    tok = word_vocab(corpus[0]) if kind == "word" else bpe
    one = prepare(files, tok, tmp_path / "one", workers=1, chunk_pairs=9)
    two = prepare(files, tok, tmp_path / "two", workers=2, chunk_pairs=9)
    three = prepare(files, tok, tmp_path / "three", workers=3, chunk_pairs=50)
    assert one.path.name == two.path.name == three.path.name
    assert npy_bytes(one.path) == npy_bytes(two.path) == npy_bytes(three.path)


def test_default_workers_are_the_cores_this_process_may_use(tmp_path):
    assert prepared._workers(None) == len(os.sched_getaffinity(0))
    with pytest.raises(ValueError, match="workers"):
        prepared._workers(0)


BAD_INPUTS = {  # the error is past the first chunks, so a worker finds it
    "invalid UTF-8 in the source": {"src": "bad.src", "tgt": "good.tgt"},
    "invalid UTF-8 in the target": {"src": "good.src", "tgt": "bad.tgt"},
    "both invalid: the source's is read first": {"src": "bad.src", "tgt": "bad.tgt"},
    "missing target, invalid source": {"src": "bad.src", "tgt": "nope.tgt"},
    "missing source": {"src": "nope.src", "tgt": "good.tgt"},
    "target shorter": {"src": "good.src", "tgt": "short.tgt"},
    "source shorter": {"src": "short.tgt", "tgt": "good.src"},
    "invalid UTF-8 beats line counts": {"src": "short.tgt", "tgt": "bad.tgt"},
    "empty target": {"src": "good.src", "tgt": "empty.tgt"},
    "a BOM and nothing else is no lines": {"src": "bom.src", "tgt": "good.tgt"},
    "a directory": {"src": ".", "tgt": "good.tgt"},
    "TSV with three columns": {"tsv": "cols.tsv"},
    "TSV: invalid UTF-8 beats an earlier column error": {"tsv": "cols_then_utf8.tsv"},
    "not gzip": {"tsv": "notgz.tsv.gz"},
    "missing TSV": {"tsv": "nope.tsv"},
}


def bad_inputs(tmp: Path, case: str) -> dict[str, Path]:
    """Write the broken corpora; the read_parallel arguments of `case`."""
    good = [f"w{i}" for i in range(30)]
    lines = lambda rows: ("\n".join(rows) + "\n").encode("utf-8")
    tsv = [f"{w}\t{w}" for w in good]
    files = {"good.src": lines(good), "good.tgt": lines(good), "short.tgt": lines(good[:-2]),
             "empty.tgt": b"", "bom.src": "\ufeff".encode(), "notgz.tsv.gz": lines(tsv),
             "bad.src": lines(good[:20]) + b"caf\xc3\n" + lines(good[21:]),
             "bad.tgt": lines(good[:25]) + b"\xff\n" + lines(good[26:]),
             "cols.tsv": lines(tsv[:17] + ["a\tb\tc"] + tsv[18:]),
             "cols_then_utf8.tsv": lines(tsv[:4] + ["no tab"] + tsv[5:]) + b"\xe9\n"}
    for name, content in files.items():
        (tmp / name).write_bytes(content)
    return {role: tmp / name for role, name in BAD_INPUTS[case].items()}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize("workers", [1, 2])
def test_bad_input_raises_read_parallels_error(tmp_path, case, workers):
    kwargs = bad_inputs(tmp_path, case)
    with pytest.raises(DataError) as expected:
        read_parallel(**kwargs)
    tok = WordVocab([f"w{i}" for i in range(30)])
    with pytest.raises(DataError) as got:
        prepare(ParallelFiles(**kwargs), tok, tmp_path / "cache", workers=workers, chunk_pairs=4)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(DataError) as sampled:
        sample_pairs(ParallelFiles(**kwargs), 5, chunk_pairs=4)
    assert str(sampled.value) == str(expected.value)


def test_error_messages_name_file_and_global_line(tmp_path):
    tok = WordVocab(["w1"])
    files = lambda case: ParallelFiles(**bad_inputs(tmp_path, case))
    with pytest.raises(DataError, match=r"bad\.src:21: invalid UTF-8 \(byte 0xc3\)"):
        prepare(files("invalid UTF-8 in the source"), tok, tmp_path / "c", workers=2, chunk_pairs=4)
    with pytest.raises(DataError, match=r"cols\.tsv:18: expected 2 tab-separated columns, found 3"):
        prepare(files("TSV with three columns"), tok, tmp_path / "c", workers=2, chunk_pairs=4)
    with pytest.raises(DataError, match=r"good\.src \(30 lines\) and .*short\.tgt \(28 lines\) have diff"):
        prepare(files("target shorter"), tok, tmp_path / "c", workers=2, chunk_pairs=4)
    with pytest.raises(EmptyFileError):
        prepare(files("empty target"), tok, tmp_path / "c")
    with pytest.raises(MissingFileError):
        prepare(files("missing source"), tok, tmp_path / "c")
    with pytest.raises(DataError, match="give a source and a target file, or one TSV file"):
        ParallelFiles(src=tmp_path / "a")


@pytest.mark.parametrize("text", [
    "a\nb\n", "a\nb", "\ufeffa\r\nb\r\n", "\ufeff", "\ufeff\n", "\n\n", "x\r", "a\rb\n\r\n",
    "one\u2028two\x85three\x0bfour\x0c\x1c\n last", "\ufeff\ufeffdouble bom\n",
])
@pytest.mark.parametrize("size", [1, 2, 100])
def test_streamed_lines_are_read_lines(tmp_path, text, size):
    for path in (tmp_path / "t.txt", tmp_path / "t.txt.gz"):
        raw = text.encode("utf-8")
        path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
        streamed, start = [], 1
        for block in iter_line_blocks(path, size):
            assert len(block) <= size
            streamed += decode_block(b"".join(block), path, start)
            start += len(block)
        assert streamed == read_lines(path)
        assert count_lines(path) == len(read_lines(path))


# --------------------------------------------------------------------------- atomic and keyed


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_build_leaves_nothing(tmp_path, monkeypatch, corpus, error, workers):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0])
    real_append, calls = prepared._SplitWriter.append, []

    def append_then_fail(self, enc):
        calls.append(1)
        if len(calls) == 3:
            raise error("interrupted")
        real_append(self, enc)

    monkeypatch.setattr(prepared._SplitWriter, "append", append_then_fail)
    with pytest.raises(error):
        prepare_or_load(files, tok, tok, tmp_path / "cache", max_len=8, workers=workers, chunk_pairs=5)
    assert list((tmp_path / "cache").iterdir()) == []
    monkeypatch.undo()
    data = prepare_or_load(files, tok, tok, tmp_path / "cache", max_len=8, workers=workers, chunk_pairs=5)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [data.path.name]


@pytest.fixture
def counted_builds(monkeypatch):
    builds: list[str] = []
    real_build = prepared._build

    def build(job, meta, *args):
        builds.append(meta["fingerprint"])
        return real_build(job, meta, *args)

    monkeypatch.setattr(prepared, "_build", build)
    return builds


def test_second_call_reuses_and_any_change_rebuilds(tmp_path, corpus, counted_builds, caplog):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0])
    load = lambda tok=tok, files=files, **kw: prepare_or_load(files, tok, tok, tmp_path / "cache",
                                                              **{"max_len": 8, "workers": 1, **kw})
    first = load()
    stamp = (first.path / "meta.json").stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="rnnsearch"):
        again = load()
    assert len(counted_builds) == 1 and again.path == first.path
    assert (again.path / "meta.json").stat().st_mtime_ns == stamp
    assert f"train: reusing prepared {first.path}" in caplog.text
    assert again.examples_at(range(len(again))) == first.examples_at(range(len(first)))
    # the same bytes elsewhere are the same corpus
    moved = tmp_path / "moved"
    moved.mkdir()
    assert load(files=write_pair(moved, *corpus)).path == first.path
    assert len(counted_builds) == 1
    paths = {first.path, load(max_len=9).path, load(lowercase=True).path, load(reverse_source=True).path,
             load(tok=word_vocab(corpus[0], 10)).path}
    (tmp_path / "c.tgt").write_text("changed\n" + (tmp_path / "c.tgt").read_text())
    (tmp_path / "c.src").write_text("changed\n" + (tmp_path / "c.src").read_text())
    paths.add(load().path)
    assert len(paths) == len(counted_builds) == 6
    assert len(list((tmp_path / "cache").iterdir())) == 6


def test_a_split_prepared_meanwhile_by_another_process_is_kept(tmp_path, corpus):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0])
    first = prepare(files, tok, tmp_path / "cache")
    stamp = (first.path / "meta.json").stat().st_mtime_ns
    # built again, as a second rank would that found nothing when it looked
    job, meta = prepared._plan(files, tok, tok, 8, False, False, "train")
    second = prepared._build(job, meta, tmp_path / "cache", 1, 7)
    assert second.path == first.path and (first.path / "meta.json").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.path.name]


def edit_meta(path: Path, drop: str = "", **changes) -> None:
    meta = {**json.loads((path / "meta.json").read_text()), **changes}
    meta.pop(drop, None)
    (path / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("damage, problem", [
    (lambda p: edit_meta(p, max_len=50), "does not match its fingerprint"),
    (lambda p: edit_meta(p, kept=3), "index.npy has"),
    (lambda p: edit_meta(p, drop="kept"), r"meta.json is malformed \(KeyError\('kept'\)\)"),
    (lambda p: edit_meta(p, drop="fingerprint"), "meta.json lacks 'fingerprint'"),
    (lambda p: edit_meta(p, format=99), "format 99"),
    (lambda p: edit_meta(p, cleaning=0), "cleaning version 0"),
    (lambda p: edit_meta(p, token_dtype="uint32"), "src.tokens.npy holds uint16"),
    (lambda p: (p / "meta.json").write_text("{"), "cannot read meta.json"),
    (lambda p: (p / "meta.json").unlink(), "cannot read meta.json"),
    (lambda p: os.truncate(p / "tgt.tokens.npy", (p / "tgt.tokens.npy").stat().st_size - 3),
     "tgt.tokens.npy: cannot read this prepared array"),
    (lambda p: (p / "index.npy").unlink(), "index.npy: cannot read"),
])
def test_a_damaged_or_edited_split_is_refused(tmp_path, corpus, damage, problem):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0])
    path = prepare(files, tok, tmp_path / "cache").path
    damage(path)
    with pytest.raises(DataError, match=problem) as e:
        open_prepared(path)
    assert str(path) in str(e.value)
    with pytest.raises(DataError, match=problem):  # refused, not silently rebuilt
        prepare_or_load(files, tok, tok, tmp_path / "cache", max_len=8)


def test_a_foreign_split_is_refused(tmp_path, corpus):
    files = write_pair(tmp_path, *corpus)
    tok = word_vocab(corpus[0])
    data = prepare(files, tok, tmp_path / "cache")
    other = prepare(files, tok, tmp_path / "cache", max_len=9)
    with pytest.raises(DataError, match="made from other inputs or settings"):
        open_prepared(data.path, other.meta["fingerprint"])
    renamed = data.path.rename(tmp_path / "cache" / other.path.name.replace("train", "valid"))
    with pytest.raises(DataError, match=f"{renamed}: the directory's name does not match"):
        open_prepared(renamed)
    with pytest.raises(DataError, match="no prepared split here"):
        open_prepared(tmp_path / "nothing")


# --------------------------------------------------------------------------- reading


def test_prepared_data_reads_pairs_on_demand_and_pickles_small(tmp_path, corpus):
    files = write_pair(tmp_path, *corpus_lines(300, seed=2))
    tok = word_vocab(corpus[0])
    data = prepare(files, tok, tmp_path / "cache")
    assert data[-1] == data[len(data) - 1] and data[np.int64(2)] == data[2]
    assert isinstance(data[0].src[0], int) and data[0].tgt_in is None
    with pytest.raises(IndexError):
        data[len(data)]
    assert data.examples_at(np.array([4, 1])) == [data[4], data[1]]
    assert data.src_lengths.dtype == np.int32 and data.src_lengths.shape == (len(data),)
    blob = pickle.dumps(data)
    assert len(blob) < len(data.arrays["src.tokens"]) * 2  # the path, not the ids
    copy = pickle.loads(blob)
    assert copy.examples_at(range(len(copy))) == data.examples_at(range(len(data)))
    assert np.array_equal(copy.tgt_lengths, data.tgt_lengths) and np.array_equal(copy.index, data.index)


# --------------------------------------------------------------------------- batching


def lengths(n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    tgt = rng.integers(1, 50, n)
    return np.maximum(1, tgt + rng.integers(-5, 6, n)), tgt


SCHEMES = [(scheme, by) for scheme in ("paper", "bucket", "random") for by in ("sentences", "tokens")]


@pytest.mark.parametrize("scheme, by", SCHEMES)
def test_every_pair_once_within_the_budget(scheme, by):
    src, tgt = lengths()
    size = 16 if by == "sentences" else 300
    batches = make_batches_from_lengths(src, tgt, size, by, scheme, sort_k=5, seed=1, epoch=2)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.arange(len(tgt)))
    for b in batches:
        if by == "sentences":
            assert 1 <= len(b) <= size
        else:  # padded target tokens, </s> included; only a lone pair may be over
            assert len(b) == 1 or (tgt[b].max() + 1) * len(b) <= size
        if scheme != "random":
            keys = list(zip(tgt[b], src[b]))
            assert keys == sorted(keys)


@pytest.mark.parametrize("scheme, by", SCHEMES)
def test_batches_are_deterministic_in_seed_and_epoch(scheme, by):
    src, tgt = lengths()
    size = 16 if by == "sentences" else 300
    make = lambda seed, epoch: [b.tolist() for b in make_batches_from_lengths(src, tgt, size, by, scheme, 5,
                                                                              seed, epoch)]
    assert make(3, 1) == make(3, 1)
    assert make(3, 1) != make(3, 2) and make(3, 1) != make(4, 1)


def reference_cut(order: list[int], padded: list[int], size: int) -> list[list[int]]:
    """Token batches the plain way, one pair at a time: close a batch when the next pair would
    take its longest padded target times its sentences over the budget."""
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        if cur and max(longest, padded[i]) * (len(cur) + 1) > size:
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, padded[i])
    return batches + [cur] if cur else batches


def test_token_batches_cut_as_one_pair_at_a_time():
    src, tgt = lengths(500)
    order = np.random.default_rng(0).permutation(500)
    for size in (1, 60, 300, 1000):
        expected = reference_cut(order.tolist(), (tgt + 1).tolist(), size)
        assert [b.tolist() for b in data_module._cut(order, tgt + 1, size, True)] == expected


def test_paper_batches_come_in_sorted_groups_of_sort_k():
    src, tgt = lengths(1000)
    batches = make_batches_from_lengths(src, tgt, 10, "sentences", "paper", sort_k=5, seed=0)
    assert len(batches) == 100
    groups = [batches[g:g + 5] for g in range(0, 100, 5)]
    spans = []
    for group in groups:
        assert sum(len(b) for b in group) == 50
        # a group is one sorted chunk cut in five: the batches' length ranges do not interleave
        ranges = sorted((min(zip(tgt[b], src[b])), max(zip(tgt[b], src[b]))) for b in group)
        assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(ranges, ranges[1:]))
        spans.append((tgt[np.concatenate(group)].min(), tgt[np.concatenate(group)].max()))
    assert len(set(spans)) > 1 and min(lo for lo, _ in spans) < 5 and max(hi for _, hi in spans) > 45
    # shuffled within a group: not always shortest first
    assert any(tgt[g[0]].max() > tgt[g[1]].min() for g in groups)


def test_bucket_pads_less_than_random():
    src, tgt = lengths(2000)
    padding = lambda batches: sum(int(tgt[b].max()) * len(b) - int(tgt[b].sum()) for b in batches)
    bucket = make_batches_from_lengths(src, tgt, 20, scheme="bucket")
    assert padding(bucket) < padding(make_batches_from_lengths(src, tgt, 20, scheme="random")) / 5


def test_batching_edge_cases():
    assert make_batches_from_lengths(np.zeros(0, int), np.zeros(0, int), 8) == []
    src, tgt = np.array([3, 60, 2]), np.array([2, 99, 4])
    batches = make_batches_from_lengths(src, tgt, 50, "tokens", "bucket")
    assert sorted(b.tolist() for b in batches) == [[0, 2], [1]]  # the long pair alone
    with pytest.raises(ValueError, match="scheme"):
        make_batches_from_lengths(src, tgt, 8, scheme="sorted")
    with pytest.raises(ValueError, match="batch_size"):
        make_batches_from_lengths(src, tgt, 0)


# --------------------------------------------------------------------------- vocabulary sample


def test_sample_pairs(tmp_path, corpus):
    files = write_pair(tmp_path, *corpus_lines(100, seed=3))
    srcs, tgts = read_parallel(files.src, files.tgt)
    everything = ([normalize(s, True) for s in srcs], [normalize(t, True) for t in tgts])
    assert sample_pairs(files, 100, lowercase=True) == everything
    assert sample_pairs(files, 1000, seed=5, lowercase=True, chunk_pairs=7) == everything
    sample = sample_pairs(files, 30, seed=1, chunk_pairs=7)
    assert sample == sample_pairs(files, 30, seed=1, chunk_pairs=7)
    assert sample != sample_pairs(files, 30, seed=2, chunk_pairs=7)
    assert len(sample[0]) == len(sample[1]) == 30
    pairs = list(zip(*sample))
    order = [list(zip(srcs, tgts)).index(pair) for pair in pairs if srcs.count(pair[0]) == 1]
    assert order == sorted(order)  # corpus order
    assert set(pairs) <= {(normalize(s), normalize(t)) for s, t in zip(srcs, tgts)}
    assert sample_pairs(files, 0) == ([], [])


def test_sample_pairs_is_uniform(tmp_path):
    lines = [f"w{i}" for i in range(40)]
    files = write_pair(tmp_path, lines, lines)
    counts = np.zeros(40)
    for seed in range(300):
        for s in sample_pairs(files, 10, seed=seed, chunk_pairs=6)[0]:
            counts[int(s[1:])] += 1
    assert counts.sum() == 3000 and counts.min() > 40 and counts.max() < 115  # each ~75
