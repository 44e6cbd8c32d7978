"""Tokenisers: the paper's word vocabulary and sentencepiece, with shared reserved ids."""

import random
from types import SimpleNamespace

import pytest

from rnnsearch.config import VocabConfig
from rnnsearch.engine.data.parallel import normalize
from rnnsearch.engine.data.vocab import (
    BOS,
    EOS,
    PAD,
    SPECIALS,
    UNK,
    SentencePiece,
    WordCache,
    WordVocab,
    build_tokenizers,
    load_tokenizers,
    save_tokenizers,
    tokenizer_files,
)
from rnnsearch.io import DataError


def test_reserved_ids():
    assert (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert SPECIALS == ["<pad>", "<unk>", "<s>", "</s>"]


# --------------------------------------------------------------------------- word vocabulary


SENTS = [
    "the cat sat on the mat",
    "the dog sat",
    "a cat and a dog",
    "zebra apple",
]
# counts: the 3, a 2, cat 2, dog 2, sat 2, and/apple/mat/on/zebra 1


def test_word_vocab_keeps_most_frequent_with_alphabetical_ties():
    v = WordVocab.build(SENTS, size=len(SPECIALS) + 4)
    assert v.itos[:4] == SPECIALS
    # "the" (3) first, then the words seen twice in alphabetical order; "sat" (also 2) does not fit
    assert v.itos[4:] == ["the", "a", "cat", "dog"]
    assert len(v) == 8
    v = WordVocab.build(SENTS, size=len(SPECIALS) + 7)
    assert v.itos[4:] == ["the", "a", "cat", "dog", "sat", "and", "apple"]


def test_word_vocab_size_larger_than_corpus_keeps_everything():
    v = WordVocab.build(SENTS, size=1000)
    assert len(v) == 4 + 10
    assert set(v.itos[4:]) == {w for s in SENTS for w in s.split()}


def test_word_vocab_build_is_deterministic_regardless_of_order():
    a = WordVocab.build(SENTS, 9)
    b = WordVocab.build(list(reversed(SENTS)), 9)
    assert a.itos == b.itos


def test_word_vocab_encode_decode_and_unk():
    v = WordVocab.build(SENTS, size=8)
    ids = v.encode("the  cat\tate a hamburger")
    assert ids == [v.stoi["the"], v.stoi["cat"], UNK, v.stoi["a"], UNK]
    assert all(i >= 4 for i in v.encode("the cat a dog"))
    assert v.decode([BOS] + v.encode("the cat a dog") + [EOS, PAD, PAD]) == "the cat a dog"
    assert v.decode(ids) == "the cat <unk> a <unk>"
    assert v.pieces([BOS, v.stoi["dog"], EOS]) == ["dog"]
    assert v.encode("") == []


def test_word_vocab_specials_in_text_are_not_duplicated():
    v = WordVocab.build(["<unk> <unk> <unk> x"], size=100)
    assert v.itos.count("<unk>") == 1
    assert v.itos[:4] == SPECIALS


def test_word_vocab_save_load_round_trip(tmp_path):
    v = WordVocab.build(SENTS + ["Größe café 東京"], size=100)
    path = tmp_path / "sub" / "src.vocab.txt"
    v.save(path)
    w = WordVocab.load(path)
    assert w.itos == v.itos and len(w) == len(v)
    for s in SENTS + ["Größe café 東京 unseen"]:
        assert w.encode(s) == v.encode(s)
    assert path.read_text(encoding="utf-8").splitlines()[:4] == SPECIALS
    assert sorted(p.name for p in path.parent.iterdir()) == ["src.vocab.txt"]


@pytest.mark.parametrize("text", ["the\ncat\n", "<unk>\n<pad>\n<s>\n</s>\nthe\n", "<pad>\n<unk>\n"])
def test_word_vocab_load_rejects_files_without_specials(tmp_path, text):
    path = tmp_path / "vocab.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as e:
        WordVocab.load(path)
    assert str(path) in str(e.value)


def test_word_vocab_load_missing_file(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        WordVocab.load(tmp_path / "nope.txt")


# --------------------------------------------------------------------------- sentencepiece


def synthetic_corpus(n=200, seed=0, syllables=("ka", "to", "mi", "re", "su", "no", "ha", "ri", "ge", "lo")):
    rng = random.Random(seed)
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(40)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus():
    return synthetic_corpus()


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def spm_model(request, corpus):
    return SentencePiece.build(corpus, 60, kind=request.param)


def test_sentencepiece_reserved_ids(spm_model):
    sp = spm_model.sp
    assert [sp.id_to_piece(i) for i in range(4)] == SPECIALS
    assert (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id()) == (PAD, UNK, BOS, EOS)
    assert 8 < len(spm_model) <= 60


def test_sentencepiece_round_trip_text(spm_model, corpus):
    for s in corpus[:50] + ["kato mire", "harisu"]:
        ids = spm_model.encode(s)
        assert ids and all(i >= 4 for i in ids)  # no specials, no unknowns for seen characters
        assert spm_model.decode(ids) == s
        assert spm_model.decode([BOS] + ids + [EOS, PAD]) == s
    pieces = spm_model.pieces([BOS] + spm_model.encode("kato") + [EOS])
    assert "".join(pieces).replace("\u2581", " ").strip() == "kato"


def test_sentencepiece_unknown_characters_map_to_unk(spm_model):
    assert UNK in spm_model.encode("kato ж")


def test_sentencepiece_save_load_round_trip(spm_model, corpus, tmp_path):
    path = tmp_path / "src.spm.model"
    spm_model.save(path)
    loaded = SentencePiece.load(path)
    assert len(loaded) == len(spm_model)
    for s in corpus[:50]:
        assert loaded.encode(s) == spm_model.encode(s)
    assert [p.name for p in tmp_path.iterdir()] == ["src.spm.model"]


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_sentencepiece_build_is_deterministic(corpus, kind):
    a = SentencePiece.build(corpus, 60, kind=kind, seed=3)
    b = SentencePiece.build(corpus, 60, kind=kind, seed=3)
    # (the serialised protos differ only in the temporary training-file path they record)
    assert [(a.sp.id_to_piece(i), a.sp.get_score(i)) for i in range(len(a))] == \
        [(b.sp.id_to_piece(i), b.sp.get_score(i)) for i in range(len(b))]


def test_sentencepiece_load_errors(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        SentencePiece.load(tmp_path / "nope.model")
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"this is not a protobuf")
    with pytest.raises(DataError) as e:
        SentencePiece.load(bad)
    assert str(bad) in str(e.value)


def test_sentencepiece_build_from_no_text():
    with pytest.raises(DataError):
        SentencePiece.build(["", "   "], 60)


# --------------------------------------------------------------------------- build / save / load


def test_tokenizer_files():
    assert tokenizer_files("word", joint=True) == ("joint.vocab.txt", "joint.vocab.txt")
    assert tokenizer_files("word", joint=False) == ("src.vocab.txt", "tgt.vocab.txt")
    for kind in ("bpe", "unigram"):
        assert tokenizer_files(kind, joint=True) == ("joint.spm.model", "joint.spm.model")
        assert tokenizer_files(kind, joint=False) == ("src.spm.model", "tgt.spm.model")


SRC = ["das haus ist klein", "der hund bellt", "das ist gut"] * 3
TGT = ["the house is small", "the dog barks", "that is good"] * 3


def test_build_tokenizers_word_joint_vs_separate(tmp_path):
    sep_src, sep_tgt = build_tokenizers(VocabConfig(kind="word", size=100, joint=False), SRC, TGT)
    assert sep_src is not sep_tgt
    assert "haus" in sep_src.stoi and "haus" not in sep_tgt.stoi
    assert "house" in sep_tgt.stoi and "house" not in sep_src.stoi
    j_src, j_tgt = build_tokenizers(VocabConfig(kind="word", size=100, joint=True), SRC, TGT)
    assert j_src is j_tgt
    assert "haus" in j_src.stoi and "house" in j_src.stoi


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_build_tokenizers_sentencepiece_joint_vs_separate(kind):
    src_texts = synthetic_corpus(seed=1)
    tgt_texts = synthetic_corpus(seed=2, syllables=("ba", "de", "fu", "gi", "jo"))
    s, t = build_tokenizers(VocabConfig(kind=kind, size=60, joint=False), src_texts, tgt_texts)
    assert s is not t and s.proto != t.proto
    assert UNK in s.encode("bade") and UNK not in t.encode("bade")  # target characters unseen by source
    j, j2 = build_tokenizers(VocabConfig(kind=kind, size=60, joint=True), src_texts, tgt_texts)
    assert j is j2
    assert UNK not in j.encode("bade kato")
    for text in src_texts[:5] + tgt_texts[:5]:
        assert j.decode(j.encode(text)) == text


@pytest.mark.parametrize("kind, joint", [("word", False), ("word", True), ("bpe", False), ("bpe", True)])
def test_save_and_load_tokenizers(tmp_path, kind, joint):
    cfg = SimpleNamespace(kind=kind, size=60, joint=joint, character_coverage=1.0, byte_fallback=False)
    src_tok, tgt_tok = build_tokenizers(cfg, SRC, TGT)
    save_tokenizers(tmp_path, cfg, src_tok, tgt_tok)
    names = sorted(set(tokenizer_files(kind, joint)))
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    src2, tgt2 = load_tokenizers(tmp_path, cfg)
    if joint:
        assert src2 is tgt2
    for text in SRC:
        assert src2.encode(text) == src_tok.encode(text)
    for text in TGT:
        assert tgt2.encode(text) == tgt_tok.encode(text)


# Characters that Unicode normalisation changes, some into two words (¨ -> space + diaeresis, ½ -> 1⁄2,
# the ﬁ ligature, full-width letters, a decomposed é), beside ordinary ones
TRICKY = ["¨", "½", "ﬁ", "Ｔ", "ｅ", "e\u0301", "\u0301", "ß", "İ", "ǅ", "①", "™", "\u200d", "…", "ｶ"]


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
@pytest.mark.parametrize("byte_fallback", [False, True])
def test_word_cache_encodes_sentences_exactly_as_sentencepiece(kind, byte_fallback):
    rng = random.Random(5)
    letters = list("abcdefghijklmnopqrstuvwxyzäöüéèçñ") + TRICKY
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 7))) for _ in range(300)]
    text = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(600)]
    tok = SentencePiece.build([normalize(s) for s in text[:400]], 600, kind, byte_fallback=byte_fallback)
    cache = WordCache(tok)
    for sentence in map(normalize, text):  # the held-out 200 have words the model never saw
        assert cache.encode(sentence) == tok.encode(sentence), sentence
    assert 0 < len(cache.words) < len(words)  # words with a tricky character are never cached
    cache = WordCache(tok)
    cache.LIMIT = 2
    few = [normalize(s) for s in text[:50]]
    assert [cache.encode(s) for s in few] == [tok.encode(s) for s in few]
    assert len(cache.words) <= 2
