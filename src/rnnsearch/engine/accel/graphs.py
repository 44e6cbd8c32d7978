"""The decoder's time step as CUDA graphs: one launch per step instead of dozens.

On a GPU a decoding step of the benchmark model is some forty small kernels (attention, GRU
gates, deep output, output layer, log-softmax), each costing more to launch than to run. A
CUDA graph records them once and replays them with one launch. A graph has fixed shapes and
fixed memory, so the step runs on padded copies of its inputs: rows rounded up to a bucket
(powers of two to 64, then multiples of 64), source positions to a multiple of 16, one graph
per bucket, captured the first time it is needed. Padded source positions are masked out, so
a real row's numbers are the unpadded step's; padded rows are computed and dropped.

    step = GraphedStep(model)                 # capture on CUDA; elsewhere the same padding, eager
    log_p, s_i, alpha = step(enc, s_prev, y_prev, rows)   # as speedup.py's step

``--cuda-graphs`` (translate, evaluate, serve; ``load(cuda_graphs=True)``) decodes with it.
``capture=False`` runs the padded step without graphs on any device: what the tests hold equal to
speedup.py's ``step`` on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

import torch

from rnnsearch.engine.accel import speedup as fast
from rnnsearch.nn.model import PAD, Encoded

WIDTH_STEP = 16  # source positions are padded to a multiple of this
_SOURCE_FIELDS = ("annotations", "keys", "src_mask")  # (B, S, ...) fields of Encoded


def row_bucket(n: int) -> int:
    """Rows a graph is captured for: the next power of two up to 64, then multiples of 64."""
    if n <= 64:
        return 1 << max(0, n - 1).bit_length()
    return -(-n // 64) * 64


def width_bucket(n: int) -> int:
    return max(WIDTH_STEP, -(-n // WIDTH_STEP) * WIDTH_STEP)


@dataclass
class _Graph:
    """One bucket's static inputs and outputs, and its graph (None: replayed eagerly)."""

    enc: Encoded
    state: torch.Tensor
    y: torch.Tensor
    out: Optional[tuple] = None
    graph: Optional[torch.cuda.CUDAGraph] = None
    source: Optional[Encoded] = None  # the Encoded last copied in (copied again only when it changes)


class GraphedStep:
    """speedup.py's ``step`` replayed from CUDA graphs (see the module docstring)."""

    def __init__(self, model, capture: Optional[bool] = None):
        self.model = model
        device = next(model.parameters()).device
        self.capture = device.type == "cuda" if capture is None else capture
        if self.capture and device.type != "cuda":
            raise ValueError(f"CUDA graphs need the model on a CUDA device, it is on {device}")
        self.graphs: dict[tuple, _Graph] = {}

    def __call__(self, enc: Encoded, state: torch.Tensor, y_prev: torch.Tensor,
                 rows: Optional[torch.Tensor] = None):
        n, width = enc.src_mask.shape
        rows_b, width_b = row_bucket(n), width_bucket(width)
        device = state.device.type
        amp = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
        key = (rows_b, width_b, amp)  # a graph records one precision
        g = self.graphs.get(key)
        if g is None:
            g = self.graphs[key] = self._new(enc, state, rows_b, width_b)
        if g.source is not enc:
            _fill(g.enc, enc)
            g.source = enc
        # rows past n keep whatever they last held: finite, computed alone, and dropped
        g.state[:n].copy_(state)
        g.y[:n].copy_(y_prev)
        if g.graph is None and self.capture:
            g.graph, g.out = self._capture(g)
        if g.graph is not None and g.out is not None:
            g.graph.replay()
            log_p, s_new, alpha = g.out
        else:
            log_p, s_new, alpha = fast.step(self.model, g.enc, g.state, g.y)
        log_p, s_new = log_p[:n], s_new[:n]
        if alpha is not None:
            alpha = alpha[:n, :width]
        if rows is not None:
            log_p = log_p.index_select(0, rows)
        return log_p, s_new, alpha

    def _new(self, enc: Encoded, state: torch.Tensor, n: int, width: int) -> _Graph:
        """Zeroed static buffers for `n` rows and `width` source positions."""
        def buffer(t: Optional[torch.Tensor], name: str) -> Optional[torch.Tensor]:
            if t is None:
                return None
            shape = (n, width, *t.shape[2:]) if name in _SOURCE_FIELDS else (n, *t.shape[1:])
            return t.new_zeros(shape)

        made = {f.name: buffer(getattr(enc, f.name), f.name) for f in fields(Encoded)}
        static = Encoded(**made)  # type: ignore[arg-type]  # src_mask and state are never None
        return _Graph(static, state.new_zeros(n, state.size(1)),
                      torch.full((n,), PAD, dtype=torch.long, device=state.device))

    def _capture(self, g: _Graph):
        """Warm up on a side stream (cuBLAS handles, autotuning), then record one step."""
        device = g.state.device
        def amp():  # the caller's autocast, without its weight cache (casts made during capture)
            return torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"),
                                  enabled=torch.is_autocast_enabled("cuda"), cache_enabled=False)

        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), amp():
            for _ in range(2):
                fast.step(self.model, g.enc, g.state, g.y)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), amp():
            out = fast.step(self.model, g.enc, g.state, g.y)
        return graph, out


def _fill(static: Encoded, enc: Encoded) -> None:
    """Copy `enc` into the top-left corner of `static`; padded rows attend to position 0 so that
    their softmax has something to normalise (their results are dropped)."""
    n, width = enc.src_mask.shape
    for f in fields(Encoded):
        dst, src = getattr(static, f.name), getattr(enc, f.name)
        if dst is None:
            continue
        dst.zero_()
        if f.name in _SOURCE_FIELDS:
            dst[:n, :width].copy_(src)
        else:
            dst[:n].copy_(src)
    static.src_mask[n:, 0] = True
