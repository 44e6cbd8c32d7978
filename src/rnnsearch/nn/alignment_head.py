"""The alignment head (``model.alignment_head``; not in the paper): a second alignment model whose
weights give the links, beside the paper's attention.

α_i is scored from s_{i-1}, before the decoder has read y_{i-1}, let alone y_i: the attention has
to place its weight before it knows which word it will emit. The first state to have read y_i is
s_{i+1} (s_i = f(s_{i-1}, y_{i-1}, c_i)). The head is a second alignment model of the same score
function (nn/attention.py),

    β_i = softmax_j a'(s_{i+1}, h_j)        for every target word y_i         (``past``)

computed after the teacher-forced loop from the states it already made (the state after the
</s> step has read the last word, so every word has its row). It feeds nothing into the
translation; train.guided_alignment teaches it a word aligner's links (engine/train/guided.py) while the
attention stays the paper's, unsupervised, and links are read from β when the model has it.

s_{i+1} has read y_1 .. y_i but none of the words after y_i, which a word aligner sees (which of two
"the"s is this one?). With ``future`` the head's query is [s_{i+1}; r_i], r_i the state of a
backward GRU over the target embeddings that has read y_{T-1} .. y_i: the whole target sentence,
as Garg et al. (2019) let their alignment layer see it. It reads the embeddings detached: the
head's loss trains the backward GRU, not the words the translation uses. Links come from a forced
pass over a finished translation, so the future is always there to read.

With ``+refine`` the head's scores of a whole sentence pair take a second look (`ScoreRefiner`): a
small convolution over the (target, source) grid of its row and column softmaxes adds what a word
aligner sees around a link, its diagonal neighbours and whether the source word picks this target
word back.

The head's tensors keep the state-dict names models trained before saved them under
(``align_future.*``, ``align_head.*``, ``align_refine.*``): the model registers
:func:`saved_names` and :func:`module_names` as its state-dict hooks.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from rnnsearch.config import ALIGNMENT_HEADS
from rnnsearch.nn.attention import Attention, at_least_fp32, masked_softmax
from rnnsearch.nn.gru import GRU

KINDS = ALIGNMENT_HEADS  # model.alignment_head's values


class ScoreRefiner(nn.Module):
    """A second look at a whole alignment matrix (``+refine``).

    An additive score e_ij weighs target word i against source word j alone. A word aligner also
    looks around a link: its neighbours on the diagonal (i±1, j±1) and whether j, too, has i for its
    best target word (what symmetrising two directions adds). Given the scores of every pair of a
    sentence pair at once, the refiner adds that view:

        β = softmax_j e            γ = softmax_i e         (over real words only)
        e'_ij = e_ij + Conv₂(tanh Conv₁[β; γ; β ⊙ γ])_ij

    two `width` × `width` convolutions over the (target, source) grid, `channels` wide in between.
    Conv₂ starts at zero, so a new refiner leaves the scores as they were. Outside the real words
    both layers read zeros, so a pair scores the same alone and padded in a batch.
    """

    def __init__(self, channels: int = 16, width: int = 5):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, width, padding=width // 2)
        self.conv2 = nn.Conv2d(channels, 1, width, padding=width // 2)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.conv1.reset_parameters()
        nn.init.zeros_(self.conv2.weight)
        nn.init.zeros_(cast(torch.Tensor, self.conv2.bias))

    def forward(self, e: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """e (B, T, S) scores, src_mask (B, S) and tgt_mask (B, T) True on real words -> e' (B, T, S);
        padded cells read as zero and leave the real ones' views unchanged."""
        real = tgt_mask.unsqueeze(2) & src_mask.unsqueeze(1)
        low = at_least_fp32(e).masked_fill(~real, -1e9)  # a padded row or column softmaxes to 0 after
        beta = torch.softmax(low, 2) * real
        gamma = torch.softmax(low, 1) * real
        grid = torch.stack([beta, gamma, beta * gamma], 1).to(e.dtype)  # (B, 3, T, S)
        hidden = torch.tanh(self.conv1(grid)) * real.unsqueeze(1).to(e.dtype)  # the borders: zero, as padding
        return e + self.conv2(hidden).squeeze(1)


class AlignmentHead(nn.Module):
    """β (module docstring) for a `kind` of :data:`KINDS` other than "none".

    `state_size` n, `emb_size` m (the target embeddings r_i reads), `annotation_size` 2n (h_j),
    `score`, `align_size` and `gru` as the model's attention and decoder have them.
    """

    def __init__(self, kind: str, score: str, state_size: int, emb_size: int, annotation_size: int,
                 align_size: int, gru: str):
        super().__init__()
        if kind not in KINDS[1:]:
            raise ValueError(f"unknown alignment head {kind!r} (one of {', '.join(KINDS[1:])})")
        # built in this order, the order of models trained before: their initialisation draws alike
        self.future = GRU(emb_size, state_size, gru) if kind.startswith("future") else None  # r_i
        query = 2 * state_size if self.future is not None else state_size
        self.attention = Attention(score, query, annotation_size, align_size)  # a'
        self.refine = ScoreRefiner() if kind.endswith("+refine") else None  # β's second look

    def init_refiner_(self) -> None:
        """The refiner back to its own initialisation (after the model's scheme has set every
        weight): it starts as the head without it (`ScoreRefiner`)."""
        if self.refine is not None:
            self.refine.reset_parameters()

    def forward(self, annotations: torch.Tensor, src_mask: torch.Tensor, new_states: torch.Tensor,
                y_emb: torch.Tensor, tgt_mask: torch.Tensor) -> torch.Tensor:
        """β (B, T, S): row i from s_{i+1}, the state after step i+1, which has read y_i, and with
        ``future`` from r_i as well; the last row (</s>) zero.

        annotations (B, S, 2n), src_mask (B, S); new_states (B, T, n) s_1 .. s_T of the
        teacher-forced loop; y_emb (B, T, m) and tgt_mask (B, T) (True on real words) of its input
        <s> y_1 .. y_{T-1}."""
        query, real = new_states[:, 1:], tgt_mask[:, 1:]
        if self.future is not None:  # r_i: y_{T-1} .. y_i read right to left (y_emb[:, 0] is <s>)
            # detached: the head reads the target embeddings but leaves them to the translation loss
            gru, words = self.future, y_emb[:, 1:].detach()
            start = words.new_zeros(words.size(0), gru.hidden)
            future, _ = gru.run(gru.W(words), real, start, reverse=True)
            query = torch.cat([query, future], -1)
        keys = self.attention.keys(annotations)
        e = self.attention.scores_all(query, keys)
        if self.refine is not None:
            e = self.refine(e, src_mask, real)
        rows = masked_softmax(e, src_mask.unsqueeze(1))
        return torch.cat([rows, rows.new_zeros(rows.size(0), 1, rows.size(2))], 1)


# The head's parts in the state dict of the model that owns it as `align_head`: saved as models
# trained before named them (the first parts of the keys), and named here as the module holds them.
_SAVED = {"align_future.": "align_head.future.", "align_head.": "align_head.attention.",
          "align_refine.": "align_head.refine."}
_PARTS = ("future.", "attention.", "refine.")


def saved_names(module: nn.Module, state_dict: dict[str, Any], prefix: str, local_metadata: Any) -> None:
    """State-dict post-hook of the model: its head's keys renamed as models trained before saved them
    (``align_head.future.W.weight`` -> ``align_future.W.weight``), in place and in order."""
    for key in [k for k in state_dict if k.startswith(prefix + "align_head.")]:
        rest = key[len(prefix):]
        saved, held = next((s, h) for s, h in _SAVED.items() if rest.startswith(h))
        state_dict[prefix + saved + rest[len(held):]] = state_dict.pop(key)


def module_names(module: nn.Module, state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
    """Load-state-dict pre-hook of the model: the saved names (:func:`saved_names`) back to the
    head's own, so that ``load_state_dict`` finds every tensor."""
    for key in list(state_dict):
        rest = key[len(prefix):] if key.startswith(prefix) else ""
        saved = next((s for s in _SAVED if rest.startswith(s)), None)
        if saved is None or (saved == "align_head." and rest[len(saved):].startswith(_PARTS)):
            continue  # not the head's, or already named as the module holds it
        state_dict[prefix + _SAVED[saved] + rest[len(saved):]] = state_dict.pop(key)

