"""The DeepL API v2, so that DeepL's SDKs work with a custom server URL
(``deepl.Translator(key, server_url="http://host:8000")``).

    POST /v2/translate   text (a list; repeated `text=` in a form), target_lang, source_lang
                         (upper-case codes; EN-US, EN-GB, PT-BR, PT-PT name en and pt; no
                         source_lang: detected), tag_handling ("html" | "xml": tags carried across)
                         -> {"translations": [{"detected_source_language", "text",
                                               "billed_characters"}]}
    GET  /v2/languages   type=source (default) | target -> [{"language", "name"}]
    GET  /v2/usage       {"character_count", "character_limit"} of the key (or address)

Keys come in an ``Authorization: DeepL-Auth-Key KEY`` header (or the old ``auth_key`` field).
Errors are DeepL's: {"message": "..."} with 400, 403 (a missing or bad key), 429 (the rate, with
Retry-After), 456 (the --char-quota used up). Other DeepL parameters (formality, glossaries,
split_sentences, ...) are accepted and have no effect.
"""

from __future__ import annotations

from rnnsearch.serve.batching import QueueFull
from rnnsearch.serve.compat import Context, FieldError, detect_each, gather_by_model, read_fields
from rnnsearch.serve.guard import client_address
from rnnsearch.serve.hosted import LanguageError, language_name

REGIONAL = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}  # how DeepL names these targets


def _error(status: int, message: str, headers: dict | None = None):
    from starlette.responses import JSONResponse

    return JSONResponse({"message": message}, status_code=status, headers=headers)


def _key(request, fields) -> str | None:
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme == "DeepL-Auth-Key" and key.strip():
        return key.strip()
    return fields.get("auth_key") or None


async def _guarded(request, ctx: Context):
    """(fields, key) of an admitted request, or the error answer."""
    try:
        fields = await read_fields(request, ctx.limits)
    except FieldError as e:
        return _error(e.status, e.message)
    key = _key(request, fields)
    denial = ctx.guard.admit(key, client_address(request))
    if denial is None:
        return fields, key
    if denial.kind == "rate":
        return _error(429, "Too many requests", {"Retry-After": str(denial.retry_after)})
    return _error(403, denial.message)


def _code(value):
    """A DeepL language code as the models' lower-case one (EN-US -> en), or None if malformed."""
    if not isinstance(value, str) or not value:
        return None
    return value.split("-")[0].lower()


def _texts(fields, ctx: Context):
    texts = fields.getlist("text")
    if not texts:
        return _error(400, "Parameter 'text' not specified.")
    if not all(isinstance(t, str) for t in texts):
        return _error(400, "Value for 'text' not supported: a string or a list of strings.")
    if len(texts) > ctx.limits.max_sentences:
        return _error(400, f"Too many texts: {len(texts)}; the limit is {ctx.limits.max_sentences}.")
    for t in texts:
        if len(t) > ctx.limits.max_chars:
            return _error(400, f"Text of {len(t)} characters; the limit is {ctx.limits.max_chars}.")
    return texts


async def translate(request, ctx: Context):
    from starlette.responses import JSONResponse

    admitted = await _guarded(request, ctx)
    if not isinstance(admitted, tuple):
        return admitted
    fields, key = admitted
    texts = _texts(fields, ctx)
    if not isinstance(texts, list):
        return texts
    if not fields.get("target_lang"):
        return _error(400, "Parameter 'target_lang' not specified.")
    target, source = _code(fields.get("target_lang")), fields.get("source_lang")
    if target not in {m.target for m in ctx.models.models}:
        return _error(400, "Value for 'target_lang' not supported.")
    if source and _code(source) not in ctx.models.sources():
        return _error(400, "Value for 'source_lang' not supported.")
    html = str(fields.get("tag_handling") or "").lower() in ("html", "xml")
    try:
        sources = ([(_code(source), 100.0)] * len(texts) if source
                   else detect_each(ctx.models, texts, target, html))
        served = [ctx.models.pair(s, target) for s, _ in sources]
    except LanguageError:
        return _error(400, "Value for 'target_lang' not supported.")
    denial = ctx.guard.bill(key, client_address(request), sum(len(t) for t in texts))
    if denial is not None:
        return _error(456, "Quota exceeded")
    try:
        results = await gather_by_model(ctx.models, list(zip(served, texts)), html)
    except QueueFull as e:
        return _error(503, str(e), {"Retry-After": str(e.retry_after)})
    return JSONResponse({"translations": [
        {"detected_source_language": s.upper(), "text": text, "billed_characters": len(t)}
        for (s, _), (text, _), t in zip(sources, results, texts)]})


async def languages(request, ctx: Context):
    from starlette.responses import JSONResponse

    admitted = await _guarded(request, ctx)
    if not isinstance(admitted, tuple):
        return admitted
    fields, _ = admitted
    kind = fields.get("type") or "source"
    if kind not in ("source", "target"):
        return _error(400, "Value for 'type' not supported.")
    if kind == "source":
        return JSONResponse([{"language": c.upper(), "name": language_name(c)}
                             for c in ctx.models.sources()])
    targets = list(dict.fromkeys(m.target for m in ctx.models.models))
    return JSONResponse([{"language": code, "supports_formality": False,
                          "name": language_name(c) + (f" ({code[3:]})" if "-" in code else "")}
                         for c in targets for code in REGIONAL.get(c, (c.upper(),))])


async def usage(request, ctx: Context):
    from starlette.responses import JSONResponse

    admitted = await _guarded(request, ctx)
    if not isinstance(admitted, tuple):
        return admitted
    used, limit = ctx.guard.usage(admitted[1], client_address(request))
    return JSONResponse({"character_count": used, "character_limit": limit})


def routes(ctx: Context) -> list:
    from starlette.routing import Route

    def bind(handler):
        async def endpoint(request):
            return await handler(request, ctx)
        return endpoint

    return [Route("/v2/translate", bind(translate), methods=["POST"]),
            Route("/v2/languages", bind(languages), methods=["GET", "POST"]),
            Route("/v2/usage", bind(usage), methods=["GET", "POST"])]
