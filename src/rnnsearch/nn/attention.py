"""Alignment models: score every annotation h_j against the decoder state s_{i-1}.

The three steps of attention (paper Sec. 3.1, Appendix A.2.2):

    1. align      e_ij = a(s_{i-1}, h_j)
    2. normalise  α_ij = exp(e_ij) / Σ_k exp(e_ik)      (over real source words only)
    3. context    c_i  = Σ_j α_ij h_j

Score functions ``a``:

    additive   (Bahdanau 2014)  e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j + b_a)
    dot        (Luong 2015)     e_ij = s_{i-1}ᵀ k_j
    general    (Luong 2015)     e_ij = s_{i-1}ᵀ W_g k_j
    scaled_dot (Vaswani 2017)   e_ij = s_{i-1}ᵀ k_j / √n

Annotations are 2n wide and the state n wide, so the dot forms cannot multiply them
directly: they use keys k_j = W_k h_j (a learned n x 2n map, no bias). With that map,
``dot`` is already a bilinear form s W_k h; ``general`` adds a square W_g on top. The
two differ in parameterisation and initialisation, not in what they can express.

Whatever depends only on the annotations (U_a h_j + b_a, or W_k h_j) is computed once
per sentence by :meth:`Attention.keys`, not once per target word.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """Upcast half precision (mixed-precision runs) for softmax; leave fp32/fp64 alone."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def masked_softmax(e: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Step 2: softmax of scores e over their last dimension (source words), in fp32 or better,
    where `real` (broadcast against e) is True; padding gets exactly zero weight."""
    return torch.softmax(at_least_fp32(e.masked_fill(~real, float("-inf"))), dim=-1)


class Attention(nn.Module):
    """The alignment model of one decoder: `score` is additive, dot, general or scaled_dot.

    `state_size` is n (the decoder state s_{i-1}), `annotation_size` 2n (h_j), `align_size`
    n' (the additive model's hidden layer; the dot forms ignore it). Call `keys` once per
    sentence, then the module itself once per target word.
    """

    def __init__(self, score: str, state_size: int, annotation_size: int, align_size: int):
        super().__init__()
        self.score = score
        if score == "additive":
            self.W_a = nn.Linear(state_size, align_size, bias=False)
            self.U_a = nn.Linear(annotation_size, align_size)
            self.v_a = nn.Linear(align_size, 1, bias=False)
        elif score in ("dot", "general", "scaled_dot"):
            self.W_k = nn.Linear(annotation_size, state_size, bias=False)
            if score == "general":
                self.W_g = nn.Linear(state_size, state_size, bias=False)
        else:
            raise ValueError(f"unknown score function {score!r}")
        self.scale = 1.0 / math.sqrt(state_size) if score == "scaled_dot" else 1.0

    def keys(self, annotations: torch.Tensor) -> torch.Tensor:
        """(batch, src_len, 2n) -> precomputed keys (batch, src_len, n' or n)."""
        return self.U_a(annotations) if self.score == "additive" else self.W_k(annotations)

    def additive(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """v_aᵀ tanh(W_a s_{i-1} + U_a h_j + b_a) over the last dimension: `query` (W_a s_{i-1}) and
        `keys` (U_a h_j + b_a) broadcast against each other (one state against a sentence's keys,
        or several). Speed: engine/accel/ takes tanh x = 2σ(2x) − 1 on CPUs (the same function)."""
        return self.v_a(torch.tanh(query + keys)).squeeze(-1)

    def scores(self, state: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """e_ij for one decoder step: state (batch, n), keys (batch, src_len, ·) -> (batch, src_len)."""
        if self.score == "additive":
            return self.additive(self.W_a(state).unsqueeze(1), keys)
        query = self.W_g(state) if self.score == "general" else state
        return torch.bmm(keys, query.unsqueeze(-1)).squeeze(-1) * self.scale

    def scores_all(self, states: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """e for every step at once: states (batch, T, n), keys (batch, src_len, ·) -> (batch, T, src_len)."""
        if self.score == "additive":
            return self.additive(self.W_a(states).unsqueeze(2), keys.unsqueeze(1))
        query = self.W_g(states) if self.score == "general" else states
        return torch.bmm(query, keys.transpose(1, 2)) * self.scale

    def weights_all(self, states: torch.Tensor, keys: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """Softmax over real source words of :meth:`scores_all`: (batch, T, src_len), fp32 or better."""
        return masked_softmax(self.scores_all(states, keys), src_mask.unsqueeze(1))

    def weights(self, state: torch.Tensor, keys: torch.Tensor, src_mask: torch.Tensor,
                dtype: torch.dtype) -> torch.Tensor:
        """Steps 1 and 2: α_i (batch, src_len) in `dtype`, normalised in fp32 or better.

        src_mask (batch, src_len) is True on real words; padding gets exactly zero weight.
        """
        return masked_softmax(self.scores(state, keys), src_mask).to(dtype)

    def forward(self, state: torch.Tensor, keys: torch.Tensor, annotations: torch.Tensor,
                src_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Context c_i (batch, 2n) and weights α_i (batch, src_len) for one decoder step."""
        alpha = self.weights(state, keys, src_mask, annotations.dtype)
        context = torch.bmm(alpha.unsqueeze(1), annotations).squeeze(1)  # step 3: Σ_j α_ij h_j
        return context, alpha

