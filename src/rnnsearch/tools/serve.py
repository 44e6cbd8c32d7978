"""``rnnsearch serve``: a translation server over HTTP (Starlette on uvicorn).

    POST /translate   {"text": "..."} or {"texts": [...]}, optional "beam", "n_best", "attention",
                      "alignment" (true: word links [[source, target], ...] with every translation),
                      "format" ("html": inline tags carried to the aligned words, engine/markup.py)
    GET  /            the attention explorer as a live page (type, translate, click words)
    GET  /health      liveness and queue length
    GET  /info        model configuration, vocabulary sizes, parameters, limits

Requests are validated before they reach the model (a 4xx JSON error names the field).
Sentences of concurrent requests are decoded together: a request waits at most
``max_wait_ms`` for others to join its batch, decoding runs in a worker thread off the event
loop, and a bounded queue answers 503 with Retry-After instead of piling up memory. A
sentence's translation does not depend on which others share its batch, so the answers
equal those of ``rnnsearch translate``. No endpoint reads or writes a file named by a client.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("rnnsearch")

FIELDS = ("text", "texts", "beam", "n_best", "attention", "alignment", "format")


@dataclass
class Limits:
    max_sentences: int = 64  # per request
    max_chars: int = 2000  # per sentence
    max_body: int = 1 << 20  # bytes
    max_beam: int = 32
    max_batch: int = 32  # sentences decoded together
    max_wait_ms: float = 5.0  # how long a request waits for others to join its batch
    max_queue: int = 512  # sentences waiting or decoding; beyond, 503


class RequestError(Exception):
    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


@dataclass
class Query:
    texts: list[str]
    beam: int
    n_best: int
    attention: bool
    single: bool  # {"text": ...} rather than {"texts": [...]}
    alignment: bool = False  # Translation.alignment with every translation (n-best ones too)
    markup: list | None = None  # format html: each text's engine.markup.Marked (texts hold their plain text)


def _integer(body: dict, key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(422, f"{key} must be an integer from {low} to {high}", key)
    if not low <= value <= high:
        raise RequestError(422, f"{key} must be from {low} to {high}, got {value}", key)
    return value


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


def parse_request(raw: bytes, limits: Limits, default_beam: int) -> Query:
    """Validate a /translate body; raises RequestError naming the field at fault."""
    if len(raw) > limits.max_body:
        raise RequestError(413, f"request body over {limits.max_body:,} bytes")
    try:
        body = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise RequestError(400, "request body is not UTF-8") from None
    except json.JSONDecodeError as e:
        raise RequestError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(body, dict):
        raise RequestError(422, f"expected a JSON object, got {type(body).__name__}")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise RequestError(422, f"unknown field {unknown[0]!r} (fields: {', '.join(FIELDS)})", unknown[0])
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
    beam = _integer(body, "beam", default_beam, 1, limits.max_beam)
    n_best = _integer(body, "n_best", 1, 1, beam)
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
        from rnnsearch.engine.markup import parse

        markup = [parse(t) for t in texts]
        texts = [m.text for m in markup]
    return Query(texts, beam, n_best, flags["attention"], single, flags["alignment"], markup)


@dataclass
class _Job:
    query: Query
    future: asyncio.Future
    params: tuple = field(init=False)

    def __post_init__(self):
        # the attention is decoded for links too; what a request gets back is _translation_json's
        q = self.query
        self.params = (q.beam, q.n_best, q.attention or q.alignment or q.markup is not None)


class QueueFull(Exception):
    pass


class Batcher:
    """Collects the sentences of concurrent requests into batches for one decoding thread."""

    def __init__(self, translate, limits: Limits):
        self.translate, self.limits = translate, limits
        self.queue: asyncio.Queue[_Job] = asyncio.Queue()
        self.pending = 0  # sentences queued or being decoded
        self.batches = 0
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rnnsearch-decode")
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.executor.shutdown(wait=True, cancel_futures=True)

    async def submit(self, query: Query) -> list:
        n = len(query.texts)
        if self.pending + n > self.limits.max_queue:
            raise QueueFull
        self.pending += n
        job = _Job(query, asyncio.get_running_loop().create_future())
        self.queue.put_nowait(job)
        return await job.future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self.queue.get()]
            size = len(jobs[0].query.texts)
            deadline = loop.time() + self.limits.max_wait_ms / 1000
            while size < self.limits.max_batch:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self.queue.get(), remaining)
                except asyncio.TimeoutError:
                    break
                jobs.append(job)
                size += len(job.query.texts)
            groups: dict[tuple, list[_Job]] = {}
            for job in jobs:
                groups.setdefault(job.params, []).append(job)
            for (beam, n_best, attention), group in groups.items():
                live = [j for j in group if not j.future.done()]  # a client that left is not decoded
                texts = [t for j in live for t in j.query.texts]
                try:
                    results = await loop.run_in_executor(
                        self.executor,
                        functools.partial(self.translate, texts, beam=beam, n_best=n_best,
                                          attention=attention, batch_size=self.limits.max_batch),
                    ) if texts else []
                    self.batches += 1
                except Exception as e:  # noqa: BLE001 — one bad batch must not stop the server
                    log.exception("decoding failed")
                    for j in live:
                        if not j.future.done():
                            j.future.set_exception(e)
                else:
                    k = 0
                    for j in live:
                        if not j.future.done():
                            j.future.set_result(results[k:k + len(j.query.texts)])
                        k += len(j.query.texts)
                finally:
                    self.pending -= sum(len(j.query.texts) for j in group)


def _translation_json(result, query: Query, k: int = 0) -> dict:
    """The answer for text k of the query (`result`: its Translation, or n-best list)."""
    best = result[0] if query.n_best > 1 else result
    text = (lambda t: t.text) if query.markup is None else (lambda t: _marked_text(t, query.markup[k]))
    out = {"text": text(best), "score": round(best.score, 6), "tokens": best.tokens}
    if query.n_best > 1:
        out["n_best"] = [{"text": text(t), "score": round(t.score, 6)} for t in result]
    if query.attention:
        out["attention"] = best.attention_json()
    if query.alignment:  # [[source word, target word], ...] over text.split(): null without attention
        out["alignment"] = _links_json(best)
        for entry, t in zip(out.get("n_best", []), result if query.n_best > 1 else []):
            entry["alignment"] = _links_json(t)
    return out


def _marked_text(t, marked) -> str:
    """The translation with the source's tags around the words aligned to theirs (none: every tag
    kept, placed as engine.markup.transfer places tags with no links)."""
    from rnnsearch.engine.markup import transfer

    return transfer(marked, t.text, t.alignment or ())


def _links_json(t) -> list | None:
    links = t.alignment
    return None if links is None else [list(link) for link in links]


def _error(status: int, message: str, field: str | None = None, headers: dict | None = None):
    """A JSON error response: the message and the request field at fault (or null)."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message, "field": field}, status_code=status, headers=headers)


def _font_text(translator) -> str:
    """The CJK characters of both vocabularies, which the live page embeds a font subset for."""
    vocab_text = "".join(translator.tgt_tok.pieces(range(len(translator.tgt_tok))))
    vocab_text += "".join(translator.src_tok.pieces(range(len(translator.src_tok))))
    return "".join(sorted({c for c in vocab_text if ord(c) >= 0x2E80}))[:6000]


def _model_info(translator, default_beam: int, limits: Limits) -> dict:
    """What GET /info reports: configuration, vocabulary sizes, parameters, decoding and limits."""
    return {"arch": translator.cfg.model.arch, "model": translator.cfg.model.__dict__.copy(),
            "vocab": {"kind": translator.cfg.vocab.kind, "source": len(translator.src_tok),
                      "target": len(translator.tgt_tok)},
            "parameters": translator.parameters, "device": str(translator.device),
            "quantize": translator.quantized,
            "decode": {"beam": default_beam, "alpha": translator.cfg.decode.alpha,
                       "max_len_ratio": translator.cfg.decode.max_len_ratio},
            "limits": limits.__dict__.copy(), "reverse_source": translator.cfg.data.reverse_source}


async def _read_body(request, limits: Limits):
    """The request body as bytes, or an error response when it is over the limit or cut off.

    Read with a cap, so a client without Content-Length cannot make the server buffer more.
    """
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limits.max_body:
        return _error(413, f"request body over {limits.max_body:,} bytes")
    raw = bytearray()
    try:
        async for chunk in request.stream():  # read with a cap, also without Content-Length
            raw += chunk
            if len(raw) > limits.max_body:
                return _error(413, f"request body over {limits.max_body:,} bytes")
    except ClientDisconnect:
        return _error(400, "client disconnected")
    return bytes(raw)


def _translate_handler(batcher: Batcher, limits: Limits, default_beam: int):
    """The POST /translate handler: read and validate the body, queue it, answer its translations."""
    from starlette.responses import JSONResponse

    async def translate(request):
        raw = await _read_body(request, limits)
        if not isinstance(raw, bytes):
            return raw
        try:
            query = parse_request(raw, limits, default_beam)
        except RequestError as e:
            return _error(e.status, e.message, e.field)
        try:
            results = await batcher.submit(query)
        except QueueFull:
            retry = max(1, math.ceil(batcher.pending / max(limits.max_batch, 1) * 0.05))
            return _error(503, f"server busy: {batcher.pending} sentences queued (limit {limits.max_queue})",
                          headers={"Retry-After": str(retry)})
        items = [_translation_json(r, query, k) for k, r in enumerate(results)]
        body = {"translation": items[0]} if query.single else {}
        body["translations"] = items
        return JSONResponse(body)

    return translate


def _page_routes(batcher: Batcher, info: dict, page: str) -> list:
    """The GET routes: /health (liveness and queue), /info (the model) and / (the live explorer)."""
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    async def health(request):
        return JSONResponse({"status": "ok", "queued_sentences": batcher.pending, "batches": batcher.batches})

    async def get_info(request):
        return JSONResponse(info)

    async def index(request):
        return HTMLResponse(page)

    return [Route("/health", health), Route("/info", get_info), Route("/", index)]


def _exception_handlers() -> dict[type[Exception], Callable[..., Any]]:
    """JSON answers for HTTP errors (404, 405) and for any exception a handler lets through."""
    from starlette.exceptions import HTTPException

    async def http_error(request, exc: HTTPException):
        return _error(exc.status_code, exc.detail)

    async def server_error(request, exc: Exception):
        log.exception("request failed")
        return _error(500, f"internal error: {type(exc).__name__}")

    # Starlette's stub types every handler as taking a bare Exception, though it dispatches by class
    return {HTTPException: http_error, Exception: server_error}


def create_app(translator, limits: Limits | None = None, beam: int | None = None, lang: str = "en"):
    """The Starlette application around a loaded ``Translator``."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.routing import Route

    from rnnsearch.tools.explorer import explorer_html

    limits = limits or Limits()
    default_beam = beam if beam is not None else translator.cfg.decode.beam
    if not 1 <= default_beam <= limits.max_beam:
        raise ValueError(f"beam must be from 1 to {limits.max_beam}, got {default_beam}")
    batcher = Batcher(translator.translate, limits)
    page = explorer_html([], lang=lang, live=True, font_text=_font_text(translator),
                         default_beam=default_beam)
    info = _model_info(translator, default_beam, limits)

    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        yield
        await batcher.stop()

    routes = [Route("/translate", _translate_handler(batcher, limits, default_beam), methods=["POST"]),
              *_page_routes(batcher, info, page)]
    app = Starlette(routes=routes, exception_handlers=_exception_handlers(), lifespan=lifespan)
    app.state.batcher = batcher
    return app

def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, beam: int | None = None,
          device: str = "auto", limits: Limits | None = None, lang: str = "en",
          quantize: str = "none", cuda_graphs: bool = False, shortlist: str | None = None) -> None:
    try:
        import uvicorn
    except ImportError:
        from rnnsearch.io import DataError

        raise DataError("serve needs Starlette and uvicorn: pip install 'rnnsearch[serve]'") from None
    from rnnsearch.engine.translate import load

    translator = load(model_dir, device=device, quantize=quantize, cuda_graphs=cuda_graphs,
                      shortlist=shortlist)
    app = create_app(translator, limits, beam, lang)
    log.info("serving %s on http://%s:%d/ (explorer at /, API at POST /translate)", model_dir, host, port)
    uvicorn.run(app, host=host, port=port, log_level="warning")
