"""``--quantize int8``: dynamic int8 matrix products for decoding on a CPU.

A decoding step multiplies small batches (the beam's hypotheses) by the decoder's weight
matrices; on a CPU those products dominate it. Int8 decoding replaces each of them by an int8
product: the weights are quantised once when the model is loaded (symmetric, one scale per
output row), the activations on the fly from their own range (per product), and the int32 sum
is scaled back to fp32. The model directory is unchanged: quantising happens at load.

What is quantised is what runs once per target word: the decoder GRU (its input side W and
recurrent U, through the project's own GRU code), the context projection C, the attention
query W_a (or W_g), the deep output U_o, V_o, C_o and the output layer W_o. The encoder and
the attention keys run once per sentence and stay fp32, and so do softmaxes and the elementwise
gates. The kernels are PyTorch's fbgemm/oneDNN dynamic linear (``torch.ops.quantized``); which
engine packs the weights is :func:`int8_engine`'s choice: oneDNN on a CPU with AMX int8 tiles
(2-3x fbgemm's speed at the output layer's shapes there, docs/benchmarks.md), else PyTorch's
default. ``RNNSEARCH_INT8_ENGINE=x86|fbgemm|onednn`` overrides it, for comparisons. Torch 2.13
marks the ``torch.ao.quantization`` front end deprecated (this module does not use it) and warns
that quantized tensors, which packing the weights takes, will go; tests/test_quantize.py fails
the day the kernels do.
Measured speed and BLEU: docs/benchmarks.md, "int8 decoding".
"""

from __future__ import annotations

import os
import warnings
from typing import Optional

import torch
from torch import nn

from rnnsearch.config import QUANTIZE
from rnnsearch.engine.accel.speedup import Rows
from rnnsearch.engine.precision import cpu_info
from rnnsearch.nn.gru import GRU
from rnnsearch.nn.model import Model, RNNsearch

KINDS = QUANTIZE
ENGINES = ("x86", "fbgemm", "onednn")
ONEDNN_ROWS = 32  # oneDNN's products take rows in multiples of this (Int8Linear.forward says why)


def onednn_runs_amx() -> bool:
    """Whether oneDNN's int8 products run on AMX tiles here: the CPU has them (``amx_int8``) and
    ``ONEDNN_MAX_CPU_ISA``, oneDNN's own cap, if set, leaves them on (names one of the AMX ISAs,
    or ``DEFAULT``). With the cap at ``AVX2`` an AMX machine runs the kernels an AVX2-only CPU runs."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper()
    return "amx_int8" in cpu_info()[1] and (not cap or cap == "DEFAULT" or "AMX" in cap)


def int8_engine() -> tuple[str, bool]:
    """The quantized engine that packs (and so runs) the int8 products, and whether activations
    are cut to 7 bits (``reduce_range``). AVX2's u8 x s8 instruction (vpmaddubsw) adds pairs of
    products into 16 bits, which 8-bit activations saturate (a fifth of the output's scale wrong,
    measured); AMX's tile product sums into 32 bits, so only where oneDNN runs on AMX
    (:func:`onednn_runs_amx`) does it take all 8 bits (half the rounding error, at no cost)."""
    supported = torch.backends.quantized.supported_engines
    amx = onednn_runs_amx()
    chosen = os.environ.get("RNNSEARCH_INT8_ENGINE", "")
    if chosen and (chosen not in ENGINES or chosen not in supported):
        have = ", ".join(e for e in ENGINES if e in supported) or "none"
        raise ValueError(f"RNNSEARCH_INT8_ENGINE={chosen}: not a quantized engine of this PyTorch "
                         f"(it has: {have})")
    if not chosen:
        chosen = "onednn" if amx and "onednn" in supported else torch.backends.quantized.engine
    return chosen, not (amx and chosen == "onednn")


def per_row_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`weight` (out, in) as a quantized qint8 tensor, symmetric, one scale per output row, and
    those scales (fp64)."""
    w = weight.detach().float().cpu()
    scales = (w.abs().amax(1) / 127.0).clamp_min(1e-12).double()
    zeros = torch.zeros(w.size(0), dtype=torch.long)
    with warnings.catch_warnings():  # the packing wants a quantized tensor, which torch 2.13 deprecates
        warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
        return torch.quantize_per_channel(w, scales, zeros, 0, torch.qint8), scales


class Int8Linear(nn.Module):
    """y = x Wᵀ + b with W in int8 (per-row scales) and x quantised per call."""

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor]):
        super().__init__()
        self.in_features, self.out_features = weight.size(1), weight.size(0)
        q, _ = per_row_int8(weight)
        b = None if bias is None else bias.detach().float().cpu()
        self.engine, self.reduce_range = int8_engine()
        before = torch.backends.quantized.engine
        try:  # the packed weights keep the engine they were packed with, whatever is global later
            torch.backends.quantized.engine = self.engine
            self._packed = torch.ops.quantized.linear_prepack(q, b)
        finally:
            torch.backends.quantized.engine = before

    @classmethod
    def of(cls, linear: nn.Linear) -> Int8Linear:
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).float().contiguous()
        rows = flat.size(0)
        if self.engine == "onednn" and rows % ONEDNN_ROWS:
            # oneDNN builds and caches a kernel per shape; a batch that shrinks one sentence at a time
            # would overflow its cache (ten products x every row count) and rebuild them each step.
            # Zero rows leave the activations' range, so the other rows' results, as they were.
            flat = torch.nn.functional.pad(flat, (0, 0, 0, ONEDNN_ROWS - rows % ONEDNN_ROWS))
        y = torch.ops.quantized.linear_dynamic(flat, self._packed, reduce_range=self.reduce_range)
        return y[:rows].reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 ({self.engine})"


class Int8Output(Int8Linear):
    """The output layer W_o in int8: the int8 product over the whole vocabulary, and for a
    shortlist its rows (accel/speedup.py's ``output_rows``) dequantised from the int8 rows and scales
    it keeps (a quarter of an fp32 copy's memory; packed weights cannot be indexed)."""

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor]):
        super().__init__(weight, bias)
        q, scales = per_row_int8(weight)
        self._int8, self._scales = q.int_repr(), scales.float()
        self._bias = None if bias is None else bias.detach().float().cpu()

    def rows(self, ids: torch.Tensor) -> Rows:
        """The fp32 weight rows and biases of the outputs `ids`, dequantised: what the int8 product
        multiplies by for those outputs."""
        weight = self._int8.index_select(0, ids).float().mul_(self._scales.index_select(0, ids).unsqueeze(1))
        return weight, None if self._bias is None else self._bias.index_select(0, ids)


class Int8GRU(nn.Module):
    """The decoder GRU (nn/gru.py) with W and U in int8, split the way :meth:`GRU.recurrent` splits
    U (the paper form takes [U_r; U_z] h and U (r ∘ h) as two products); U's bias (cudnn form
    only) stays fp32. The same equations as :func:`rnnsearch.nn.gru.gru_step`."""

    def __init__(self, gru: GRU):
        super().__init__()
        n, w = gru.hidden, gru.U.weight
        self.hidden, self.reset_after = n, gru.reset_after
        self.W = Int8Linear.of(gru.W)
        self.bias = gru.U.bias
        self.rz = Int8Linear(w if gru.reset_after else w[: 2 * n], None)
        self.h: Optional[Int8Linear] = None if gru.reset_after else Int8Linear(w[2 * n:], None)

    def recurrent(self) -> tuple[Int8Linear, Optional[Int8Linear]]:
        return self.rz, self.h

    def cell(self, x_proj: torch.Tensor, h: torch.Tensor, recurrent=None) -> torch.Tensor:
        n = self.hidden
        x_rz, x_h = x_proj.split([2 * n, n], -1)
        if self.h is None:  # cudnn form: one product, split after
            hu_rz, hu_h = (self.bias + self.rz(h)).split([2 * n, n], -1)
            r, z = torch.sigmoid(x_rz + hu_rz).split(n, -1)
            cand = torch.tanh(x_h + r * hu_h)
        else:
            r, z = torch.sigmoid(x_rz + self.rz(h)).split(n, -1)
            cand = torch.tanh(x_h + self.h(r * h))
        return h + z * (cand - h)  # = (1 - z) ∘ h + z ∘ h̃


def quantize_int8_(model: Model) -> Model:
    """Swap the per-step products of `model` (an RNNsearch or RNNencdec on the CPU) for int8
    ones, in place; returns it. Decoding only: the swapped modules have no gradients."""
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ValueError("int8 decoding runs on the CPU (--device cpu)")
    if torch.backends.quantized.engine == "none":
        raise ValueError("this PyTorch build has no quantized CPU engine (fbgemm, x86 or onednn)")
    model.eval()
    model.decoder = Int8GRU(model.decoder)  # type: ignore[assignment]  # the same calls, in int8
    for name in ("C", "U_o", "V_o", "C_o"):
        setattr(model, name, Int8Linear.of(getattr(model, name)))
    model.W_o = Int8Output(model.W_o.weight, model.W_o.bias)  # type: ignore[assignment]  # W_o(t) as before
    if isinstance(model, RNNsearch):  # its attention's query side; RNNencdec has none
        for name in ("W_a", "W_g"):
            if hasattr(model.attention, name):
                setattr(model.attention, name, Int8Linear.of(getattr(model.attention, name)))
    return model
