"""Who may translate how much, what the server has done, and how it stops: API keys, a rate
limit, a character quota, Prometheus metrics, CORS and the SIGTERM drain of `rnnsearch serve`.

Each API asks the Guard in its own terms (LibreTranslate's ``api_key`` field, DeepL's
``Authorization: DeepL-Auth-Key`` header, the native API's ``Authorization: Bearer``) and answers
a Denial in its own wire format. The Frontdoor is ASGI middleware around the whole application:
CORS headers as LibreTranslate sends them, metrics by route and status, and the drain.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rnnsearch.io import DataError

NO_QUOTA = 10**12  # what /v2/usage reports as the limit when --char-quota is not set


def read_keys(path: str) -> set[str]:
    """The keys of an --api-keys file: one a line; blank lines and lines starting with # skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"--api-keys {path}: no such file") from None
    except UnicodeDecodeError as e:
        raise DataError(f"--api-keys {path}: not UTF-8 text (byte {e.start})") from None
    keys = set()
    for n, line in enumerate(text.splitlines(), 1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if any(c.isspace() for c in key):
            raise DataError(f"{path}:{n}: a key may not contain spaces (one key a line)")
        keys.add(key)
    if not keys:
        raise DataError(f"--api-keys {path}: no keys in the file (one key a line)")
    return keys


@dataclass
class Denial:
    """Why a request is refused: kind "key" (403), "rate" (429) or "quota" (DeepL's 456)."""

    kind: str
    message: str
    retry_after: int = 0  # seconds, for "rate"


class Guard:
    """API keys, a per-key (else per-address) request rate per minute, and a character quota
    per key (else per address) counted since the server started."""

    def __init__(self, keys: set[str] | None = None, req_limit: int = 0, char_quota: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        self.keys, self.req_limit, self.char_quota, self.clock = keys, req_limit, char_quota, clock
        self.recent: dict[str, collections.deque] = {}  # identity -> request times in the last minute
        self.characters: collections.Counter = collections.Counter()  # identity -> characters billed

    @staticmethod
    def identity(key: str | None, address: str) -> str:
        return f"key:{key}" if key else f"address:{address}"

    def admit(self, key: str | None, address: str) -> Denial | None:
        """Check the key and the rate; an admitted request counts against the rate."""
        if self.keys is not None:
            if not key:
                return Denial("key", "Please contact the server operator to get an API key")
            if key not in self.keys:
                return Denial("key", "Invalid API key")
        if not self.req_limit:
            return None
        now, window = self.clock(), self.recent.setdefault(self.identity(key, address), collections.deque())
        while window and window[0] <= now - 60.0:
            window.popleft()
        if len(window) >= self.req_limit:
            wait = math.ceil(window[0] + 60.0 - now)
            return Denial("rate", f"{self.req_limit} per 1 minute", max(1, wait))
        window.append(now)
        if len(self.recent) > 10_000:  # forget identities idle for a minute
            self.recent = {k: w for k, w in self.recent.items() if w and w[-1] > now - 60.0}
        return None

    def bill(self, key: str | None, address: str, characters: int) -> Denial | None:
        """Count a request's characters against the quota; refused (and not counted) past it."""
        who = self.identity(key, address)
        if self.char_quota and self.characters[who] + characters > self.char_quota:
            return Denial("quota", "Quota exceeded")
        self.characters[who] += characters
        return None

    def usage(self, key: str | None, address: str) -> tuple[int, int]:
        """(characters billed, the quota) of a key or address."""
        return self.characters[self.identity(key, address)], self.char_quota or NO_QUOTA


def client_address(request) -> str:
    return request.client.host if request.client else "unknown"


# ------------------------------------------------------------------------------------------ metrics

class Metrics:
    """Prometheus metrics in a registry of the app's own: requests by route and status, request
    latency, batch sizes and queue depth per model (prometheus_client, the `metrics` extra)."""

    def __init__(self, models, token: str | None = None):
        try:
            import prometheus_client as prom
        except ImportError:
            raise DataError("--metrics needs prometheus_client: pip install 'rnnsearch[metrics]'") from None
        self.prom, self.token = prom, token
        self.registry = prom.CollectorRegistry()
        self.requests = prom.Counter("rnnsearch_requests", "HTTP requests answered",
                                     ["route", "status"], registry=self.registry)
        self.latency = prom.Histogram("rnnsearch_request_seconds", "Time to answer a request",
                                      ["route"], registry=self.registry,
                                      buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30))
        self.batches = prom.Histogram("rnnsearch_batch_sentences", "Sentences decoded together",
                                      ["model"], registry=self.registry,
                                      buckets=(1, 2, 4, 8, 16, 32, 64, 128))
        queue = prom.Gauge("rnnsearch_queue_sentences", "Sentences queued or being decoded",
                           ["model"], registry=self.registry)
        for m in models:
            queue.labels(m.name).set_function(functools.partial(getattr, m.batcher, "pending"))

    def batch_observer(self, model: str) -> Callable[[int], None]:
        return self.batches.labels(model).observe

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def route(self):
        """GET /metrics, behind `Authorization: Bearer TOKEN` when a token is set."""
        from starlette.responses import JSONResponse, Response

        async def metrics(request):
            if self.token and request.headers.get("authorization") != f"Bearer {self.token}":
                return JSONResponse({"error": "Unauthorized"}, status_code=401,
                                    headers={"WWW-Authenticate": "Bearer"})
            return Response(self.prom.generate_latest(self.registry),
                            media_type=self.prom.CONTENT_TYPE_LATEST)

        return metrics


# ---------------------------------------------------------------------------- CORS, metrics, drain

CORS = [(b"access-control-allow-origin", b"*"),
        (b"access-control-allow-headers", b"Authorization, Content-Type"),
        (b"access-control-expose-headers", b"Authorization"),
        (b"access-control-allow-methods", b"GET, POST"),
        (b"access-control-allow-credentials", b"true"),
        (b"access-control-max-age", str(60 * 60 * 24 * 20).encode())]  # LibreTranslate's headers


class Frontdoor:
    """ASGI middleware: CORS headers on every answer (and preflight OPTIONS answered), metrics by
    route and status, and the drain: once `drain()` is called, requests already accepted are
    answered and new ones get 503; `idle` tells when none is left in flight."""

    def __init__(self, app, routes: set[str], metrics: Metrics | None = None):
        self.app, self.routes, self.metrics = app, routes, metrics
        self.in_flight = 0
        self.draining = False
        self.state = getattr(app, "state", None)  # the Starlette app's (its loaded models)

    def drain(self) -> None:
        self.draining = True

    @property
    def idle(self) -> bool:
        return self.in_flight == 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in self.routes else "other"
        start, status = time.perf_counter(), 500

        async def send_with_cors(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = dict(message, headers=list(message.get("headers", [])) + CORS)
            await send(message)

        try:
            if self.draining:
                await _answer(send_with_cors, 503, {"error": "server shutting down"}, retry_after=1)
            elif scope["method"] == "OPTIONS":
                await _answer(send_with_cors, 200, None)
            else:
                self.in_flight += 1
                try:
                    await self.app(scope, receive, send_with_cors)
                finally:
                    self.in_flight -= 1
        finally:
            if self.metrics is not None and route != "/metrics":
                self.metrics.observe(route, status, time.perf_counter() - start)


async def _answer(send, status: int, body: dict | None, retry_after: int = 0) -> None:
    payload = b"" if body is None else json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if retry_after:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
