"""The output layer W_o (Appendix A.2.2): p(y_i | y_<i, x) = softmax(W_o t_i + b_o), and the one
interface through which decoding reaches it.

Decoding asks W_o for two things (:class:`OutputLayer`): logits over the whole target vocabulary,
or over a few of its rows, a lexical shortlist's (engine/decode/shortlist.py) — the rows taken once per
batch of sentences in flight (`rows`), then used at every step (`logits(t, rows)`). The model's own
layer is :class:`LinearOutput`; int8 decoding swaps in engine/decode/quantize.py's ``Int8Output``.
"""

from __future__ import annotations

from typing import Optional, Protocol

import torch
import torch.nn.functional as F
from torch import nn

Rows = tuple[torch.Tensor, Optional[torch.Tensor]]  # W_o's weight rows (V', l) and biases (V',) of some ids


class OutputLayer(Protocol):
    """W_o as the model and search use it."""

    def rows(self, ids: torch.Tensor) -> Rows:
        """The weight rows and biases of the target ids `ids` (V',), in fp32 or the model's dtype."""
        ...

    def logits(self, t: torch.Tensor, rows: Optional[Rows] = None) -> torch.Tensor:
        """t (..., l) -> logits (..., V) over the whole vocabulary, or (..., V') over `rows`."""
        ...


class LinearOutput(nn.Linear):
    """W_o t + b_o as an ``nn.Linear`` (``W_o.weight`` (V, l), ``W_o.bias`` (V,))."""

    def rows(self, ids: torch.Tensor) -> Rows:
        return self.weight.index_select(0, ids), self.bias.index_select(0, ids)

    def logits(self, t: torch.Tensor, rows: Optional[Rows] = None) -> torch.Tensor:
        return self(t) if rows is None else F.linear(t, *rows)
