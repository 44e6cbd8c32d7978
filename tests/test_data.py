"""Reading parallel corpora, filtering, collation and length-aware batching."""

import collections
import gzip
import random

import pytest
import torch

from rnnsearch.engine.data.parallel import (
    ParallelData,
    collate,
    make_batches,
    normalize,
    read_parallel,
    target_tokens,
)
from rnnsearch.engine.data.vocab import BOS, EOS, PAD, UNK, WordVocab
from rnnsearch.io import DataError

SCHEMES = ["paper", "bucket", "random"]
BY = ["sentences", "tokens"]


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def write_gz(path, text):
    with gzip.open(path, "wb") as f:
        f.write(text.encode("utf-8"))
    return path


# --------------------------------------------------------------------------- reading


def test_read_parallel_plain_files(tmp_path):
    src = write(tmp_path / "train.de", "ein Haus\nzwei Katzen\n")
    tgt = write(tmp_path / "train.en", "a house\ntwo cats\n")
    assert read_parallel(src, tgt) == (["ein Haus", "zwei Katzen"], ["a house", "two cats"])


def test_read_parallel_gzip_and_mixed(tmp_path):
    src = write_gz(tmp_path / "train.de.gz", "ein Haus\nzwei Katzen\n")
    tgt_gz = write_gz(tmp_path / "train.en.gz", "a house\ntwo cats\n")
    tgt_plain = write(tmp_path / "train.en", "a house\ntwo cats\n")
    expected = (["ein Haus", "zwei Katzen"], ["a house", "two cats"])
    assert read_parallel(src, tgt_gz) == expected
    assert read_parallel(src, tgt_plain) == expected


def test_read_parallel_handles_crlf_bom_and_missing_final_newline(tmp_path):
    src = write(tmp_path / "a.src", "\ufeffone\r\ntwo\r\n")
    tgt = write(tmp_path / "a.tgt", "eins\nzwei")
    assert read_parallel(src, tgt) == (["one", "two"], ["eins", "zwei"])


def test_read_parallel_tsv(tmp_path):
    tsv = write(tmp_path / "train.tsv", "ein Haus\ta house\nzwei Katzen\ttwo cats\n")
    assert read_parallel(tsv=tsv) == (["ein Haus", "zwei Katzen"], ["a house", "two cats"])
    tsv_gz = write_gz(tmp_path / "train.tsv.gz", "ein Haus\ta house\n")
    assert read_parallel(tsv=tsv_gz) == (["ein Haus"], ["a house"])


def test_read_parallel_tsv_blank_line_is_a_blank_pair(tmp_path):
    tsv = write(tmp_path / "train.tsv", "a\tb\n\nc\td\n")
    assert read_parallel(tsv=tsv) == (["a", "", "c"], ["b", "", "d"])


@pytest.mark.parametrize("bad", ["no tab here", "one\ttwo\tthree"])
def test_read_parallel_tsv_wrong_column_count_names_file_and_line(tmp_path, bad):
    tsv = write(tmp_path / "train.tsv", f"a\tb\nc\td\n{bad}\ne\tf\n")
    with pytest.raises(DataError) as e:
        read_parallel(tsv=tsv)
    msg = str(e.value)
    assert f"{tsv}:3:" in msg
    assert "column" in msg


def test_read_parallel_different_line_counts(tmp_path):
    src = write(tmp_path / "train.de", "a\nb\nc\n")
    tgt = write(tmp_path / "train.en", "x\ny\n")
    with pytest.raises(DataError) as e:
        read_parallel(src, tgt)
    msg = str(e.value)
    assert str(src) in msg and str(tgt) in msg
    assert "3" in msg and "2" in msg
    assert "\n" not in msg  # one-line error


def test_read_parallel_invalid_utf8_names_file_and_line(tmp_path):
    src = tmp_path / "train.de"
    src.write_bytes(b"good\nalso good\nbad \xff\xfe here\nfine\n")
    tgt = write(tmp_path / "train.en", "a\nb\nc\nd\n")
    with pytest.raises(DataError) as e:
        read_parallel(src, tgt)
    msg = str(e.value)
    assert f"{src}:3:" in msg
    assert "UTF-8" in msg


def test_read_parallel_invalid_utf8_in_gzip_first_line(tmp_path):
    src = tmp_path / "train.de.gz"
    with gzip.open(src, "wb") as f:
        f.write(b"\xc3(\nok\n")
    tgt = write(tmp_path / "train.en", "a\nb\n")
    with pytest.raises(DataError, match=r":1: invalid UTF-8") as e:
        read_parallel(src, tgt)
    assert str(src) in str(e.value)


def test_read_parallel_missing_file(tmp_path):
    tgt = write(tmp_path / "train.en", "a\n")
    missing = tmp_path / "nope.de"
    with pytest.raises(DataError) as e:
        read_parallel(missing, tgt)
    assert str(missing) in str(e.value) and "no such file" in str(e.value)
    with pytest.raises(DataError, match="no such file"):
        read_parallel(tsv=tmp_path / "nope.tsv")


def test_read_parallel_empty_file(tmp_path):
    src = write(tmp_path / "train.de", "")
    tgt = write(tmp_path / "train.en", "a\n")
    with pytest.raises(DataError) as e:
        read_parallel(src, tgt)
    assert str(src) in str(e.value) and "empty" in str(e.value)


def test_read_parallel_needs_both_sides(tmp_path):
    src = write(tmp_path / "train.de", "a\n")
    with pytest.raises(DataError):
        read_parallel(src, None)


# --------------------------------------------------------------------------- normalize


def test_normalize_collapses_whitespace_and_drops_control_characters():
    out = normalize("  ein\t\tHaus \x00 ist\x07  gross\r\n ")
    assert out == "ein Haus ist gross"
    assert all(ch.isprintable() for ch in normalize("a\x1bb\x7fc\u2028d\x0ce"))
    assert normalize("Ein HAUS", lowercase=True) == "ein haus"
    assert normalize("Ein HAUS") == "Ein HAUS"
    assert normalize(" \t\x00 ") == ""
    assert normalize("café Größe") == "café Größe"  # ordinary non-ASCII text is untouched


# --------------------------------------------------------------------------- encoding


def vocab_for(texts):
    return WordVocab.build(texts, 1000)


def test_encode_drops_and_counts_blank_and_long_pairs():
    srcs = ["a b", "", "c d", "a b c d e f", "e", "   ", "f"]
    tgts = ["x y", "x", "", "x", "x y z w v u", "y", " \x00 "]
    tok = vocab_for(srcs + tgts)
    data = ParallelData.encode(srcs, tgts, tok, tok, max_len=5)
    # blank: line 2 (src), 3 (tgt), 6 (src whitespace only), 7 (tgt only control/space)
    assert data.dropped_blank == 4
    # long: line 4 (6 source tokens), line 5 (6 target tokens)
    assert data.dropped_long == 2
    assert len(data) == 1
    ex = data.examples[0]
    assert ex.index == 0
    assert ex.src == tok.encode("a b") and ex.tgt == tok.encode("x y")


def test_encode_keeps_pairs_exactly_at_max_len():
    tok = vocab_for(["a b c", "x y z"])
    data = ParallelData.encode(["a b c"], ["x y z"], tok, tok, max_len=3)
    assert len(data) == 1 and data.dropped_long == 0


def test_encode_with_nothing_left_is_a_data_error():
    tok = vocab_for(["a"])
    with pytest.raises(DataError, match="no pairs left"):
        ParallelData.encode(["", "a a a"], ["x", "b"], tok, tok, max_len=2, name="train")


def test_encode_index_is_original_line():
    srcs = ["", "a", "b"]
    tgts = ["x", "y", "z"]
    tok = vocab_for(srcs + tgts)
    data = ParallelData.encode(srcs, tgts, tok, tok, max_len=10)
    assert [e.index for e in data.examples] == [1, 2]


def test_reverse_source_reverses_only_the_source():
    srcs, tgts = ["a b c d"], ["w x y z"]
    tok = vocab_for(srcs + tgts)
    fwd = ParallelData.encode(srcs, tgts, tok, tok, max_len=10)
    rev = ParallelData.encode(srcs, tgts, tok, tok, max_len=10, reverse_source=True)
    assert rev.examples[0].src == fwd.examples[0].src[::-1]
    assert rev.examples[0].src != fwd.examples[0].src
    assert rev.examples[0].tgt == fwd.examples[0].tgt == tok.encode("w x y z")


def test_encode_lowercase_and_normalisation():
    tok = vocab_for(["ein haus", "a house"])
    data = ParallelData.encode(["Ein\tHAUS"], ["A  House\x00"], tok, tok, max_len=10, lowercase=True)
    assert data.examples[0].src == tok.encode("ein haus")
    assert data.examples[0].tgt == tok.encode("a house")
    assert UNK not in data.examples[0].src + data.examples[0].tgt


# --------------------------------------------------------------------------- collate


def test_collate_tensors():
    from rnnsearch.engine.data.parallel import Example

    exs = [Example([5, 6, 7], [8, 9], 0), Example([10], [11, 12, 13], 4)]
    b = collate(exs)
    assert b.src.tolist() == [[5, 6, 7], [10, PAD, PAD]]
    assert b.src_mask.dtype == torch.bool
    assert b.src_mask.tolist() == [[True, True, True], [True, False, False]]
    assert b.tgt_in.tolist() == [[BOS, 8, 9, PAD], [BOS, 11, 12, 13]]
    assert b.tgt_out.tolist() == [[8, 9, EOS, PAD], [11, 12, 13, EOS]]
    assert b.tgt_in.shape == b.tgt_out.shape
    assert (b.tgt_in[:, 0] == BOS).all()
    assert b.indices == [0, 4]
    assert int((b.tgt_out != PAD).sum()) == 3 + 4 == target_tokens(exs)  # on the tensors and on the CPU alike
    for t in (b.src, b.tgt_in, b.tgt_out):
        assert t.dtype == torch.long


def test_source_word_dropout_only_touches_real_source_tokens():
    from rnnsearch.engine.data.parallel import Example, drop_words

    exs = [Example(list(range(4, 40)), [5], 0), Example([4, 5], [6], 1)]
    b = collate(drop_words(exs, 0.5, random.Random(0)))
    assert (b.src[b.src_mask] == UNK).any()
    assert (b.src[~b.src_mask] == PAD).all()
    assert b.src_mask.tolist() == collate(exs).src_mask.tolist()
    assert b.tgt_out.tolist() == collate(exs).tgt_out.tolist()
    assert b.tgt_in.tolist() == collate(exs).tgt_in.tolist()  # the target side only with p_target


def test_target_word_dropout_hides_decoder_inputs_not_what_is_predicted():
    from rnnsearch.engine.data.parallel import Example, drop_words

    exs = [Example([4, 5, 6], list(range(10, 210)), 0)]
    dropped = drop_words(exs, 0.0, random.Random(1), p_target=0.3)
    b, plain = collate(dropped), collate(exs)
    assert b.tgt_out.tolist() == plain.tgt_out.tolist()  # the words to predict are untouched
    assert b.src.tolist() == plain.src.tolist()
    assert b.tgt_in[0, 0].item() == BOS
    hidden = (b.tgt_in[0, 1:] == UNK).float().mean().item()
    assert 0.2 < hidden < 0.4
    kept = b.tgt_in[0, 1:] != UNK
    assert b.tgt_in[0, 1:][kept].tolist() == plain.tgt_in[0, 1:][kept].tolist()
    # source-only dropout draws the same random numbers as before the option existed
    assert drop_words(exs, 0.5, random.Random(2))[0].src == drop_words(exs, 0.5, random.Random(2), 0.0)[0].src


# --------------------------------------------------------------------------- batching


def varied_corpus(n=1200, seed=0, max_len=50):
    """Encoded pairs whose lengths vary from 1 to max_len tokens."""
    rng = random.Random(seed)
    srcs, tgts = [], []
    for _ in range(n):
        srcs.append(" ".join(f"s{rng.randrange(30)}" for _ in range(rng.randint(1, max_len))))
        tgts.append(" ".join(f"t{rng.randrange(30)}" for _ in range(rng.randint(1, max_len))))
    tok = vocab_for(srcs + tgts)
    return ParallelData.encode(srcs, tgts, tok, tok, max_len=max_len)


@pytest.fixture(scope="module")
def corpus():
    return varied_corpus()


def padded_tokens(data, batch):
    return max(len(data.examples[i].tgt) + 1 for i in batch) * len(batch)


def padding_fraction(data, batches):
    real = sum(len(data.examples[i].tgt) + 1 for b in batches for i in b)
    padded = sum(padded_tokens(data, b) for b in batches)
    return 1 - real / padded


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("by", BY)
def test_every_example_once_per_epoch(corpus, scheme, by):
    size = 16 if by == "sentences" else 400
    for epoch in range(3):
        batches = make_batches(corpus, size, by=by, scheme=scheme, sort_k=5, seed=7, epoch=epoch)
        flat = [int(i) for b in batches for i in b]
        assert sorted(flat) == list(range(len(corpus)))
        assert all(len(b) for b in batches)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("by", BY)
def test_batches_deterministic_in_seed_and_epoch(corpus, scheme, by):
    size = 16 if by == "sentences" else 400
    def batches(seed, epoch):
        return [b.tolist() for b in make_batches(corpus, size, by=by, scheme=scheme, sort_k=5, seed=seed,
                                                 epoch=epoch)]

    a = batches(3, 2)
    assert batches(3, 2) == a
    assert batches(3, 3) != a
    assert batches(4, 2) != a


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sentence_batches_have_batch_size_sentences(corpus, scheme):
    batches = make_batches(corpus, 16, scheme=scheme, sort_k=5, seed=0, epoch=0)
    sizes = collections.Counter(len(b) for b in batches)
    assert max(sizes) == 16
    # only the tail of a cut (one per sorted chunk for `paper`) may be smaller
    assert sum(c for s, c in sizes.items() if s != 16) <= -(-len(corpus) // (16 * 5))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("budget", [60, 300, 1000])
def test_token_batches_respect_budget(corpus, scheme, budget):
    batches = make_batches(corpus, budget, by="tokens", scheme=scheme, sort_k=5, seed=1, epoch=0)
    for b in batches:
        # the padded target (with </s>) fits, unless a single pair alone exceeds it
        assert padded_tokens(corpus, b) <= budget or len(b) == 1
    # the budget is actually used, not just one sentence per batch
    if budget >= 300:
        assert sum(len(b) for b in batches) / len(batches) > 3


def test_token_batch_with_oversized_single_example(tmp_path):
    srcs = ["a"] * 5 + ["a"]
    tgts = ["x"] * 5 + [" ".join(["x"] * 30)]
    tok = vocab_for(srcs + tgts)
    data = ParallelData.encode(srcs, tgts, tok, tok, max_len=50)
    for scheme in SCHEMES:
        batches = make_batches(data, 10, by="tokens", scheme=scheme, seed=0)
        assert sorted(i for b in batches for i in b) == list(range(6))
        long_batch = next(b for b in batches if 5 in b)
        assert long_batch == [5]


def test_sorted_schemes_have_far_less_padding_than_random(corpus):
    kw = dict(sort_k=10, seed=0, epoch=0)
    rnd = padding_fraction(corpus, make_batches(corpus, 20, scheme="random", **kw))
    paper = padding_fraction(corpus, make_batches(corpus, 20, scheme="paper", **kw))
    bucket = padding_fraction(corpus, make_batches(corpus, 20, scheme="bucket", **kw))
    assert rnd > 0.3
    assert paper < rnd / 3
    assert bucket < rnd / 3
    assert bucket <= paper + 1e-9


def test_sorted_token_schemes_have_less_padding_than_random(corpus):
    kw = dict(by="tokens", sort_k=10, seed=0, epoch=0)
    rnd = padding_fraction(corpus, make_batches(corpus, 500, scheme="random", **kw))
    paper = padding_fraction(corpus, make_batches(corpus, 500, scheme="paper", **kw))
    bucket = padding_fraction(corpus, make_batches(corpus, 500, scheme="bucket", **kw))
    assert paper < rnd / 3 and bucket < rnd / 3


def test_batch_order_is_shuffled_for_sorted_schemes(corpus):
    # sorted schemes must not feed short-to-long batches in order
    for scheme in ("paper", "bucket"):
        batches = make_batches(corpus, 16, scheme=scheme, sort_k=5, seed=0, epoch=0)
        longest = [max(len(corpus.examples[i].tgt) for i in b) for b in batches]
        assert longest != sorted(longest)
