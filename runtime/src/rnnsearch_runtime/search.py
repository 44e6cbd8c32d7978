"""The runtime: an exported model's tokenisers, its two onnxruntime sessions, and the search."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

FORMAT = 1  # the manifest format this runtime reads
NEG_INF = np.float32(-np.inf)
# _top_k's column groups: group j holds columns j, j + GROUPS, j + 2 GROUPS, ... (256: fastest of
# 32 to 256 on an 8k vocabulary at 64 to 1,280 rows)
GROUPS = 256


class ModelError(ValueError):
    """An exported folder this runtime cannot use: what is wrong, and where."""


@dataclass
class Result:
    """One translation: the text, its target pieces, the ranking score (log p / len**alpha), the
    log-probability, the source pieces, and the attention (one row a target piece and </s>, one
    column a source piece, reading order), or None."""

    text: str
    tokens: list[str]
    score: float
    log_prob: float
    source_tokens: list[str]
    attention: Optional[list[list[float]]] = None

    def links(self) -> Optional[list[tuple[int, int]]]:
        """Word links (source word, target word), 0-based over ``str.split()`` of the normalised
        source and of `text`: each target word to the source word with the most attention (a
        source word's weight the sum over its pieces, a target word's row the mean of its pieces'
        rows), sorted by source then target. None without attention."""
        if self.attention is None:
            return None
        src_word, tgt_word = _word_of(self.source_tokens), _word_of(self.tokens)
        rows = np.asarray(self.attention[: len(self.tokens)], dtype=np.float64)
        if not rows.size or not src_word:
            return []
        by_src = np.zeros((rows.shape[0], max(src_word) + 1))
        np.add.at(by_src.T, src_word, rows.T)
        links = set()
        for t in range(max(tgt_word) + 1):
            mine = [k for k, w in enumerate(tgt_word) if w == t]
            links.add((int(by_src[mine].mean(0).argmax()), t))
        return sorted(links)


def _word_of(pieces: list[str]) -> list[int]:
    """The word each piece belongs to: a new word at each "▁" piece (every piece, for words)."""
    if not any(p.startswith("▁") for p in pieces):
        return list(range(len(pieces)))
    out, k = [], -1
    for i, p in enumerate(pieces):
        k += p.startswith("▁") or i == 0
        out.append(k)
    return out


def normalize(text: str, lowercase: bool = False) -> str:
    """rnnsearch's engine/data/parallel.normalize, which this runtime cannot import: control
    characters become spaces, invisible format characters other than the zero-width (non-)joiners
    are removed, whitespace runs collapse; lower-cased where the model was trained so."""
    if not text.isprintable():
        kept = []
        for ch in text:
            cat = unicodedata.category(ch)
            kept.append(" " if cat == "Cc" else "" if cat == "Cf" and ch not in "\u200c\u200d" else ch)
        text = "".join(kept)
    text = " ".join(text.split())
    return text.lower() if lowercase else text


class _Words:
    """A word vocabulary file: <pad> <unk> <s> </s>, then one word a line."""

    def __init__(self, path: Path):
        self.itos = path.read_text(encoding="utf-8").split("\n")
        if self.itos and self.itos[-1] == "":
            self.itos.pop()
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(w, 1) for w in text.split()]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.pieces(ids))

    def __len__(self) -> int:
        return len(self.itos)


class _Pieces:
    """A sentencepiece model."""

    def __init__(self, path: Path):
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(path))

    def encode(self, text: str) -> list[int]:
        return self.sp.encode(text)

    def pieces(self, ids: Iterable[int]) -> list[str]:
        return self.sp.id_to_piece([int(i) for i in ids])

    def decode(self, ids: list[int]) -> str:
        return self.sp.decode([int(i) for i in ids])

    def __len__(self) -> int:
        return self.sp.get_piece_size()


MANIFEST_KEYS = ("decode", "config", "ids", "tokenizer", "encoder", "step", "reverse_source", "lowercase")


def read_manifest(folder: Path) -> dict:
    """The manifest.json of an exported folder, checked for this runtime's format and keys; a
    ModelError naming the file and what is wrong."""
    path = folder / "manifest.json"
    if not path.is_file():
        raise ModelError(f"{folder}: no manifest.json (a folder written by rnnsearch export --format onnx)")
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: not JSON ({e})") from None
    found = m.get("format") if isinstance(m, dict) else None
    if found != FORMAT:
        raise ModelError(f"{path}: format {found!r}; this runtime reads format {FORMAT} (export the model "
                         "again with this version)")
    missing = [key for key in MANIFEST_KEYS if key not in m]
    if missing:
        raise ModelError(f"{path}: no {missing[0]!r} (not a manifest of rnnsearch export --format onnx)")
    return m


def load(folder: str | Path, threads: int = 1) -> Runtime:
    """The exported model in `folder` (rnnsearch export --format onnx), its sessions on `threads`
    threads each."""
    return Runtime(folder, threads)


class Runtime:
    """An exported model, ready to translate."""

    def __init__(self, folder: str | Path, threads: int = 1):
        import onnxruntime as ort

        self.folder = Path(folder)
        m = read_manifest(self.folder)
        self.manifest, self.decode = m, m["decode"]
        ids = m["ids"]
        self.pad, self.bos, self.eos = ids["pad"], ids["bos"], ids["eos"]
        tok = _Words if m["tokenizer"]["kind"] == "word" else _Pieces
        for name in (m["tokenizer"]["source"], m["tokenizer"]["target"], m["encoder"], m["step"]):
            if not (self.folder / name).is_file():
                raise ModelError(f"{self.folder}: {name} is missing")
        self.src_tok = tok(self.folder / m["tokenizer"]["source"])
        self.tgt_tok = tok(self.folder / m["tokenizer"]["target"])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = threads
        opts.log_severity_level = 3
        cpu = ["CPUExecutionProvider"]
        self.encoder = ort.InferenceSession(str(self.folder / m["encoder"]), opts, providers=cpu)
        self.step = ort.InferenceSession(str(self.folder / m["step"]), opts, providers=cpu)
        self.enc_names = [o.name for o in self.encoder.get_outputs()]
        self.attends = "annotations" in self.enc_names  # RNNsearch; RNNencdec has one fixed context
        # the step's outputs by name and shape (R rows, S source positions, the rest fixed)
        self.step_outputs = [(o.name, o.shape) for o in self.step.get_outputs()]

    def source_ids(self, text: str) -> list[int]:
        return self.src_tok.encode(normalize(text, self.manifest["lowercase"]))

    def translate(self, sentences: Iterable[str], **options) -> list[Result]:
        """The best translation of each sentence; options as :meth:`translate_n_best`'s."""
        return [n_best[0] for n_best in self.translate_n_best(sentences, **options)]

    def translate_n_best(self, sentences: Iterable[str], beam: Optional[int] = None, n_best: int = 1,
                         alpha: Optional[float] = None, max_len_ratio: Optional[float] = None,
                         max_source_len: Optional[int] = None, batch_size: int = 32,
                         attention: bool = True) -> list[list[Result]]:
        """Each sentence's n_best translations, best first (defaults: the model's decode section)."""
        d = self.decode
        K = beam or d["beam"]
        if not 1 <= n_best <= K:
            raise ValueError(f"n_best must be from 1 to the beam ({K}), got {n_best}")
        alpha = d["alpha"] if alpha is None else alpha
        ratio = d["max_len_ratio"] if max_len_ratio is None else max_len_ratio
        sentences = list(sentences)
        limit = max_source_len or d["max_source_len"]
        pieces: list[list[int]] = []
        owned: list[list[int]] = []  # each sentence's pieces, by position in `pieces`
        for text in sentences:
            ids = self.source_ids(text)
            owned.append(list(range(len(pieces), len(pieces) + -(-len(ids) // limit))))
            pieces += [ids[start:start + limit] for start in range(0, len(ids), limit)]
        found: list = [None] * len(pieces)
        order = sorted(range(len(pieces)), key=lambda p: len(pieces[p]))
        for start in range(0, len(order), batch_size):
            group = order[start:start + batch_size]
            hyps = self._search([pieces[p] for p in group], K, alpha, ratio, n_best, attention)
            for p, h in zip(group, hyps):
                found[p] = h
        out = []
        for mine in owned:
            if not mine:
                out.append([Result("", [], 0.0, 0.0, [], [] if attention else None) for _ in range(n_best)])
                continue
            out.append([self._result([pieces[p] for p in mine], [found[p][r] for p in mine], attention)
                        for r in range(n_best)])
        return out

    def _result(self, pieces: list[list[int]], hyps: list, attention: bool) -> Result:
        """One Result from the hypotheses of a sentence's consecutive pieces (rnnsearch's
        Translator._result)."""
        src = [t for p in pieces for t in p]
        words = [t for h in hyps for t in h[0]]
        n = sum(len(h[0]) for h in hyps)
        score = sum(h[1] * (len(h[0]) + 1) for h in hyps) / (n + len(hyps))
        rows = None
        if attention and self.attends:
            rows, before = [], 0
            for piece, h in zip(pieces, hyps):
                after = len(src) - before - len(piece)
                block = h[3] if h is hyps[-1] else h[3][:-1]
                block = [row[::-1] if self.manifest["reverse_source"] else row for row in block]
                rows += [[0.0] * before + [float(x) for x in r] + [0.0] * after for r in block]
                before += len(piece)
        return Result(self.tgt_tok.decode(words), self.tgt_tok.pieces(words), float(score),
                      float(sum(h[2] for h in hyps)), self.src_tok.pieces(src), rows)

    def _search(self, pieces: list[list[int]], K: int, alpha: float, ratio: float, n_best: int,
                attention: bool) -> list[list[tuple]]:
        """Beam search over one batch of source pieces: per piece its n_best hypotheses, each
        (target ids, score, log p, attention rows)."""
        rev = self.manifest["reverse_source"]
        B, S = len(pieces), max(1, max(len(p) for p in pieces))
        src = np.full((B, S), self.pad, dtype=np.int64)
        for b, p in enumerate(pieces):
            src[b, : len(p)] = p[::-1] if rev else p
        mask = src != self.pad
        enc = dict(zip(self.enc_names, self.encoder.run(None, {"src": src, "src_mask": mask})))
        beam = _Beam(pieces, K, ratio, alpha, enc, mask, (self.pad, self.bos, self.eos))
        step = _Step(self.step, self.step_outputs, B * K, S)
        out: list = [None] * B
        while beam.ids:
            feeds = {"y_prev": beam.y, "state": beam.state, **beam.enc}  # beam.enc: the encoding but s_0
            if self.attends:
                feeds["src_mask"] = beam.mask
            log_p, state, *alpha_i = step.run(feeds, len(beam.y))
            beam.advance(log_p, state, alpha_i[0] if alpha_i and attention else None, self)
            for b, hyps in beam.finished(n_best):
                out[b] = hyps
        return out


class _Step:
    """The step session run through an IO binding into buffers allocated once per batch (its most
    rows, the batch's source length): a step then writes log p (rows x vocabulary, 2.5 MB a step
    at 64 rows of an 8k vocabulary) into memory already mapped, where a plain run allocates and
    fills a new array each step. An output whose shape has a name other than R and S (none that
    export writes) makes the step run plainly."""

    def __init__(self, session, outputs: list[tuple[str, list]], rows: int, S: int):
        self.session, self.names = session, [name for name, _ in outputs]
        dims = {"R": rows, "S": S}
        fixed = all(isinstance(d, int) or d in dims for _, shape in outputs for d in shape)
        self.buffers: list[np.ndarray] = [np.empty([dims.get(d, d) for d in shape], np.float32)
                                          for _, shape in outputs] if fixed else []
        self.binding = session.io_binding() if fixed else None

    def run(self, feeds: dict[str, np.ndarray], rows: int) -> list[np.ndarray]:
        """The step's outputs for `feeds` (`rows` rows): views of the buffers, valid until the
        next run (the search copies what it keeps)."""
        if self.binding is None:
            return self.session.run(None, feeds)
        for name, value in feeds.items():
            self.binding.bind_cpu_input(name, value)
        views = [buffer[:rows] for buffer in self.buffers]
        for name, view in zip(self.names, views):
            self.binding.bind_output(name, "cpu", 0, np.float32, list(view.shape), view.ctypes.data)
        self.session.run_with_iobinding(self.binding)
        return views


def _top_k(log_p: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's K largest entries and their columns, largest first (equal ones: lower column
    first; which of several equal to the K-th largest is kept is arbitrary, as in a partition of
    the whole row), read without partitioning whole rows: columns are cut into GROUPS strided
    groups; a row's K largest entries lie in its K groups with the largest maxima (an entry of any
    other group has K larger ones, those K groups' maxima), so only those groups and the columns
    beyond the last whole group are partitioned. K = 1 is argmax. 2.2 ms against 7.5 ms for a
    partition of 320 rows of 8k."""
    R, V = log_p.shape
    if K == 1:
        top = log_p.argmax(1)[:, None]
        return top, np.take_along_axis(log_p, top, 1)
    n = V // GROUPS
    if K >= GROUPS or n < 2:  # a small vocabulary: every column a candidate
        vals, cols = log_p, np.broadcast_to(np.arange(V), (R, V))
    else:
        head = log_p[:, : n * GROUPS].reshape(R, n, GROUPS)
        groups = np.argpartition(head.max(1), GROUPS - K, axis=1)[:, GROUPS - K:]
        vals = head[np.arange(R)[:, None], :, groups].reshape(R, K * n)
        cols = (groups[:, :, None] + GROUPS * np.arange(n)).reshape(R, K * n)
        if V > n * GROUPS:
            vals = np.concatenate([vals, log_p[:, n * GROUPS:]], 1)
            cols = np.concatenate([cols, np.broadcast_to(np.arange(n * GROUPS, V), (R, V - n * GROUPS))], 1)
    K = min(K, V)
    part = np.argpartition(vals, vals.shape[1] - K, axis=1)[:, vals.shape[1] - K:]
    top_lp, top = np.take_along_axis(vals, part, 1), np.take_along_axis(cols, part, 1)
    by_col = np.argsort(top, axis=1)
    top_lp, top = np.take_along_axis(top_lp, by_col, 1), np.take_along_axis(top, by_col, 1)
    by_lp = np.argsort(-top_lp, axis=1, kind="stable")
    return np.take_along_axis(top, by_lp, 1), np.take_along_axis(top_lp, by_lp, 1)


class _Beam:
    """The sentences of a batch still searching, K rows each, every row's encoding its own copy."""

    def __init__(self, pieces, K, ratio, alpha, enc: dict, mask: np.ndarray, specials: tuple[int, int, int]):
        B = len(pieces)
        self.pad, bos, self.eos = specials
        self.K, self.alpha, self.ids = K, np.float32(alpha), list(range(B))
        self.src_len = [len(p) for p in pieces]
        rows = np.repeat(np.arange(B), K)
        copy = (lambda v: v[rows]) if K > 1 else (lambda v: v)  # greedy: a row a sentence already
        self.enc = {k: copy(v) for k, v in enc.items() if k != "state"}
        self.mask, self.state = copy(mask), copy(enc["state"])
        self.y = np.full(B * K, bos, dtype=np.int64)
        self.scores = np.where(np.arange(B * K) % K == 0, np.float32(0), NEG_INF).astype(np.float32)
        self.lengths = np.zeros(B * K, dtype=np.int64)
        self.ended = np.zeros(B * K, dtype=bool)
        # the search's limit, computed as it is in fp32: ratio * source pieces + 10
        self.limit = (np.float32(ratio) * np.array(self.src_len, np.float32)).astype(np.int64)[rows] + 10
        self.words = np.zeros((B * K, 0), dtype=np.int64)
        self.attn: Optional[np.ndarray] = None

    def normalised(self, scores: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        if not self.alpha:
            return scores
        return (scores / np.maximum(lengths, 1).astype(np.float32) ** self.alpha).astype(np.float32)

    def advance(self, log_p: np.ndarray, state: np.ndarray, alpha_i: Optional[np.ndarray],
                rt: Runtime) -> None:
        """One step: each sentence's K survivors among its K x K candidates (rnnsearch's
        engine/accel/inflight.py ``_beam_advance``)."""
        K, n = self.K, len(self.ids)
        log_p = log_p.astype(np.float32, copy=False)
        eos_lp = log_p[:, rt.eos].copy()
        log_p[:, rt.bos] = NEG_INF
        log_p[:, rt.pad] = NEG_INF
        at_limit = (self.lengths >= self.limit) & ~self.ended
        if K == 1:
            self._advance_greedy(log_p, eos_lp, at_limit, state, alpha_i, rt)
            return
        top, top_lp = _top_k(log_p, K)
        single = at_limit | self.ended
        first_lp = np.where(self.ended, 0, np.where(at_limit, eos_lp, top_lp[:, 0])).astype(np.float32)
        first_word = np.where(self.ended, rt.pad, np.where(at_limit, rt.eos, top[:, 0]))
        cand_lp = np.concatenate([first_lp[:, None], np.where(single[:, None], NEG_INF, top_lp[:, 1:])], 1)
        cand_word = np.concatenate([first_word[:, None], top[:, 1:]], 1)
        cand = (self.scores[:, None] + cand_lp).astype(np.float32)
        cand_len = (self.lengths + ~self.ended)[:, None].repeat(K, 1)
        ranked = self.normalised(cand, cand_len).reshape(n, K * K)
        best = np.argsort(-ranked, axis=1, kind="stable")[:, :K]
        origin = (best // K + np.arange(n)[:, None] * K).reshape(-1)
        pick = best.reshape(n, K)
        word = np.take_along_axis(cand_word.reshape(n, K * K), pick, 1).reshape(-1)
        self.scores = np.take_along_axis(cand.reshape(n, K * K), pick, 1).reshape(-1)
        was_ended = self.ended[origin]
        self.lengths = self.lengths[origin] + ~was_ended
        self.ended = was_ended | (word == rt.eos)
        self.state, self.y = state[origin], word
        self.words = np.concatenate([self.words[origin], word[:, None]], 1)
        if alpha_i is not None:
            now = alpha_i[origin][:, None, :]
            self.attn = now if self.attn is None else np.concatenate([self.attn[origin], now], 1)

    def _advance_greedy(self, log_p: np.ndarray, eos_lp: np.ndarray, at_limit: np.ndarray, state: np.ndarray,
                        alpha_i: Optional[np.ndarray], rt: Runtime) -> None:
        """advance for K = 1, which keeps each row where it is: its best word (</s> at the limit,
        <pad> once ended), without ranking one candidate a row."""
        best = log_p.argmax(1)
        best_lp = np.take_along_axis(log_p, best[:, None], 1)[:, 0]
        word_lp = np.where(self.ended, 0, np.where(at_limit, eos_lp, best_lp)).astype(np.float32)
        word = np.where(self.ended, rt.pad, np.where(at_limit, rt.eos, best))
        self.scores = (self.scores + word_lp).astype(np.float32)
        self.lengths = self.lengths + ~self.ended
        self.ended = self.ended | (word == rt.eos)
        self.state, self.y = state.copy(), word  # state: the step's buffer, written again next step
        self.words = np.concatenate([self.words, word[:, None]], 1)
        if alpha_i is not None:
            now = alpha_i[:, None, :].copy()
            self.attn = now if self.attn is None else np.concatenate([self.attn, now], 1)

    def finished(self, n_best: int) -> list[tuple[int, list[tuple]]]:
        """(batch position, n-best hypotheses) of each sentence whose rows have all ended; they leave."""
        K = self.K
        ended = (self.ended | (self.scores == NEG_INF)).reshape(-1, K).all(1)
        if not ended.any():
            return []
        out = []
        for s in np.nonzero(ended)[0]:
            rows = np.arange(s * K, (s + 1) * K)
            norm = self.normalised(self.scores[rows], self.lengths[rows])
            rank = np.where(self.ended[rows], norm, NEG_INF)
            hyps = []
            for r in np.argsort(-rank, kind="stable")[:n_best]:
                row = rows[r]
                steps = np.flatnonzero(self.words[row] != self.pad)
                words = self.words[row, steps].tolist()
                if words and words[-1] == self.eos:
                    words = words[:-1]
                att = None
                if self.attn is not None:
                    att = self.attn[row, steps, : self.src_len[self.ids[s]]].tolist()
                hyps.append((words, float(norm[r]), float(self.scores[row]), att))
            out.append((self.ids[s], hyps))
        keep = np.repeat(~ended, K)
        self.ids = [b for b, e in zip(self.ids, ended) if not e]
        for name in ("mask", "state", "y", "scores", "lengths", "ended", "limit", "words"):
            setattr(self, name, getattr(self, name)[keep])
        self.enc = {k: v[keep] for k, v in self.enc.items()}
        if self.attn is not None:
            self.attn = self.attn[keep]
        return out
