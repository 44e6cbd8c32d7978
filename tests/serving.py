"""What the server tests share: a real uvicorn server on a free loopback port, and a slowed-down
translator to exercise queues, drains and errors."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import uvicorn


class LiveServer:
    def __init__(self, app, server_class=None):
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        self.server = (server_class or uvicorn.Server)(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(timeout=20)

    def request(self, path: str, body=None, method: str | None = None, raw: bytes | None = None,
                headers: dict | None = None):
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, json.loads(e.read() or b"null")


class Slow:
    """The real translator, slowed down (or failing on 'boom') to exercise the queue and errors."""

    def __getattr__(self, name):  # options, link_rows, ...: the real translator's
        return getattr(self.inner, name)

    def __init__(self, inner, delay: float):
        self.inner, self.delay = inner, delay
        self.cfg, self.model, self.device = inner.cfg, inner.model, inner.device
        self.src_tok, self.tgt_tok = inner.src_tok, inner.tgt_tok
        self.parameters, self.quantized = inner.parameters, inner.quantized

    def translate_n_best(self, texts, *args, **kw):  # what serve decodes with
        if any("boom" in t for t in texts):
            raise RuntimeError("decoder exploded")
        time.sleep(self.delay)
        return self.inner.translate_n_best(texts, *args, **kw)
