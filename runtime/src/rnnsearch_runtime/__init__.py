"""Translate with an exported rnnsearch model: numpy, onnxruntime and sentencepiece, no PyTorch.

    >>> import rnnsearch_runtime
    >>> model = rnnsearch_runtime.load("exported/")      # rnnsearch export --format onnx --out exported/
    >>> model.translate(["Ein Hund läuft."], beam=5)[0].text

The folder holds encoder.onnx, step.onnx, the tokeniser files and manifest.json (rnnsearch's
engine/export/onnx.py). The search is rnnsearch's beam search (its nn/search.py), batched:
each hypothesis proposes its K best next words, a finished one stays in the beam at no cost,
all are ranked by log p / len**alpha (len counting </s>), </s> is forced at the length limit
(max_len_ratio * source pieces + 10), and a sentence is done when its K hypotheses have all
ended; K = 1 is greedy search. Sources longer than max_source_len pieces are translated in
consecutive pieces, joined.
"""

from __future__ import annotations

from rnnsearch_runtime.search import Result, Runtime, load

__all__ = ["Result", "Runtime", "load"]
