"""Translation with a trained model: the Python API behind ``rnnsearch translate``.

    >>> import rnnsearch
    >>> model = rnnsearch.load("runs/multi30k")
    >>> [t.text for t in model.translate(["Ein Hund läuft."], beam=5)]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import torch

from .checkpoint import load_model_dir
from .data import iterate_sorted, normalize, pad
from .search import beam_search
from .vocab import PAD


@dataclass
class Translation:
    text: str  # detokenised
    tokens: list[str]  # target pieces/words
    score: float  # length-normalised log-probability
    source_tokens: list[str] = field(default_factory=list)
    attention: Optional[list[list[float]]] = None  # (len(tokens) + 1) rows (</s> last) x len(source_tokens)

    def attention_json(self) -> Optional[dict]:
        """SPEC form: {"source": [...], "target": [...], "weights": [[...] per target token]}."""
        if self.attention is None:
            return None
        if not self.tokens and not self.source_tokens:  # an empty input line
            return {"source": [], "target": [], "weights": []}
        return {"source": self.source_tokens, "target": self.tokens + ["</s>"], "weights": self.attention}


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Translator:
    """A loaded model with its tokenisers and decoding defaults."""

    def __init__(self, cfg, model, src_tok, tgt_tok, device: torch.device):
        self.cfg, self.model, self.src_tok, self.tgt_tok, self.device = cfg, model, src_tok, tgt_tok, device

    def encode_source(self, text: str) -> list[int]:
        ids = self.src_tok.encode(normalize(text, self.cfg.data.lowercase))
        return ids[::-1] if self.cfg.data.reverse_source else ids

    def translate(self, sentences: Iterable[str], beam: Optional[int] = None, n_best: int = 1,
                  alpha: Optional[float] = None, max_len_ratio: Optional[float] = None,
                  batch_size: Optional[int] = None, attention: bool = True,
                  ) -> list[Translation] | list[list[Translation]]:
        """Translate sentences; an empty sentence gives an empty translation.

        Returns one Translation per sentence, or (n_best > 1) a list of n_best per sentence.
        """
        d = self.cfg.decode
        beam = d.beam if beam is None else beam
        if not 1 <= n_best <= beam:
            raise ValueError(f"n_best must be in 1..beam ({beam}), got {n_best}")
        sentences = list(sentences)
        ids = [self.encode_source(s) for s in sentences]
        empty = Translation("", [], 0.0, [], [] if attention else None)
        out: list[list[Translation]] = [[empty] * n_best for _ in sentences]
        todo = [i for i, x in enumerate(ids) if x]
        self.model.eval()
        for group in iterate_sorted([ids[i] for i in todo], batch_size or d.batch_size):
            rows = [todo[g] for g in group]
            src = pad([ids[r] for r in rows]).to(self.device)
            hyps = beam_search(self.model, src, src != PAD, beam=beam, alpha=d.alpha if alpha is None else alpha,
                               max_len_ratio=max_len_ratio or d.max_len_ratio, n_best=n_best,
                               with_attention=attention)
            for r, nbest in zip(rows, hyps):
                out[r] = [self._result(ids[r], h) for h in nbest]
        return [o[0] for o in out] if n_best == 1 else out

    @torch.no_grad()
    def force(self, sources: list[str], targets: list[str], batch_size: int = 64) -> list[Optional[list[list[float]]]]:
        """Attention under teacher forcing on given translations (for alignment scoring).

        Returns per pair the weights, one row per target token plus </s>, columns in the
        source's reading order (also with reverse_source); None for RNNencdec.
        """
        from .data import Example, collate

        self.model.eval()
        examples = [Example(self.encode_source(s), self.tgt_tok.encode(normalize(t, self.cfg.data.lowercase)), k)
                    for k, (s, t) in enumerate(zip(sources, targets, strict=True))]
        out: list = [[] for _ in examples]  # an empty source has no attention rows
        todo = [k for k, e in enumerate(examples) if e.src]
        for group in iterate_sorted([examples[k].src for k in todo], batch_size):
            group = [todo[g] for g in group]
            batch = collate([examples[g] for g in group]).to(self.device)
            _, attn = self.model(batch.src, batch.src_mask, batch.tgt_in)
            if attn is None:
                return [None] * len(examples)
            for row, g in enumerate(group):
                e = examples[g]
                w = attn[row, : len(e.tgt) + 1, : len(e.src)]
                if self.cfg.data.reverse_source:
                    w = w.flip(-1)
                out[g] = w.tolist()
        return out

    def _result(self, src_ids: list[int], hyp) -> Translation:
        src_ids = src_ids[::-1] if self.cfg.data.reverse_source else src_ids
        weights = hyp.attention
        if weights is not None and self.cfg.data.reverse_source:
            weights = [row[::-1] for row in weights]  # columns back in reading order
        return Translation(self.tgt_tok.decode(hyp.tokens), self.tgt_tok.pieces(hyp.tokens), hyp.score,
                           self.src_tok.pieces(src_ids), weights)


def load(model_dir: str | Path, device: str = "auto") -> Translator:
    """Load a model directory written by ``rnnsearch train``."""
    dev = resolve_device(device)
    cfg, model, src_tok, tgt_tok = load_model_dir(model_dir, dev)
    return Translator(cfg, model, src_tok, tgt_tok, dev)


def write_attention_jsonl(path: str | Path, translations: list[Translation]) -> None:
    from .io import atomic_write_text

    lines = [json.dumps(t.attention_json(), ensure_ascii=False) for t in translations]
    atomic_write_text(path, "\n".join(lines) + ("\n" if lines else ""))
