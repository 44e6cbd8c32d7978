"""What the LibreTranslate and DeepL APIs share: request fields read from a JSON body, a form
(urlencoded or multipart) or the query string; texts split into the lines the models translate;
detection of `auto` sources; and the Context every handler gets.

A text is translated a line at a time (the models were trained on sentences a line): blank lines
come back blank, and the lines' translations are joined with the text's own line breaks. With
alternatives, a one-line text's alternatives are the n-best list after the best (duplicates of
it dropped, as LibreTranslate drops them); a text of several lines combines its lines' k-th
alternatives (a line with fewer keeps its best).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from urllib.parse import parse_qsl

from rnnsearch.serve.batching import Limits, Query
from rnnsearch.serve.guard import Guard
from rnnsearch.serve.hosted import LanguageError, ModelSet, Served
from rnnsearch.serve.native import RequestError, loads, read_body, translation_json


@dataclass
class Context:
    models: ModelSet
    limits: Limits
    guard: Guard


class FieldError(Exception):
    """A request body the API cannot read (its status and message)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Fields:
    """Request fields by name; `get` the last value given, `getlist` all (DeepL's repeated text=)."""

    def __init__(self, pairs: list[tuple[str, object]], json_body: dict | None = None):
        self.pairs, self.json = pairs, json_body

    def get(self, name: str, default=None):
        if self.json is not None:
            return self.json.get(name, default)
        values = [v for k, v in self.pairs if k == name]
        return values[-1] if values else default

    def getlist(self, name: str) -> list:
        if self.json is not None:
            value = self.json.get(name)
            return [] if value is None else value if isinstance(value, list) else [value]
        return [v for k, v in self.pairs if k == name]


async def read_fields(request, limits: Limits, raw: bytes | None = None) -> Fields:
    """A JSON object body (the query string ignored, as LibreTranslate ignores it), else the query
    string and a form body together. `raw`: the body, when the caller has read it already."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    query = list(request.query_params.multi_items())
    if kind == "multipart/form-data":
        declared = request.headers.get("content-length", "")
        if not declared.isdigit() or int(declared) > limits.max_body:
            raise FieldError(413, f"request body over {limits.max_body:,} bytes (or no Content-Length)")
        form = await request.form()
        return Fields(query + [(k, v) for k, v in form.multi_items() if isinstance(v, str)])
    if raw is None:
        try:
            raw = await read_body(request, limits)
        except RequestError as e:
            raise FieldError(e.status, e.message) from None
    if kind == "application/json":
        try:
            body = loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        if not isinstance(body, dict):
            raise FieldError(400, "Invalid JSON format")
        return Fields(query, body)
    try:
        form_pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True) if raw else []
    except UnicodeDecodeError:
        raise FieldError(400, "request body is not UTF-8") from None
    return Fields(query + list(form_pairs))


def detect_each(models: ModelSet, texts: list[str], target: str, html: bool = False,
                ) -> list[tuple[str, float]]:
    """(source, confidence) of each text, among the sources of models that translate into target
    (html: of the words, the tags left out)."""
    candidates = [m.source for m in models.models if m.target == target]
    if not candidates:
        raise LanguageError(f"{target} is not supported", target)
    if html:
        from rnnsearch.engine.decode.markup import parse

        texts = [parse(t).text for t in texts]
    return [models.detect([t], candidates)[0] for t in texts]


async def translate_texts(served: Served, texts: list[str], html: bool, alternatives: int = 0,
                          ) -> list[tuple[str, list[str]]]:
    """(translation, alternatives) of each text through the model's batcher (QueueFull passes up).
    html: each text is one unit, its tags carried across (engine/decode/markup.py); else its lines are."""
    n_best = alternatives + 1
    beam = served.batcher.limits.beam_for(served.decode.beam, n_best)
    markup = None
    if html:
        from rnnsearch.engine.decode.markup import parse

        marked = [parse(t) for t in texts]
        plain = [m.text for m in marked]
        markup = [m for m in marked if m.text.strip()]
        slots = _slots([[p] for p in plain])
    else:
        slots = _slots([t.split("\n") for t in texts])
        plain = texts
    units = [u for text_slots in slots for u, k in text_slots if k >= 0]
    query = Query(units, replace(served.decode, beam=beam, n_best=n_best), False, False, markup=markup)
    results = await served.batcher.submit(query) if units else []
    ranked = [_ranked(translation_json(r, query, i), n_best) for i, r in enumerate(results)]
    out: list[tuple[str, list[str]]] = []
    for text, text_slots in zip(texts if html else plain, slots):
        if html and all(k < 0 for _, k in text_slots):  # no words: the markup comes back as it was
            out.append((text, []))
            continue
        out.append(_assemble(text_slots, ranked, n_best))
    return out


def _slots(texts_lines: list[list[str]]) -> list[list[tuple[str, int]]]:
    """Each text's lines with the index of its unit among all texts' non-blank lines (-1: blank)."""
    k, out = 0, list[list[tuple[str, int]]]()
    for lines in texts_lines:
        out.append([])
        for line in lines:
            out[-1].append((line, k if line.strip() else -1))
            k += bool(line.strip())
    return out


def _ranked(answer: dict, n_best: int) -> list[str]:
    return [e["text"] for e in answer["n_best"]] if n_best > 1 else [answer["text"]]


def _assemble(slots: list[tuple[str, int]], ranked: list[list[str]], n_best: int) -> tuple[str, list[str]]:
    """A text's translation and alternatives from its lines' ranked translations (a blank line
    stays as it was; a line with fewer alternatives than asked keeps its best)."""
    def candidate(rank: int) -> str:
        return "\n".join(line if k < 0 else ranked[k][rank] if rank < len(ranked[k]) else ranked[k][0]
                         for line, k in slots)

    best = candidate(0)
    return best, list(dict.fromkeys(c for c in map(candidate, range(1, n_best)) if c != best))


async def gather_by_model(models: ModelSet, items: list[tuple[Served, str]], html: bool,
                          alternatives: int = 0) -> list[tuple[str, list[str]]]:
    """Translate (model, text) items, each model's texts in one query, the models at once."""
    groups: dict[str, list[int]] = {}
    for i, (served, _) in enumerate(items):
        groups.setdefault(served.name, []).append(i)
    answers = await asyncio.gather(*(translate_texts(models.by_name[name], [items[i][1] for i in idx],
                                                     html, alternatives) for name, idx in groups.items()))
    out: list = [None] * len(items)
    for idx, answer in zip(groups.values(), answers):
        for i, a in zip(idx, answer):
            out[i] = a
    return out
