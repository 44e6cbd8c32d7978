"""The decoding side of `rnnsearch serve`: a request's sentences as a Query, and the Batcher that
decodes the sentences of concurrent requests together in one worker thread per model.

A request waits at most ``max_wait_ms`` for others to join its batch; decoding runs off the event
loop; a bounded queue answers QueueFull (the APIs' 503 with Retry-After) instead of piling up
memory. A sentence's translation does not depend on which others share its batch, so every API
answers what ``rnnsearch translate`` writes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple, dataclass, field, replace

from rnnsearch.config import DecodeConfig

log = logging.getLogger("rnnsearch")


@dataclass
class Limits:
    max_sentences: int = 64  # per request
    max_chars: int = 2000  # per sentence
    max_body: int = 1 << 20  # bytes
    max_beam: int = 32  # the widest beam decoded: a model's decode.beam, a request's beam or alternatives
    max_batch: int = 32  # sentences decoded together
    max_wait_ms: float = 5.0  # how long a request waits for others to join its batch
    max_queue: int = 512  # sentences waiting or decoding; beyond, 503

    def beam_problem(self, beam: int) -> str | None:
        """Why `beam` is past max_beam ("beam: must be from 1 to N"; the caller says whose limit and
        the value given), or None. Every beam the server is asked to decode with is checked here."""
        return f"beam: must be from 1 to {self.max_beam}" if beam > self.max_beam else None

    @property
    def max_alternatives(self) -> int:
        """The most alternatives a request may ask for besides the best: the beam holds them all."""
        return self.max_beam - 1

    def beam_for(self, beam: int, n_best: int) -> int:
        """The beam that gives `n_best` hypotheses: `beam`, widened to n_best, within max_beam."""
        return min(max(beam, n_best), self.max_beam)


@dataclass
class Query:
    texts: list[str]
    decode: DecodeConfig  # its decoding options (beam, n_best, links), checked by Translator.options
    attention: bool
    single: bool  # {"text": ...} rather than {"texts": [...]}
    alignment: bool = False  # Translation.alignment with every translation (n-best ones too)
    markup: list | None = None  # format html: each text's engine.markup.Marked (texts hold their plain text)
    model: str | None = None  # the native API's "model": the name of the loaded model asked for
    prefixes: list[str | None] | None = None  # per text the start its translation is forced through
    constraints: list[list[str] | None] | None = None  # per text the phrases its translation must contain


@dataclass
class _Job:
    query: Query
    future: asyncio.Future
    decode: DecodeConfig = field(init=False)  # what it is decoded with: jobs alike decode together
    attention: bool = field(init=False)

    def __post_init__(self):
        # the attention is decoded for links too; what a request gets back is native.translation_json's
        q = self.query
        linked = q.alignment or q.markup is not None
        self.decode = q.decode if linked else replace(q.decode, links=None)  # no links: none computed
        self.attention = q.attention or linked

    @property
    def params(self) -> tuple:
        # constrained queries decode by their own search, apart from the others
        return (astuple(self.decode), self.attention, self.query.constraints is not None)


class QueueFull(Exception):
    """More sentences than Limits.max_queue would be waiting: the APIs answer 503."""

    def __init__(self, pending: int, limits: Limits):
        super().__init__(f"server busy: {pending} sentences queued (limit {limits.max_queue})")
        # seconds until the queue has likely drained a batch's worth (a client's Retry-After)
        self.retry_after = max(1, math.ceil(pending / max(limits.max_batch, 1) * 0.05))


class Batcher:
    """Collects the sentences of concurrent requests into batches for one decoding thread."""

    def __init__(self, translate: Callable[..., list], limits: Limits,
                 on_batch: Callable[[int], None] | None = None):
        self.translate, self.limits = translate, limits  # Translator.translate_n_best: n-best lists
        self.on_batch = on_batch  # called with each decoded batch's sentence count (metrics)
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
            raise QueueFull(self.pending, self.limits)
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
            for group in groups.values():
                live = [j for j in group if not j.future.done()]  # a client that left is not decoded
                texts = [t for j in live for t in j.query.texts]
                prefixes = [p for j in live for p in (j.query.prefixes or [None] * len(j.query.texts))]
                decode = replace(group[0].decode, batch_size=self.limits.max_batch)
                extra: dict = {"prefixes": prefixes} if any(p is not None for p in prefixes) else {}
                if group[0].query.constraints is not None:
                    extra["constraints"] = [c for j in live for c in j.query.constraints or []]
                try:
                    results = await loop.run_in_executor(
                        self.executor,
                        functools.partial(self.translate, texts, decode, attention=group[0].attention,
                                          **extra),
                    ) if texts else []
                    self.batches += 1
                    if self.on_batch is not None and texts:
                        self.on_batch(len(texts))
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
