"""The encoder's GRUs, fast: torch's fused kernel for the cudnn form, both directions in one loop
for the paper's. The plain path is nn/model.py's ``plain_birnn`` / ``plain_forward_rnn`` (one
:meth:`GRU.run` loop a direction); these compute the same states (tests/test_accel.py).

Why the private ``torch._VF.gru``: it is the function ``torch.nn.GRU`` itself calls, and the only
entry that takes weights as a list of tensors made on the fly. ``torch.nn.GRU`` owns its weights
as parameters under its own names; ours are the paper's (W, U with the update gate z weighing the
new candidate), and the z rows must enter negated (below), so the module would have to copy them
into its parameters every call and lose their gradient. The call's signature has been the same
from torch 2.4 (the oldest the project accepts: docs/robustness.md) to 2.13; the tests run it
against the plain loop in value and gradient, so a change fails there, not in a user's run.
"""

from __future__ import annotations

import warnings

import torch

from rnnsearch.nn.gru import GRU, gru_step, state_mask


def can_fuse(gru: GRU, mask: torch.Tensor, state_dropout: float = 0.0) -> bool:
    """Whether :func:`fused_run` applies: the cudnn form, no state dropout in training (the fused
    kernel has none), right-padded input with at least one word per sentence."""
    if not gru.reset_after or (state_dropout > 0 and gru.training) or mask.size(1) == 0:
        return False
    lengths = mask.sum(1)
    return bool(lengths.min() > 0) and bool(
        (mask == (torch.arange(mask.size(1), device=mask.device) < lengths[:, None])).all())


def fused_run(grus: list[GRU], x: torch.Tensor,
              mask: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """One GRU (forward) or two (forward, backward) of the cudnn form over x (batch, len, input)
    in torch's fused kernel, on packed sequences so each sentence stops at its own last word.

    The same equations as :meth:`GRU.run`: torch's gates are [r, z, n] like ours, but its update
    gate z' weighs the *old* state (h_i = (1 - z') ∘ h̃_i + z' ∘ h_{i-1}), so z' = 1 - z, and the z
    rows of our weights and biases enter negated (σ(-a) = 1 - σ(a)). Returns each direction's
    states (batch, len, hidden), zero on padding (which attention masks), and final states
    (batch, hidden).
    """
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    n = grus[0].hidden
    sign = torch.ones(3 * n, dtype=x.dtype, device=x.device)
    sign[n:2 * n] = -1
    weights = []
    for g in grus:
        weights += [g.W.weight * sign[:, None], g.U.weight * sign[:, None], g.W.bias * sign, g.U.bias * sign]
    lengths = mask.sum(1).cpu()
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    h0 = x.new_zeros(len(grus), x.size(0), n)
    with warnings.catch_warnings():
        # cuDNN copies weights that are not one flat buffer into one, every call, and warns; ours
        # are made afresh each call (the z rows negated), so that copy (a few MB) is intended
        warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous")
        out, h_n = torch._VF.gru(packed.data, packed.batch_sizes, h0, weights, True, 1, 0.0, grus[0].training,
                                 len(grus) == 2)
    states, _ = pad_packed_sequence(packed._replace(data=out), batch_first=True, total_length=x.size(1))
    finals = h_n.index_select(1, packed.unsorted_indices) if packed.unsorted_indices is not None else h_n
    return list(states.split(n, -1)), list(finals.unbind(0))


def run_bidirectional(fwd: GRU, bwd: GRU, x: torch.Tensor, mask: torch.Tensor,
                      state_dropout: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Both directions of a bidirectional GRU in one time loop (half the Python steps).

    x (batch, len, input); mask (batch, len) True on real tokens. Step t advances the
    forward GRU on word t and the backward GRU on word len-1-t together: their states
    are stacked as (2, batch, hidden) and multiplied by their own U in one batched
    product. Same results as ``fwd.run`` and ``bwd.run(reverse=True)`` separately.
    Returns forward and backward states, each (batch, len, hidden). The cudnn form goes
    through the fused kernel where :func:`can_fuse` allows.
    """
    if can_fuse(fwd, mask, state_dropout):
        (f, b), _ = fused_run([fwd, bwd], x, mask)
        return f, b
    B, S, _ = x.shape
    n = fwd.hidden
    xs = torch.stack([fwd.W(x), bwd.W(x).flip(1)])  # (2, B, S, 3n): backward in its reading order
    keep = torch.stack([mask, mask.flip(1)]).unsqueeze(-1)  # (2, B, S, 1)
    U = torch.stack([fwd.U.weight, bwd.U.weight]).transpose(1, 2)  # (2, n, 3n)
    # split once, outside the loop (a slice's backward inside it would zero-fill every step)
    x_rz, x_h = xs.split([2 * n, n], -1)
    bias, U_rz, U_h = None, U, None  # the cudnn form: all of U and its bias
    if fwd.reset_after:
        bias = torch.stack([fwd.U.bias, bwd.U.bias]).unsqueeze(1)
    else:
        U_rz, U_h = U.split([2 * n, n], -1)
    h = x.new_zeros(2, B, n)
    drop = state_mask(h, state_dropout if fwd.training else 0.0)
    out = []
    for xt_rz, xt_h, keep_t in zip(x_rz.unbind(2), x_h.unbind(2), keep.unbind(2)):  # views; cheap backward
        h_in = h if drop is None else h * drop
        h = torch.where(keep_t, gru_step(xt_rz, xt_h, h_in, U_rz, U_h, bias), h)
        out.append(h)
    states = torch.stack(out, 2)  # (2, B, S, n)
    return states[0], states[1].flip(1)


def forward_rnn(gru: GRU, x: torch.Tensor, mask: torch.Tensor, state_dropout: float = 0.0) -> torch.Tensor:
    """RNNencdec's h_Tx (B, n) through the fused kernel where :func:`can_fuse` allows, else the loop."""
    if can_fuse(gru, mask, state_dropout):
        _, (last,) = fused_run([gru], x, mask)
        return last
    _, last = gru.run(gru.W(x), mask, x.new_zeros(x.size(0), gru.hidden), state_dropout=state_dropout)
    return last
