"""The application `rnnsearch serve` runs: every API over the loaded models, behind the Frontdoor
(CORS, metrics, drain), on uvicorn; SIGTERM drains before the process exits 0.

    rnnsearch serve --model de-en=runs/a [--model en-zh=runs/b ...] [--api-keys FILE]
                    [--req-limit N] [--char-limit N] [--batch-limit N] [--char-quota N]
                    [--metrics [--metrics-token TOKEN]] [--backend onnx (exported folders)]
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from rnnsearch.config import ConfigError
from rnnsearch.io import DataError
from rnnsearch.serve.batching import Batcher, Limits
from rnnsearch.serve.compat import Context, Fields
from rnnsearch.serve.deepl import routes as deepl_routes
from rnnsearch.serve.guard import Frontdoor, Guard, Metrics
from rnnsearch.serve.hosted import ModelSet, Served, model_languages, weight_bytes
from rnnsearch.serve.libre import routes as libre_routes
from rnnsearch.serve.libre import translate as libre_translate
from rnnsearch.serve.native import (
    RequestError,
    error,
    exception_handlers,
    font_text,
    loads,
    model_info,
    native_score,
    native_translate,
    page_routes,
    read_body,
)

log = logging.getLogger("rnnsearch")


@dataclass
class Access:
    """Keys, limits and metrics of a server (the command line's --api-keys ... --metrics-token)."""

    keys: set[str] | None = None
    req_limit: int = 0  # requests a minute per key (else per address); 0: no limit
    char_quota: int = 0  # characters per key (else per address) since the start; 0: none
    metrics: bool = False
    metrics_token: str | None = None


def _served(translators: list[tuple[str | None, Any]], limits: Limits, beam: int | None) -> list[Served]:
    """Served entries for (name or None, translator) pairs; an unnamed model's languages from its
    config."""
    out = []
    for name, translator in translators:
        model_dir = str(getattr(translator, "model_dir", None) or "the model")
        try:
            source, target = model_languages(name, translator.cfg, model_dir)
        except DataError:
            if name is not None or len(translators) > 1:
                raise
            # one model of unknown languages still serves the native API and the live page
            log.warning("%s: languages unknown; name them (--model de-en=DIR) for the LibreTranslate "
                        "and DeepL APIs", model_dir)
            source, target = "src", "tgt"
        decode = translator.options(beam=beam)
        too_wide = limits.beam_problem(decode.beam)
        if too_wide:
            raise ConfigError(f"{too_wide} (the server's max_beam), got {decode.beam}")
        info = dict(model_info(translator, decode, limits), source=source, target=target,
                    memory_bytes=weight_bytes(translator))
        out.append(Served(name or f"{source}-{target}", source, target, translator,
                          Batcher(translator.translate_n_best, limits), decode, info))
    return out


def _translate_route(ctx: Context):
    """POST /translate: LibreTranslate's (a form, a query string, or JSON with "q") or the native
    API's (JSON with "text"/"texts")."""
    async def translate(request):
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "multipart/form-data":
            return await libre_translate(request, ctx)
        try:
            raw = await read_body(request, ctx.limits)
        except RequestError as e:
            return error(e.status, e.message)
        if kind != "application/json":
            return await libre_translate(request, ctx, raw)
        try:
            body = loads(raw)
        except (ValueError, UnicodeDecodeError):
            body = None  # the native API names what is wrong with it
        if isinstance(body, dict) and "q" in body:  # parsed once: LibreTranslate reads these fields
            return await libre_translate(request, ctx, fields=Fields(list(request.query_params.multi_items()),
                                                                     body))
        return await native_translate(request, raw, ctx.models, ctx.limits, ctx.guard)

    return translate


def create_app(translators, limits: Limits | None = None, beam: int | None = None, lang: str = "en",
               access: Access | None = None) -> Frontdoor:
    """The ASGI application around loaded Translators: one, {"de-en": translator, ...}, or a list
    of (name or None, translator) pairs (None: languages from the model's config)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from rnnsearch.tools.explorer import explorer_html

    limits, access = limits or Limits(), access or Access()
    if isinstance(translators, dict):
        translators = list(translators.items())
    elif not isinstance(translators, list):
        translators = [(None, translators)]
    models = ModelSet(_served(translators, limits, beam))
    ctx = Context(models, limits, Guard(access.keys, access.req_limit, access.char_quota))
    metrics = Metrics(models.models, access.metrics_token) if access.metrics else None
    for m in models.models:
        m.batcher.on_batch = metrics.batch_observer(m.name) if metrics else None
    default = models.default
    page = explorer_html([], lang=lang, live=True, font_text=font_text(default.translator),
                         default_beam=default.decode.beam)
    info = dict(default.info, models={m.name: m.info for m in models.models})

    @asynccontextmanager
    async def lifespan(app):
        for m in models.models:
            m.batcher.start()
        yield
        for m in models.models:
            await m.batcher.stop()

    async def score(request):
        return await native_score(request, models, limits, ctx.guard)

    routes = [Route("/translate", _translate_route(ctx), methods=["POST"]),
              Route("/score", score, methods=["POST"]), *libre_routes(ctx),
              *deepl_routes(ctx), *page_routes(models, info, page)]
    if metrics is not None:
        routes.append(Route("/metrics", metrics.route()))
    app = Starlette(routes=routes, exception_handlers=exception_handlers(), lifespan=lifespan)
    app.state.models = models
    return Frontdoor(app, {r.path for r in routes}, metrics)


def drain_and_exit(door: Frontdoor, timeout: float):
    """A uvicorn Server class whose first SIGTERM/SIGINT drains: requests in flight are answered,
    new ones get 503, and it exits when none is left (or after `timeout` seconds); a second
    signal exits at once."""
    import uvicorn

    class DrainingServer(uvicorn.Server):
        drain_started: float | None = None

        def handle_exit(self, sig, frame):
            if self.drain_started is None:
                self.drain_started = time.monotonic()
                door.drain()
                log.info("draining: %d requests in flight; new requests get 503", door.in_flight)
            else:
                super().handle_exit(sig, frame)

        async def on_tick(self, counter) -> bool:
            if self.drain_started is not None and (
                    door.idle or time.monotonic() - self.drain_started > timeout):
                self.should_exit = True
            return await super().on_tick(counter)

    return DrainingServer


def load_models(model_specs: list[str], backend: str = "torch", device: str = "auto", quantize: str = "none",
                cuda_graphs: bool = False, shortlist: str | None = None, plain: bool = False
                ) -> list[tuple[str | None, Any]]:
    """(name or None, translator) of every `--model [SRC-TGT=]DIR`: with backend "torch" a model
    directory (several joined by commas: an ensemble) loaded as a Translator; with "onnx" a folder
    of `rnnsearch export --format onnx` searched by the runtime (serve/exported.py), where the
    PyTorch options are refused."""
    from rnnsearch.serve.hosted import parse_model_spec

    if backend not in ("torch", "onnx"):
        raise ConfigError(f"serve: --backend must be torch or onnx, got {backend!r}")
    if backend == "onnx":
        from rnnsearch.serve.exported import load_exported, refuse_torch_flags

        refuse_torch_flags(device, quantize, cuda_graphs, shortlist, plain)
        return [(name, load_exported(path)) for name, path in map(parse_model_spec, model_specs)]
    from rnnsearch.engine.decode.loading import load

    translators = []
    for spec in model_specs:
        name, path = parse_model_spec(spec)
        translators.append((name, load(path, device=device, quantize=quantize, cuda_graphs=cuda_graphs,
                                       shortlist=shortlist, plain=plain)))
    return translators


def serve(model_specs: list[str], host: str = "127.0.0.1", port: int = 8000, beam: int | None = None,
          device: str = "auto", limits: Limits | None = None, lang: str = "en", quantize: str = "none",
          cuda_graphs: bool = False, shortlist: str | None = None, access: Access | None = None,
          drain_timeout: float = 30.0, plain: bool = False, backend: str = "torch") -> None:
    """Load every `--model [SRC-TGT=]DIR` (`backend` "onnx": exported folders, load_models) and
    serve them until SIGTERM (drained) or SIGINT."""
    try:
        import uvicorn
    except ImportError:
        raise DataError("serve needs Starlette and uvicorn: pip install 'rnnsearch[serve]'") from None

    translators = load_models(model_specs, backend, device, quantize, cuda_graphs, shortlist, plain)
    door = create_app(translators, limits, beam, lang, access)
    names = ", ".join(name or str(t.model_dir) for name, t in translators)
    log.info("serving %s on http://%s:%d/ (explorer at /; native, LibreTranslate and DeepL APIs%s); "
             "pid %d", names, host, port, "; --backend onnx" if backend == "onnx" else "", os.getpid())
    config = uvicorn.Config(door, host=host, port=port, log_level="warning")
    server = drain_and_exit(door, drain_timeout)(config)
    asyncio.run(server.serve())
    if server.drain_started is not None:
        log.info("drained and stopped")

