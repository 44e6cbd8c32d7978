"""Tokenisers: sentencepiece (BPE or unigram) and the paper's word vocabulary.

Every tokeniser maps text to integer ids with the same reserved ids, so the model
never needs to know which kind it is fed:

    0 <pad>   1 <unk>   2 <s> (begin)   3 </s> (end)
"""

from __future__ import annotations

import collections
import os
import tempfile
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from rnnsearch.io import DataError, atomic_write, atomic_write_text, read_lines
from rnnsearch.nn.model import BOS, EOS, PAD, UNK  # noqa: F401  (reserved ids, re-exported)

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]


class WordVocab:
    """Whitespace words; the k most frequent kept, the rest map to <unk> (paper, Sec. 4.1)."""

    def __init__(self, words: list[str]):
        self.itos = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[str], size: int) -> WordVocab:
        counts = collections.Counter(w for s in sentences for w in s.split())
        # Sort by count, then alphabetically, so the vocabulary is deterministic.
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return cls([w for w, _ in ranked[: max(0, size - len(SPECIALS))]])

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(w, UNK) for w in text.split()]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids if i not in (PAD, BOS, EOS)]

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.pieces(ids))

    def words(self, text: str) -> list[str]:
        return text.split()

    def __len__(self) -> int:
        return len(self.itos)

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, "\n".join(self.itos) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> WordVocab:
        words = read_lines(path)
        if words[: len(SPECIALS)] != SPECIALS:
            raise DataError(
                f"{path}:1: not an rnnsearch word vocabulary (must start with {' '.join(SPECIALS)})")
        return cls(words[len(SPECIALS):])


class SentencePiece:
    """A sentencepiece model (BPE or unigram) with rnnsearch's reserved ids."""

    def __init__(self, model_proto: bytes):
        import sentencepiece as spm

        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        if (self.sp.pad_id(), self.sp.unk_id(), self.sp.bos_id(), self.sp.eos_id()) != (PAD, UNK, BOS, EOS):
            raise DataError("sentencepiece model does not use rnnsearch's reserved ids 0-3")

    @classmethod
    def build(cls, sentences: Iterable[str], size: int, kind: str = "bpe",
              character_coverage: float = 1.0, byte_fallback: bool = False, seed: int = 0) -> SentencePiece:
        import io as _io

        import sentencepiece as spm

        sentences = [s for s in sentences if s.strip()]
        if not sentences:
            raise DataError("cannot build a sentencepiece model from no text")
        # Small corpora cannot support a large vocabulary; sentencepiece would fail.
        # hard_vocab_limit=False lets it stop below `size` instead.
        buf = _io.BytesIO()
        spm.set_random_generator_seed(seed)  # sampling of input sentences is seeded
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "corpus.txt")
            with open(corpus, "w", encoding="utf-8") as f:
                for s in sentences:
                    f.write(s.replace("\n", " ") + "\n")
            try:
                spm.SentencePieceTrainer.train(
                    input=corpus, model_writer=buf, vocab_size=size, model_type=kind,
                    character_coverage=character_coverage, byte_fallback=byte_fallback,
                    pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS, hard_vocab_limit=False,
                    input_sentence_size=2_000_000, shuffle_input_sentence=True,
                    minloglevel=2, num_threads=os.cpu_count() or 1,
                )
            except RuntimeError as e:  # sentencepiece reports config problems as RuntimeError
                reason = str(e).split("] ", 1)[-1]
                hint = " (byte_fallback adds 256 byte pieces)" if byte_fallback else ""
                raise DataError(f"vocab: sentencepiece cannot build a {kind} vocabulary of size {size}: "
                                f"{reason}{hint}") from None
        return cls(buf.getvalue())

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.sp.id_to_piece(i) for i in ids if i not in (PAD, BOS, EOS)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.sp.decode([i for i in ids if i not in (PAD, BOS, EOS)])

    def __len__(self) -> int:
        return self.sp.get_piece_size()

    def save(self, path: str | Path) -> None:
        def write(tmp: str) -> None:
            with open(tmp, "wb") as f:
                f.write(self.proto)

        atomic_write(path, write)

    @classmethod
    def load(cls, path: str | Path) -> SentencePiece:
        path = Path(path)
        if not path.exists():
            raise DataError(f"{path}: no such file")
        try:
            return cls(path.read_bytes())
        except DataError:
            raise
        except Exception as e:  # sentencepiece raises RuntimeError/OSError on a bad proto
            raise DataError(f"{path}: not a sentencepiece model ({e})") from None


class WordCache:
    """A sentencepiece model's encoding of whole sentences, each distinct word encoded once: the
    sentence's ids are its words' ids in order. About four times as fast on real text, for
    preparing corpora of millions of sentences (docs/benchmarks.md, "Corpora of any size").

    Exact, not an approximation: the models rnnsearch trains split at whitespace (no piece spans
    two words), and a word that Unicode normalisation (NFKC, which sentencepiece applies) leaves
    unchanged is the same text inside a sentence as on its own. A sentence with any other word is
    encoded whole. Expects text as data.normalize leaves it: words separated by single spaces.
    """

    LIMIT = 1 << 20  # distinct words kept; the cache starts afresh past it (memory stays bounded)

    def __init__(self, tok: SentencePiece):
        self.tok = tok
        self.words: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in text.split(" "):
            pieces = self.words.get(word)
            if pieces is None:
                if not unicodedata.is_normalized("NFKC", word):
                    return self.tok.encode(text)
                if len(self.words) >= self.LIMIT:
                    self.words.clear()
                pieces = self.words[word] = self.tok.encode(word)
            ids += pieces
        return ids


def tokenizer_files(kind: str, joint: bool) -> tuple[str, str]:
    """File names of the source and target tokenisers inside a model directory."""
    ext = "vocab.txt" if kind == "word" else "spm.model"
    if joint:
        return f"joint.{ext}", f"joint.{ext}"
    return f"src.{ext}", f"tgt.{ext}"


def build_tokenizers(vocab_cfg, src_texts: list[str], tgt_texts: list[str], seed: int = 0):
    def build(texts: list[str]):
        if vocab_cfg.kind == "word":
            return WordVocab.build(texts, vocab_cfg.size)
        return SentencePiece.build(texts, vocab_cfg.size, vocab_cfg.kind,
                                   vocab_cfg.character_coverage, vocab_cfg.byte_fallback, seed)

    if vocab_cfg.joint:
        tok = build(src_texts + tgt_texts)
        return tok, tok
    return build(src_texts), build(tgt_texts)


def save_tokenizers(model_dir: str | Path, vocab_cfg, src_tok, tgt_tok) -> None:
    src_name, tgt_name = tokenizer_files(vocab_cfg.kind, vocab_cfg.joint)
    src_tok.save(Path(model_dir) / src_name)
    if tgt_name != src_name:
        tgt_tok.save(Path(model_dir) / tgt_name)


def load_tokenizers(model_dir: str | Path, vocab_cfg):
    cls = WordVocab if vocab_cfg.kind == "word" else SentencePiece
    src_name, tgt_name = tokenizer_files(vocab_cfg.kind, vocab_cfg.joint)
    src = cls.load(Path(model_dir) / src_name)
    tgt = src if tgt_name == src_name else cls.load(Path(model_dir) / tgt_name)
    return src, tgt
