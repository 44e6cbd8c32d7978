"""The native API of ``rnnsearch serve`` (the server's other APIs: compat.py, libre.py, deepl.py).

    POST /translate   {"text": "..."} or {"texts": [...]}, optional "beam", "n_best", "attention",
                      "alignment" (true: word links [[source, target], ...] with every translation),
                      "format" ("html": inline tags carried to the aligned words, engine/decode/markup.py),
                      "links" (where those links come from, as decode.links: "attention", "head",
                      "saliency" (gradient x input; slower, the sharper alignment; not with an
                      int8 model) or "mean"; default the head where the model has one),
                      "model" (the name of a loaded model; default: the first); "sample": N
                      translations drawn instead of searched for ("samples"), with "temperature",
                      "top_k", "top_p", "seed" (engine/decode/sampling.py); "prefix" (with "text") or
                      "prefixes" (with "texts", a string or null each): the words a translation starts with;
                      "constraints": the phrases a translation must contain (with "text": a list of
                      strings; with "texts": one such list, or null, a text; engine/decode/constraints.py)
    POST /score       {"source": "...", "target": "..."} or {"sources": [...], "targets": [...]},
                      optional "per_token", "model": log p(target | source) as `rnnsearch score`
    GET  /            the attention explorer as a live page (type, translate, click words)
    GET  /health      liveness and queue length
    GET  /info        model configuration, vocabulary sizes, parameters, memory, limits

Requests are validated before they reach the model (a 4xx JSON error names the field).
No endpoint reads or writes a file named by a client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from rnnsearch.config import ConfigError
from rnnsearch.serve.batching import Limits, Query, QueueFull
from rnnsearch.serve.exported import ExportedTranslator

log = logging.getLogger("rnnsearch")

SAMPLING = ("sample", "temperature", "top_k", "top_p", "seed")
# the fields that are config.DecodeConfig's options
DECODING = ("beam", "n_best", "links", "length_penalty", "coverage", *SAMPLING)
FIELDS = ("text", "texts", *DECODING, "attention", "alignment", "format", "model", "prefix", "prefixes",
          "constraints")


class RequestError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


def _decoding(body: dict, served, limits: Limits):
    """The request's decoding options over the model's (Served.decode), checked where every
    caller's are (Translator.options); RequestError names the field at fault."""
    try:
        decode = served.translator.options(served.decode, **{k: body[k] for k in DECODING if k in body})
    except ConfigError as e:  # its message opens with the option, as the field is named
        field = str(e).partition(":")[0]
        raise RequestError(422, str(e), field if field in DECODING else None) from None
    too_wide = limits.beam_problem(decode.beam)  # the server's own limit, below the option's range
    if too_wide:
        raise RequestError(422, f"{too_wide} here, got {decode.beam}", "beam")
    if decode.sample > limits.max_beam:  # N samples cost what a beam of N does
        raise RequestError(422, f"sample: must be from 0 to {limits.max_beam} here, got {decode.sample}",
                           "sample")
    return decode


def _sentence(value, name: str, limits: Limits) -> str:
    if not isinstance(value, str):
        raise RequestError(422, f"{name} must be a string, got {type(value).__name__}", name)
    if not value.strip():
        raise RequestError(422, f"{name} is empty", name)
    if len(value) > limits.max_chars:
        raise RequestError(422, f"{name} has {len(value):,} characters; the limit is {limits.max_chars:,}",
                           name)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestError(422, f"{name} is not valid Unicode (an unpaired surrogate)", name) from None
    return value


def loads(text: str | bytes) -> Any:
    """json.loads, with a body nested too deep for Python's parser (a RecursionError: a 200 kB
    body of brackets will do) a JSONDecodeError like any other malformed body, not a 500."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", "", 0) from None


def parse_request(raw: bytes, limits: Limits, models: dict[str, Any]) -> Query:
    """Validate a /translate body; raises RequestError naming the field at fault. `models`: the
    loaded models (models.Served) by name, the first the default model."""
    body = _object(raw, limits, FIELDS)
    if ("text" in body) == ("texts" in body):
        raise RequestError(422, "give exactly one of 'text' (a string) or 'texts' (a list of strings)",
                           "text" if "text" in body else None)
    if "text" in body:
        texts, single = [_sentence(body["text"], "text", limits)], True
    else:
        items = body["texts"]
        if not isinstance(items, list):
            raise RequestError(422, f"texts must be a list of strings, got {type(items).__name__}", "texts")
        if not items:
            raise RequestError(422, "texts is empty", "texts")
        if len(items) > limits.max_sentences:
            raise RequestError(422, f"texts has {len(items)} sentences; the limit is {limits.max_sentences}",
                               "texts")
        texts, single = [_sentence(t, f"texts[{i}]", limits) for i, t in enumerate(items)], False
    model = _model_name(body, models)
    decode = _decoding(body, models[model], limits)
    flags = {}
    for key in ("attention", "alignment"):
        flags[key] = body.get(key, False)
        if not isinstance(flags[key], bool):
            raise RequestError(422, f"{key} must be true or false", key)
    fmt = body.get("format", "text")
    if fmt not in ("text", "html"):
        raise RequestError(422, f"format must be \"text\" or \"html\", got {json.dumps(fmt)}", "format")
    markup = None
    if fmt == "html":  # the model reads the text; the tags go back around the aligned words
        from rnnsearch.engine.decode.markup import parse

        markup = [parse(t) for t in texts]
        texts = [m.text for m in markup]
    prefixes = _prefixes(body, texts, single, models[model], decode, limits)
    if prefixes is not None and markup is not None:
        raise RequestError(422, "prefix: not with format html", "prefix" if single else "prefixes")
    constraints = _constraints(body, texts, single, models[model], decode, limits)
    if constraints is not None and (markup is not None or prefixes is not None):
        raise RequestError(422, f"constraints: not with {'format html' if markup else 'a prefix'}",
                           "constraints")
    return Query(texts, decode, flags["attention"], single, flags["alignment"], markup, model, prefixes,
                 constraints)


def _constraints(body: dict, texts: list[str], single: bool, served, decode, limits: Limits) -> list | None:
    """The request's "constraints", checked as the Translator checks them."""
    if "constraints" not in body:
        return None
    value = [body["constraints"]] if single else body["constraints"]
    shape = "a list of strings" if single else f"a list of {len(texts)} (a list of strings or null each)"
    if not isinstance(value, list) or len(value) != len(texts):
        raise RequestError(422, f"constraints must be {shape}", "constraints")
    for phrases in value:
        if phrases is not None and (not isinstance(phrases, list) or
                                    not all(isinstance(p, str) and p.strip() for p in phrases)):
            raise RequestError(422, f"constraints must be {shape}, each string non-empty", "constraints")
        for p in phrases or []:
            _sentence(p, "constraints", limits)
    try:
        served.translator.check_constraints(texts, value, decode)
    except ConfigError as e:
        raise RequestError(422, str(e), "constraints") from None
    return value


def _prefixes(body: dict, texts: list[str], single: bool, served, decode, limits: Limits) -> list | None:
    """The request's "prefix" (with "text") or "prefixes" (with "texts"), checked as the Translator
    checks them (a prefix the search cannot take is refused here, not in a batch of others)."""
    key = "prefix" if single else "prefixes"
    other = "prefixes" if single else "prefix"
    if other in body:
        raise RequestError(422, f"{other} goes with {'texts' if single else 'text'}; give {key}", other)
    if key not in body:
        return None
    value = [body[key]] if single else body[key]
    if not isinstance(value, list) or len(value) != len(texts):
        raise RequestError(422, f"prefixes must be a list of {len(texts)} (a string or null each)", key)
    for i, p in enumerate(value):
        if p is not None and (not isinstance(p, str) or not p.strip()):
            what = "a non-empty string" if single else "a non-empty string or null"
            raise RequestError(422, f"{key if single else f'prefixes[{i}]'} must be {what}", key)
        if p is not None:
            _sentence(p, key, limits)
    try:
        served.translator.check_prefixes(texts, value, decode)
    except ConfigError as e:
        raise RequestError(422, str(e), key) from None
    return value


def translation_json(result: list, query: Query, k: int = 0) -> dict:
    """The answer for text k of the query (`result`: its n-best Translations, best first)."""
    d = query.decode
    n_best, key = (d.sample, "samples") if d.sample else (d.n_best, "n_best")
    best = result[0]
    text = (lambda t: t.text) if query.markup is None else (lambda t: _marked_text(t, query.markup[k]))
    out = {"text": text(best), "score": round(best.score, 6), "tokens": best.tokens}
    if n_best > 1:
        out[key] = [{"text": text(t), "score": round(t.score, 6)} for t in result]
    if query.attention:
        out["attention"] = best.attention_json()
    if query.alignment:  # [[source word, target word], ...] over text.split(): null without attention
        out["alignment"] = _links_json(best)
        for entry, t in zip(out.get(key, []), result):
            entry["alignment"] = _links_json(t)
    return out


def _marked_text(t, marked) -> str:
    """The translation with the source's tags around the words aligned to theirs (none: every tag
    kept, placed as engine.markup.transfer places tags with no links)."""
    from rnnsearch.engine.decode.markup import transfer

    return transfer(marked, t.text, t.alignment or ())


def _links_json(t) -> list | None:
    links = t.alignment
    return None if links is None else [list(link) for link in links]


def error(status: int, message: str, field: str | None = None, headers: dict | None = None):
    """A JSON error response: the message and the request field at fault (or null)."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message, "field": field}, status_code=status, headers=headers)


def font_text(translator) -> str:
    """The CJK characters of both vocabularies, which the live page embeds a font subset for."""
    from rnnsearch.tools.explorer import vocabulary_font_text

    return vocabulary_font_text(translator.src_tok, translator.tgt_tok)


def model_info(translator, decode, limits: Limits) -> dict:
    """What GET /info reports: configuration, vocabulary sizes, parameters, decoding and limits."""
    members = getattr(translator, "model_dirs", None)  # an ensemble (engine/decode/ensemble.py)
    info = {"arch": translator.cfg.model.arch, "model": translator.cfg.model.__dict__.copy(),
            "ensemble": [str(d) for d in members] if members else None,
            "vocab": {"kind": translator.cfg.vocab.kind, "source": len(translator.src_tok),
                      "target": len(translator.tgt_tok)},
            "parameters": translator.parameters, "device": str(translator.device),
            "quantize": translator.quantized,
            "decode": {"beam": decode.beam, "alpha": decode.alpha, "max_len_ratio": decode.max_len_ratio},
            "limits": limits.__dict__.copy(), "reverse_source": translator.cfg.data.reverse_source}
    if isinstance(translator, ExportedTranslator):  # --backend onnx (the torch backend's info says none)
        info["backend"] = translator.backend
    return info


async def read_body(request, limits: Limits) -> bytes:
    """The request body, read with a cap (also without Content-Length, so a client cannot make
    the server buffer more); RequestError 413 over the limit, 400 when the client went away."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body:
        raise RequestError(413, f"request body over {limits.max_body:,} bytes")
    raw = bytearray()
    try:
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > limits.max_body:
                raise RequestError(413, f"request body over {limits.max_body:,} bytes")
    except ClientDisconnect:
        raise RequestError(400, "client disconnected") from None
    return bytes(raw)


def parse_score(raw: bytes, limits: Limits, models: dict[str, Any]
                ) -> tuple[list[str], list[str], bool, str, bool]:
    """Validate a /score body: (sources, targets, per_token, model name, single)."""
    body = _object(raw, limits, ("source", "target", "sources", "targets", "per_token", "model"))
    single = "source" in body or "target" in body
    keys = ("source", "target") if single else ("sources", "targets")
    if not all(k in body for k in keys) or (single and ("sources" in body or "targets" in body)):
        raise RequestError(422, "give \"source\" and \"target\", or \"sources\" and \"targets\" (lists)")
    values = [[body[k]] if single else body[k] for k in keys]
    for key, items in zip(keys, values):
        if not isinstance(items, list) or not items:
            raise RequestError(422, f"{key} must be a non-empty list of strings", key)
        if len(items) > limits.max_sentences:
            raise RequestError(422, f"{key} has {len(items)} sentences; the limit is {limits.max_sentences}",
                               key)
    if len(values[0]) != len(values[1]):
        raise RequestError(422, f"{len(values[0])} sources but {len(values[1])} targets", keys[1])
    sources = [_sentence(s, keys[0] if single else f"sources[{i}]", limits) for i, s in enumerate(values[0])]
    targets = [_sentence(t, keys[1] if single else f"targets[{i}]", limits) for i, t in enumerate(values[1])]
    per_token = body.get("per_token", False)
    if not isinstance(per_token, bool):
        raise RequestError(422, "per_token must be true or false", "per_token")
    return sources, targets, per_token, _model_name(body, models), single


def _object(raw: bytes, limits: Limits, fields: tuple[str, ...]) -> dict:
    """A request body as a JSON object of only `fields`; RequestError naming what is wrong."""
    if len(raw) > limits.max_body:
        raise RequestError(413, f"request body over {limits.max_body:,} bytes")
    try:
        body = loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RequestError(400, "request body is not UTF-8") from None
    except json.JSONDecodeError as e:
        raise RequestError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(body, dict):
        raise RequestError(422, f"expected a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise RequestError(422, f"unknown field {unknown[0]!r} (fields: {', '.join(fields)})", unknown[0])
    return body


def _model_name(body: dict, models: dict[str, Any]) -> str:
    """The request's "model": a loaded model's name (default: the first)."""
    model = body.get("model", next(iter(models)))
    if not isinstance(model, str) or model not in models:
        raise RequestError(422, f"model must be one of {', '.join(map(json.dumps, models))}, "
                                f"got {json.dumps(model)}", "model")
    return model


def _refused(request, guard):
    """The 403/429 answer where the key or rate guard turns the request away, else None."""
    from rnnsearch.serve.guard import client_address

    denial = guard.admit(bearer_key(request), client_address(request))
    if denial is None:
        return None
    headers = {"Retry-After": str(denial.retry_after)} if denial.retry_after else None
    return error(403 if denial.kind == "key" else 429, denial.message, None, headers)


async def native_score(request, models, limits: Limits, guard):
    """POST /score: log p(target | source) of each pair (engine/decode/scoring.py), on the model's
    decoding thread."""
    import asyncio
    import functools

    from starlette.responses import JSONResponse


    try:
        sources, targets, per_token, name, single = parse_score(await read_body(request, limits), limits,
                                                                models.by_name)
    except RequestError as e:
        return error(e.status, e.message, e.field)
    refused = _refused(request, guard)
    if refused is not None:
        return refused
    served = models.by_name[name]
    score = functools.partial(served.translator.score, sources, targets, served.decode, per_token=per_token,
                              batch_size=limits.max_batch)
    try:
        scores = await asyncio.get_running_loop().run_in_executor(served.batcher.executor, score)
    except ConfigError as e:  # what the model cannot do (--backend onnx scores nothing), by name
        return error(422, str(e), None)
    items = [s.to_json() for s in scores]
    return JSONResponse({"score": items[0], "scores": items} if single else {"scores": items})


def bearer_key(request) -> str | None:
    """The key of an `Authorization: Bearer KEY` header (the native API's way to give one)."""
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    return (key.strip() or None) if scheme.lower() == "bearer" else None


async def native_translate(request, raw: bytes, models, limits: Limits, guard):
    """POST /translate with a native body: validate, check key and rate, queue, answer."""
    from starlette.responses import JSONResponse


    try:
        # links a model cannot give are refused here, before queueing: in a batch they would
        # fail the other requests too
        query = parse_request(raw, limits, models.by_name)
    except RequestError as e:
        return error(e.status, e.message, e.field)
    served = models.by_name[query.model]
    refused = _refused(request, guard)
    if refused is not None:
        return refused
    batcher = served.batcher
    try:
        results = await batcher.submit(query)
    except QueueFull as e:
        return error(503, str(e), headers={"Retry-After": str(e.retry_after)})
    items = [translation_json(r, query, k) for k, r in enumerate(results)]
    body: dict[str, Any] = {"translation": items[0]} if query.single else {}
    body["translations"] = items
    return JSONResponse(body)


def page_routes(models, info: dict, page: str) -> list:
    """The GET routes: /health (liveness and queue), /info (the models) and / (the live explorer)."""
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    async def health(request):
        batchers = [m.batcher for m in models.models]
        return JSONResponse({"status": "ok", "queued_sentences": sum(b.pending for b in batchers),
                             "batches": sum(b.batches for b in batchers)})

    async def get_info(request):
        return JSONResponse(info)

    async def index(request):
        return HTMLResponse(page)

    return [Route("/health", health), Route("/info", get_info), Route("/", index)]


def exception_handlers() -> dict[type[Exception], Callable[..., Any]]:
    """JSON answers for HTTP errors (404, 405) and for any exception a handler lets through."""
    from starlette.exceptions import HTTPException

    async def http_error(request, exc: HTTPException):
        return error(exc.status_code, exc.detail)

    async def server_error(request, exc: Exception):
        log.exception("request failed")
        return error(500, f"internal error: {type(exc).__name__}")

    # Starlette's stub types every handler as taking a bare Exception, though it dispatches by class
    return {HTTPException: http_error, Exception: server_error}
