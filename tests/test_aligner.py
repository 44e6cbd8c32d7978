"""`rnnsearch data align`: eflomal's word links on the training corpus, symmetrised, mapped onto the
tokens the model trains on, cached beside the prepared split, and a lexical table from them."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from rnnsearch.cli import main
from rnnsearch.config import config_from_dict
from rnnsearch.engine.align.eflomal import Lexicon, open_alignment, piece_counts, piece_links
from rnnsearch.engine.align.links import word_spans
from rnnsearch.engine.data.vocab import SentencePiece
from rnnsearch.io import DataError
from rnnsearch.tools.toy import write_toy_corpus


def needs_eflomal():
    pytest.importorskip("eflomal", reason="the aligner needs eflomal: pip install -e '.[align]'")


def reverse_config(tmp: Path, name: str = "run", kind: str = "word", **data):
    """The toy reversal task: source word i is target word n-1-i, an alignment easy to find."""
    files = write_toy_corpus(tmp / "data", task="reverse", n_train=800, n_valid=20, vocab=100, min_len=3,
                             max_len=9)
    size = 120 if kind == "bpe" else 1000  # bpe: fewer pieces than words, so words split
    return config_from_dict({"preset": "tiny", "model_dir": str(tmp / name), "data": {**files, **data},
                             "vocab": {"kind": kind, "size": size}})


def pharaoh(line: str) -> set:
    return {tuple(int(x) for x in item.split("-")) for item in line.split()}


def anti_diagonal(n: int) -> set:
    return {(i, n - 1 - i) for i in range(n)}


# --------------------------------------------------------------------------- without eflomal


def test_word_encodings_give_each_words_pieces():
    own = {"ab": [5, 6], "c": [7], "d": [8, 9, 10]}
    assert piece_counts(["ab", "c", "d"], [5, 6, 7, 8, 9, 10], own.__getitem__) == [2, 1, 3]
    # a word list (vocab.kind word): one id a word, unknown words included
    assert piece_counts(["x", "y"], [1, 4], {"x": [1], "y": [4]}.__getitem__) == [1, 1]


def test_marks_separate_the_words_where_their_own_encodings_differ():
    other = lambda word: [99]  # a word encoded alone differs from its pieces in the sentence
    pieces = ["▁a", "b", "▁c", "▁d", "e", "f"]
    assert piece_counts(["ab", "c", "def"], [5, 6, 7, 8, 9, 10], other, pieces) == [2, 1, 3]
    assert piece_counts(["ab", "cdef"], [5, 6, 7, 8, 9, 10], other, pieces) is None  # 3 marks, 2 words
    assert piece_counts(["ab", "c"], [5, 6, 7], other) is None  # words without marks: no way to tell


def test_a_word_link_links_every_piece_of_one_word_with_every_piece_of_the_other():
    # source words of 2, 1 pieces; target words of 1, 2 pieces
    links = piece_links({(0, 1), (1, 0)}, [2, 1], [1, 2])
    assert links.tolist() == [[0, 1], [0, 2], [1, 1], [1, 2], [2, 0]]
    # the model reads the source reversed: piece p of 3 is at position 2 - p
    reversed_ = piece_links({(0, 1), (1, 0)}, [2, 1], [1, 2], reverse_source=True)
    assert reversed_.tolist() == [[0, 0], [1, 1], [1, 2], [2, 1], [2, 2]]
    assert piece_links(set(), [1], [1]).shape == (0, 2)


def test_the_lexicon_is_normalised_per_source_word_sorted_and_cut_to_top_k(tmp_path):
    lexicon = Lexicon()
    lexicon.add(["Haus", "das"], ["the", "house"], {(0, 1), (1, 0)})
    lexicon.add(["Haus"], ["home"], {(0, 0)})
    lexicon.add(["Haus", "Haus"], ["house", "building"], {(0, 0), (1, 0), (1, 1)})
    rows = list(lexicon.rows(top_k=10))
    assert rows == [("Haus", "house", 0.6), ("Haus", "building", 0.2), ("Haus", "home", 0.2),
                    ("das", "the", 1.0)]
    assert list(lexicon.rows(top_k=1)) == [("Haus", "house", 0.6), ("das", "the", 1.0)]
    lexicon.write(tmp_path / "lexicon.tsv", top_k=2)
    lines = (tmp_path / "lexicon.tsv").read_text(encoding="utf-8").splitlines()
    assert lines == ["Haus\thouse\t0.6", "Haus\tbuilding\t0.2", "das\tthe\t1"]


def test_without_eflomal_the_command_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import eflomal raises ImportError
    cfg = reverse_config(tmp_path)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert main(["data", "align", str(path)]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[align]"' in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()  # refused before anything was prepared
    assert main(["data", "align"]) == 2


# --------------------------------------------------------------------------- with eflomal


def test_the_reversal_is_found_and_links_index_the_training_tokens(tmp_path, capsys):
    needs_eflomal()
    cfg = reverse_config(tmp_path)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert main(["data", "align", str(path)]) == 0
    (folder,) = (tmp_path / "run" / "prepared").glob("align-*")
    assert str(folder) in capsys.readouterr().out
    alignment = open_alignment(folder)
    src = Path(cfg.data.train_src).read_text(encoding="utf-8").splitlines()
    lines = (folder / "links.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(src) == len(alignment)
    exact = sum(pharaoh(line) == anti_diagonal(len(s.split())) for line, s in zip(lines, src))
    assert exact >= 0.9 * len(src)
    # a word vocabulary: a token is a word, so the token links are the word links
    for k in range(0, len(src), 50):
        assert sorted(map(tuple, alignment[k].tolist())) == sorted(pharaoh(lines[k]))
    assert alignment.meta["unmapped"] == 0


def test_pieces_and_a_reversed_source_follow_the_prepared_ids(tmp_path):
    needs_eflomal()
    from rnnsearch.engine.align.eflomal import align_config
    from rnnsearch.engine.data.pairs import prepare

    cfg = reverse_config(tmp_path, kind="bpe", reverse_source=True)
    alignment, data = align_config(cfg), prepare(cfg)
    src_tok = SentencePiece.load(tmp_path / "run" / "src.spm.model")
    tgt_tok = SentencePiece.load(tmp_path / "run" / "tgt.spm.model")
    lines = (alignment.path / "links.txt").read_text(encoding="utf-8").splitlines()
    assert alignment.meta["unmapped"] == 0 and alignment.meta["links"] > alignment.meta["word_links"]
    checked = 0
    for k in range(len(data)):
        example = data[k]
        src_ids = example.src[::-1]  # the split holds the source reversed
        src_words, tgt_words = word_spans(src_tok.pieces(src_ids)), word_spans(tgt_tok.pieces(example.tgt))
        n = len(src_words)
        if pharaoh(lines[example.index]) != anti_diagonal(n):
            continue
        expected = {(len(src_ids) - 1 - p, q) for i in range(n) for p in src_words[i]
                    for q in tgt_words[n - 1 - i]}
        assert set(map(tuple, alignment[k].tolist())) == expected
        checked += 1
    assert checked >= 0.9 * len(data)


def test_dropped_pairs_have_empty_lines_and_no_token_links(tmp_path):
    needs_eflomal()
    from rnnsearch.engine.align.eflomal import align_config
    from rnnsearch.engine.data.pairs import prepare

    cfg = reverse_config(tmp_path, max_len=8)
    src = Path(cfg.data.train_src).read_text(encoding="utf-8").splitlines()
    tgt = Path(cfg.data.train_tgt).read_text(encoding="utf-8").splitlines()
    src[3] = tgt[3] = "  "  # blank
    Path(cfg.data.train_src).write_text("\n".join(src) + "\n", encoding="utf-8")
    Path(cfg.data.train_tgt).write_text("\n".join(tgt) + "\n", encoding="utf-8")
    alignment, data = align_config(cfg), prepare(cfg)
    long = [i for i, s in enumerate(src) if len(s.split()) > 8]
    assert long and data.dropped_long == len(long) and data.dropped_blank == 1
    lines = (alignment.path / "links.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(src) and all(lines[i] == "" for i in [3, *long])
    assert len(alignment) == len(data) and np.array_equal(alignment.index, data.index)
    assert alignment.for_line(3) is None and alignment.for_line(long[0]) is None
    kept = int(data.index[10])
    assert sorted(map(tuple, alignment.for_line(kept).tolist())) == sorted(pharaoh(lines[kept]))
    for k in range(len(data)):  # every link inside its pair's tokens
        links = alignment[k]
        if len(links):
            assert links[:, 0].max() < len(data[k].src) and links[:, 1].max() < len(data[k].tgt)


def test_the_alignment_is_reused_and_made_again_when_the_split_changes(tmp_path):
    needs_eflomal()
    from rnnsearch.engine.align.eflomal import align_config

    cfg = reverse_config(tmp_path)
    first = align_config(cfg)
    stamp = (first.path / "links.npy").stat().st_mtime_ns
    again = align_config(cfg)
    assert again.path == first.path and (again.path / "links.npy").stat().st_mtime_ns == stamp
    cfg.data.max_len = 6
    shorter = align_config(cfg)
    assert shorter.path != first.path and shorter.meta["prepared"] != first.meta["prepared"]
    with open(cfg.data.train_src, "a", encoding="utf-8") as f:
        f.write("w1 w2 w3\n")
    with open(cfg.data.train_tgt, "a", encoding="utf-8") as f:
        f.write("w3 w2 w1\n")
    grown = align_config(cfg)
    assert grown.path not in (first.path, shorter.path) and len(grown) == len(shorter) + 1
    assert len(list((tmp_path / "run" / "prepared").glob(".*"))) == 0  # no temporary left behind


def test_the_lexicon_reads_back_as_distributions(tmp_path):
    needs_eflomal()
    from rnnsearch.engine.align.eflomal import align_config

    lexicon = align_config(reverse_config(tmp_path)).lexicon
    rows = [line.split("\t") for line in lexicon.read_text(encoding="utf-8").splitlines()]
    assert rows and all(len(row) == 3 for row in rows)
    totals: dict = {}
    for src, _, p in rows:
        totals.setdefault(src, []).append(float(p))
    assert [src for src, _, _ in rows] == sorted(src for src, _, _ in rows)
    for probs in totals.values():
        assert sum(probs) <= 1 + 1e-6 and probs == sorted(probs, reverse=True) and len(probs) <= 10
    best = {src: tgt for src, tgt, _ in reversed(rows)}  # the first row of each word wins
    assert sum(best[w] == w for w in best) >= 0.9 * len(best)  # the toy task copies words


def test_a_damaged_alignment_is_refused(tmp_path):
    needs_eflomal()
    from rnnsearch.engine.align.eflomal import align_config

    alignment = align_config(reverse_config(tmp_path))
    folder, offsets = alignment.path, np.array(alignment.offsets[:-1])
    del alignment  # its memory maps: truncating a mapped file under them would crash the reader
    np.save(folder / "offsets.npy", offsets)
    with pytest.raises(DataError, match="offsets.npy.*delete it to align again"):
        open_alignment(folder)
    (folder / "meta.json").write_text("{", encoding="utf-8")
    with pytest.raises(DataError, match="meta.json.*delete it to align again"):
        open_alignment(folder)
