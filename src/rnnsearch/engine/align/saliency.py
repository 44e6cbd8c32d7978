"""Gradient × input saliency (Ding et al. 2019): word links from what each prediction is
sensitive to, rather than from where the attention looked (``links: saliency`` or ``mean``;
Translator.force and translate read its rows, docs/alignment.md has how well they align).
"""

from __future__ import annotations

import torch

from rnnsearch.engine.data.vocab import PAD


@torch.enable_grad()
def saliency_rows(model, batch) -> torch.Tensor:
    """Gradient × input saliency of each source token for each gold target token of `batch`
    (engine/data/parallel.py's Batch) under RNNsearch `model`: row i, column j is
    |∂ log p(y_i | y_<i, x) / ∂E x_j · E x_j|, the source embedding's first-order share in the
    prediction of y_i, normalised over the sentence. Row i is the prediction of token i (like
    α_i, made before the decoder read y_i), the last row that of </s>. Unlike attention it counts
    every path from x_j to y_i: through α_i, but also through the annotations that earlier
    states read. (B, T, S), padding zero; one backward pass per target position."""
    kept: list[torch.Tensor] = []

    def keep(module, inputs, output):  # the embeddings E x_j, as a leaf the gradient reaches
        output = output.detach().requires_grad_(True)
        kept.append(output)
        return output

    hook = model.src_emb.register_forward_hook(keep)
    try:
        logp, _ = model(batch.src, batch.src_mask, batch.tgt_in)[:2]
    finally:
        hook.remove()
    emb = kept[0]
    gold = batch.tgt_out.clamp(min=0).unsqueeze(-1)
    picked = logp.gather(-1, gold).squeeze(-1)  # (B, T): log p of each gold token
    real = batch.tgt_out != PAD
    rows = []
    for i in range(picked.shape[1]):  # one backward per target position; the batch's
        # sentences are independent, so the sum's gradient is each sentence's own
        (grad,) = torch.autograd.grad(picked[:, i].masked_fill(~real[:, i], 0.0).sum(), emb,
                                      retain_graph=i + 1 < picked.shape[1])
        rows.append((grad * emb).sum(-1).abs())
    sal = torch.stack(rows, 1).masked_fill(~batch.src_mask.unsqueeze(1), 0.0)  # (B, T, S)
    return (sal / sal.sum(-1, keepdim=True).clamp(min=1e-30)).detach()
