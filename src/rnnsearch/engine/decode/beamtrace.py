"""The beam made visible: every step of a sentence's beam search, for learners.

``rnnsearch translate --beam-trace FILE.json`` writes :func:`beam_traces`' records (a JSON list,
one record a translated line); ``rnnsearch explore --beam-trace`` and
``write_explorer(page, records)`` draw them as a search tree beside the attention. The trace is
recorded by nn/search.py's plain search (Section 3.2 as written, one sentence at a time), which
finds the n-best lists of the product's batched search (tests/test_accel.py holds them equal).

A record::

    {"line": 1, "input": "...", "beam": K, "alpha": a,
     "source": [source pieces, reading order],
     "target": [the best's pieces, "</s>"], "weights": [its attention rows] or null,
     "steps": [{"beam": [{"pieces", "score", "log_prob", "ended", "carried", "parent",
                          "attention"}, ...],             # the beam after the step, best first
                "candidates": [{"parent", "piece", "score", "kept"}, ...]}, ...],
     "best_path": [the best's index in each step's beam],
     "n_best": [{"text", "pieces", "score", "log_prob"}, ...]}

`parent` indexes the previous step's beam (the first step's parent 0 is <s>); `carried` marks a
hypothesis that had already ended and stays as it is; `attention` is the hypothesis's newest row
over `source` (the </s> row once ended), null for an RNNencdec model. Scores are log p(y | x) /
|y|**alpha, as the search ranks; numbers are rounded to 4 decimals.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

import torch

from rnnsearch.config import ConfigError, DecodeConfig
from rnnsearch.io import atomic_write_text
from rnnsearch.nn.model import EOS
from rnnsearch.nn.search import SearchOptions, search_sentence


def beam_traces(translator, sentences: Iterable[str], options: Optional[DecodeConfig] = None, *,
                early_stop: Optional[bool] = None, **overrides: Any) -> list[dict]:
    """The beam search of each sentence, step by step (module docstring): the records of a loaded
    Translator's search with `options` and `overrides` as :meth:`Translator.translate_n_best`
    takes them; each record's ``n_best`` is what translate_n_best gives. A source longer than
    ``max_source_len`` tokens (which translate splits into pieces) is a ConfigError naming its
    line."""
    d = translator.options(options, **overrides)
    if d.sample:
        raise ConfigError("beam trace: --sample draws translations without a search: there is no beam "
                          "to trace")
    if getattr(translator, "shortlist", None) is not None:
        raise ConfigError("beam trace: the traced search (nn/search.py) reads the whole output layer, not "
                          "a --shortlist: load the model without one")
    if hasattr(translator, "members"):
        raise ConfigError("beam trace: the traced search (nn/search.py) follows one model, not an "
                          "ensemble: give one --model")
    search = SearchOptions(d, True, early_stop)
    precision = translator.precision.resolve(d.precision)
    translator.model.eval()
    records = []
    with torch.autocast(translator.device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
        for line, text in enumerate(sentences, 1):
            ids = translator.source_ids(text)
            if len(ids) > d.max_source_len:
                raise ConfigError(f"beam trace: line {line} has {len(ids)} source tokens, more than "
                                  f"decode.max_source_len ({d.max_source_len}); translate splits such a line "
                                  "into searches of that length, and a trace follows one search: shorten "
                                  "the line")
            records.append(_record(translator, line, text, ids, search))
    return records


def _record(translator, line: int, text: str, ids: list[int], search: SearchOptions) -> dict:
    """One sentence's trace record (module docstring)."""
    d, rev, tgt = search.decode, translator.cfg.data.reverse_source, translator.tgt_tok
    trace: list[dict] = []
    hyps = []
    if ids:  # an empty line is not searched: it translates to an empty line
        words = torch.tensor(ids[::-1] if rev else ids, device=translator.device)
        hyps = search_sentence(translator.model, words, search, trace)

    def row(attention: Optional[list[float]]) -> Optional[list[float]]:
        return None if attention is None else _round(attention[::-1] if rev else attention)

    def pieces(words: list[int]) -> list[str]:
        return tgt.pieces(words) + (["</s>"] if words and words[-1] == EOS else [])

    steps, before = [], [{"ended": False}]  # before the first step: <s>
    for step in trace:
        steps.append({
            "beam": [{"pieces": pieces(h["words"]), "score": _r(h["score"]),
                      "log_prob": _r(h["log_prob"]), "ended": h["ended"],
                      "carried": before[h["parent"]]["ended"], "parent": h["parent"],
                      "attention": row(h["attention"])} for h in step["beam"]],
            "candidates": [{"parent": c["parent"], "piece": pieces([c["word"]])[-1],
                            "score": _r(c["score"]), "kept": c["kept"]} for c in step["candidates"]]})
        before = step["beam"]
    best_path: list[int] = []
    if trace:  # the best: the first ended hypothesis of the last beam; back through its parents
        k = next(i for i, h in enumerate(trace[-1]["beam"]) if h["ended"])
        for step in reversed(trace):
            best_path.insert(0, k)
            k = step["beam"][k]["parent"]
    n_best = [{"text": tgt.decode(h.tokens), "pieces": tgt.pieces(h.tokens), "score": _r(h.score),
               "log_prob": _r(h.log_prob)} for h in hyps]
    if not ids:
        n_best = [{"text": "", "pieces": [], "score": 0.0, "log_prob": 0.0}] * d.n_best
    best = hyps[0] if hyps else None
    return {"line": line, "input": text, "beam": d.beam, "alpha": d.alpha,
            "source": translator.src_tok.pieces(ids),
            "target": [] if best is None else n_best[0]["pieces"] + ["</s>"],
            "weights": None if best is None or best.attention is None else [row(r) for r in best.attention],
            "steps": steps, "best_path": best_path, "n_best": n_best}


def _round(values: list[float]) -> list[float]:
    return [_r(v) for v in values]


def _r(value: float) -> float:
    return round(float(value), 4) + 0.0  # + 0.0: no "-0.0"


def write_beam_traces(path: str | Path, records: list[dict]) -> Path:
    """Write :func:`beam_traces`' records to `path` as one JSON list (atomically)."""
    path = Path(path)
    atomic_write_text(path, json.dumps(records, ensure_ascii=False, separators=(",", ":")) + "\n")
    return path
