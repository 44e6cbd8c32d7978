"""The LibreTranslate API (as LibreTranslate 1.9's app.py answers it), so that its clients —
libretranslatepy, deep-translator's LibreTranslator, Mastodon, browser extensions — work with
only their base URL changed.

    POST /translate          q (a string, or in JSON a list), source (a code or "auto"), target,
                             format ("text" | "html"), alternatives (n-best), api_key
                             -> {"translatedText": ...} (a list for a list q), with
                                "detectedLanguage" for source "auto" and "alternatives" when asked
    POST /detect             q -> [{"confidence": 0-100, "language": code}, ...]
    GET  /languages          [{"code", "name", "targets"}] of the loaded models
    GET  /frontend/settings  the character limit, keys, default languages
    GET  /health             {"status": "ok"} (the native API's, which says more)

Fields come from a JSON body, a form (urlencoded or multipart) or the query string. Errors are
LibreTranslate's: {"error": "..."} with 400 (a missing field, a language no model serves, a
limit), 403 (a missing or bad key), 429 ("Slowdown: N per 1 minute", with Retry-After).
A POST /translate with a JSON body of the native API ("text"/"texts", no "q") is the native API's.
"""

from __future__ import annotations

from rnnsearch.serve.batching import QueueFull
from rnnsearch.serve.compat import (
    Context,
    FieldError,
    Fields,
    detect_each,
    gather_by_model,
    read_fields,
)
from rnnsearch.serve.guard import Denial, client_address
from rnnsearch.serve.hosted import LanguageError, language_name


def _error(status: int, message: str, headers: dict | None = None):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _denied(denial: Denial):
    if denial.kind == "rate":
        return _error(429, f"Slowdown: {denial.message}", {"Retry-After": str(denial.retry_after)})
    return _error(403, denial.message)


def _missing(name: str):
    return _error(400, f"Invalid request: missing {name} parameter")


def _over(size: int, limit: int):
    return _error(400, f"Invalid request: request ({size}) exceeds text limit ({limit})")


def _alternatives(fields, ctx: Context):
    """The alternatives asked for (an int), or the error answer."""
    try:
        n = max(0, int(fields.get("alternatives", 0) or 0))
    except (TypeError, ValueError):
        return _error(400, "Invalid request: alternatives parameter is not a number")
    limit = ctx.limits.max_alternatives
    if n > limit:
        return _error(400, f"Invalid request: alternatives parameter must be <= {limit}")
    return n


def _texts(q, ctx: Context):
    """q as (texts, batch), or the error answer for a q LibreTranslate would refuse."""
    batch = isinstance(q, list)
    texts = q if batch else [q]
    if not all(isinstance(t, str) for t in texts):
        return _error(400, "Invalid request: q must be a string or a list of strings")
    if batch and len(texts) > ctx.limits.max_sentences:
        return _over(len(texts), ctx.limits.max_sentences)
    for t in texts:
        if len(t) > ctx.limits.max_chars:
            return _over(len(t), ctx.limits.max_chars)
    return texts, batch


async def translate(request, ctx: Context, raw: bytes | None = None, fields: Fields | None = None):
    """POST /translate; `raw` the body when read already, `fields` when also parsed."""
    try:
        fields = fields or await read_fields(request, ctx.limits, raw)
    except FieldError as e:
        return _error(e.status, e.message)
    denial = ctx.guard.admit(fields.get("api_key"), client_address(request))
    if denial is not None:
        return _denied(denial)
    q, source, target = fields.get("q"), fields.get("source"), fields.get("target")
    for name, value in (("q", q), ("source", source), ("target", target)):
        if not value:
            return _missing(name)
    alternatives = _alternatives(fields, ctx)
    if not isinstance(alternatives, int):
        return alternatives
    checked = _texts(q, ctx)
    if not isinstance(checked, tuple):
        return checked
    texts, batch = checked
    if fields.json is None:  # a form's line breaks may be CRLF (RFC 2046)
        texts = ["\n".join(t.splitlines()) for t in texts]
    text_format = fields.get("format") or "text"
    if text_format not in ("text", "html"):
        return _error(400, f"{text_format} format is not supported")
    try:
        detected = detect_each(ctx.models, texts, target, text_format == "html") if source == "auto" else None
        sources = [d[0] for d in detected] if detected else [source] * len(texts)
        served = [ctx.models.pair(s, target) for s in sources]
        results = await gather_by_model(ctx.models, list(zip(served, texts)), text_format == "html",
                                        alternatives)
    except LanguageError as e:
        return _error(400, e.message)
    except QueueFull as e:
        return _error(503, str(e), {"Retry-After": str(e.retry_after)})
    return _answer(results, batch, detected, alternatives)


def _answer(results, batch: bool, detected, alternatives: int):
    from starlette.responses import JSONResponse

    def one(k: int, key: str):
        if key == "translatedText":
            return results[k][0]
        if key == "alternatives":
            return results[k][1]
        return {"confidence": detected[k][1], "language": detected[k][0]}

    keys = ["translatedText"] + (["detectedLanguage"] if detected else []) + (
        ["alternatives"] if alternatives else [])
    return JSONResponse({key: [one(k, key) for k in range(len(results))] if batch else one(0, key)
                         for key in keys})


async def detect(request, ctx: Context):
    from starlette.responses import JSONResponse

    try:
        fields = await read_fields(request, ctx.limits)
    except FieldError as e:
        return _error(e.status, e.message)
    denial = ctx.guard.admit(fields.get("api_key"), client_address(request))
    if denial is not None:
        return _denied(denial)
    q = fields.get("q")
    if not q:
        return _missing("q")
    texts = q if isinstance(q, list) else [q]
    if not all(isinstance(t, str) for t in texts):
        return _error(400, "Invalid request: q must be a string or a list of strings")
    return JSONResponse([{"confidence": c, "language": code} for code, c in ctx.models.detect(texts)])


def routes(ctx: Context) -> list:
    """/detect, /languages, /frontend/settings (POST /translate is shared with the native API)."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    models = ctx.models

    async def languages(request):
        return JSONResponse([{"code": code, "name": language_name(code), "targets": models.targets(code)}
                             for code in models.languages()])

    async def settings(request):
        default = models.default
        return JSONResponse({
            "charLimit": ctx.limits.max_chars, "frontendTimeout": 500,
            "apiKeys": ctx.guard.keys is not None, "keyRequired": ctx.guard.keys is not None,
            "suggestions": False, "filesTranslation": False, "supportedFilesFormat": [],
            "language": {side: {"code": code, "name": language_name(code)}
                         for side, code in (("source", default.source), ("target", default.target))}})

    async def detect_route(request):
        return await detect(request, ctx)

    return [Route("/detect", detect_route, methods=["POST"]), Route("/languages", languages),
            Route("/frontend/settings", settings)]
