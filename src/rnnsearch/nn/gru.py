"""The gated recurrent unit of the paper (Appendix A.1.1), in two variants.

    z_i = σ(W_z x_i + U_z h_{i-1} + b_z)
    r_i = σ(W_r x_i + U_r h_{i-1} + b_r)
    paper:  h̃_i = tanh(W x_i + U [r_i ∘ h_{i-1}] + b)          (reset before U)
    cudnn:  h̃_i = tanh(W x_i + b + r_i ∘ (U h_{i-1} + b_U))    (reset after U, torch.nn.GRU)
    h_i = (1 - z_i) ∘ h_{i-1} + z_i ∘ h̃_i

Both are GRUs; ``paper`` is the default because this project follows the paper.
``cudnn`` is the form fused GPU kernels implement. Note the update gate keeps the
paper's convention (z weights the *new* candidate); torch.nn.GRU uses 1 - z.

The input side ``W x_i + b`` does not depend on the recurrence, so callers compute it
for every time step in one matrix product and pass it to :meth:`GRU.cell`.

An encoder of the ``cudnn`` form runs through torch's fused GRU kernel (cuDNN on a GPU, ATen's
on a CPU) instead of a Python time loop: see :func:`fused_run`.
"""

from __future__ import annotations

import warnings
from typing import Optional, cast

import torch
from torch import nn


class GRU(nn.Module):
    """Weights of one GRU direction; gate order in the stacked matrices is [r, z, h̃].

    W: Linear(input_size -> 3*hidden) with the biases; U: Linear(hidden -> 3*hidden),
    biased only in the cudnn form (where b_U sits inside r ∘ (...)).
    """

    def __init__(self, input_size: int, hidden: int, variant: str = "paper"):
        super().__init__()
        self.hidden = hidden
        self.reset_after = variant == "cudnn"
        self.W = nn.Linear(input_size, 3 * hidden)
        self.U = nn.Linear(hidden, 3 * hidden, bias=self.reset_after)

    def recurrent(self) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """U split for one time loop: [U_r; U_z]ᵀ (n, 2n) and Uᵀ (n, n) (with the cudnn form,
        all of Uᵀ (n, 3n) and nothing). Taken once per sequence, not once per step: the
        backward of a slice taken inside the loop would zero-fill a full-size gradient every step."""
        if not isinstance(self.U, nn.Linear):  # int8 decoding (engine/decode/quantize.py) splits its own
            return self.U.recurrent()
        n = self.hidden
        if self.reset_after:
            return self.U.weight.t(), None
        u_rz, u_h = self.U.weight.split([2 * n, n])
        return u_rz.t(), u_h.t()

    def cell(self, x_proj: torch.Tensor, h: torch.Tensor,
             recurrent: Optional[tuple[torch.Tensor, Optional[torch.Tensor]]] = None) -> torch.Tensor:
        """One step. x_proj: (batch, 3*hidden) = W x_i + b; h: (batch, hidden) -> h_i.

        `recurrent` is :meth:`recurrent`, passed in by loops that take it once."""
        u_rz, u_h = self.recurrent() if recurrent is None else recurrent
        x_rz, x_h = x_proj.split([2 * self.hidden, self.hidden], -1)
        return gru_step(x_rz, x_h, h, u_rz, u_h, self.U.bias)

    def run(self, x_proj: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor,
            reverse: bool = False, state_dropout: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        """Run over a padded sequence.

        x_proj (batch, len, 3*hidden); mask (batch, len) True on real tokens; h0 (batch, hidden).
        Returns the states (batch, len, hidden) and the final state (batch, hidden).
        On padded steps the state is carried unchanged, so a backward pass over
        right-padded input starts from h0 at each sentence's own last word, and the
        final state of a forward pass is the state after the last real word.

        state_dropout (training only): the state carried into each step is multiplied by
        one dropout mask per sentence (variational), so what the RNN carries from earlier
        words is noisy and each state leans on its own word.
        """
        steps = range(x_proj.size(1) - 1, -1, -1) if reverse else range(x_proj.size(1))
        out: list[Optional[torch.Tensor]]
        h, out = h0, [None] * x_proj.size(1)
        xs, keep = x_proj.unbind(1), mask.unsqueeze(-1).unbind(1)  # views; cheap backward
        drop = None
        if state_dropout > 0 and self.training:
            drop = torch.bernoulli(h0.new_full(h0.shape, 1.0 - state_dropout)) / (1.0 - state_dropout)
        recurrent = self.recurrent()
        for t in steps:
            h_in = h if drop is None else h * drop
            h = torch.where(keep[t], self.cell(xs[t], h_in, recurrent), h)
            out[t] = h
        # every step above filled its slot: no None is left
        return torch.stack(cast("list[torch.Tensor]", out), 1), h


def gru_step(x_rz: torch.Tensor, x_h: torch.Tensor, h: torch.Tensor, u_rz: torch.Tensor,
             u_h: Optional[torch.Tensor], b_u: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The GRU step every path takes (one direction, or both stacked), the input side given.

    x_rz, x_h: W x_i + b split into its [r, z] and h̃ parts; h: the previous state, (batch, n),
    or (directions, batch, n) with the recurrent weights stacked the same way. The paper form
    takes u_rz = [U_r; U_z]ᵀ and u_h = Uᵀ; the cudnn form (u_h None) takes all of Uᵀ as u_rz and
    its bias b_u, and applies the reset gate after the product.
    """
    n = h.size(-1)
    if u_h is None:  # cudnn form: one product, split after
        hu_rz, hu_h = _affine(b_u, h, u_rz).split([2 * n, n], -1)
        r, z = torch.sigmoid(x_rz + hu_rz).chunk(2, -1)
        cand = torch.tanh(x_h + r * hu_h)
    else:
        r, z = torch.sigmoid(_affine(x_rz, h, u_rz)).chunk(2, -1)
        cand = torch.tanh(_affine(x_h, r * h, u_h))
    return h + z * (cand - h)  # = (1 - z) ∘ h + z ∘ h̃


def _affine(bias, h: torch.Tensor, w) -> torch.Tensor:
    """bias + h w in one fused product: addmm for one direction, baddbmm for stacked ones;
    `w` may also be a module applying the product (int8 decoding, engine/decode/quantize.py)."""
    if not isinstance(w, torch.Tensor):
        return w(h) if bias is None else bias + w(h)
    return torch.baddbmm(bias, h, w) if h.dim() == 3 else torch.addmm(bias, h, w)


def init_paper_(module: nn.Module) -> None:
    """Appendix B: recurrent matrices random orthogonal, alignment model N(0, 0.001²),
    v_a and biases zero, every other matrix N(0, 0.01²)."""
    for name, p in module.named_parameters():
        leaf = name.split(".")[-2] if "." in name else name
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif _is_recurrent(module, name):
            _orthogonal_gates_(p)
        elif leaf in ("W_a", "U_a"):
            nn.init.normal_(p, 0.0, 0.001)
        elif leaf == "v_a":
            nn.init.zeros_(p)
        else:
            nn.init.normal_(p, 0.0, 0.01)


def init_weights_(module: nn.Module, scheme: str = "paper", scale: float = 0.1) -> None:
    """Initialise every parameter of `module` by `scheme` (``model.init``):

    - ``paper``: Appendix B exactly (:func:`init_paper_`). With v_a = 0 every alignment score is 0
      and W_a, U_a get no gradient until v_a has grown; small N(0, 0.01²) weights shrink the
      signal layer by layer. Faithful, and slow to start.
    - ``uniform``: every weight and bias U(-scale, scale) (OpenNMT-py's ``param_init`` 0.1).
    - ``glorot``: matrices Glorot/Xavier-uniform, U(±√(6 / (fan_in + fan_out))), each gate's block
      of a stacked GRU matrix on its own; biases zero.
    - ``glorot_orthogonal``: as ``glorot``, but the recurrent gate blocks random orthogonal.
    """
    if scheme == "paper":
        init_paper_(module)
        return
    if scheme not in ("uniform", "glorot", "glorot_orthogonal"):
        raise ValueError(f"unknown initialisation {scheme!r}")
    for name, p in module.named_parameters():
        if scheme == "uniform":
            nn.init.uniform_(p, -scale, scale)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
        elif scheme == "glorot_orthogonal" and _is_recurrent(module, name):
            _orthogonal_gates_(p)
        else:
            owner = _owner(module, name)
            gates = 3 if isinstance(owner, GRU) else 1  # [r; z; h̃] stacked: one block per gate
            for block in p.data.chunk(gates, 0):
                nn.init.xavier_uniform_(block)


def _is_recurrent(root: nn.Module, name: str) -> bool:
    """Whether parameter `name` is a GRU's recurrent matrix U."""
    return name.split(".")[-2:] == ["U", "weight"] and isinstance(_owner(root, name), GRU)


def _orthogonal_gates_(p: torch.Tensor) -> None:
    for block in p.data.chunk(3, 0):  # each n x n gate matrix orthogonal
        nn.init.orthogonal_(block)


def _owner(root: nn.Module, param_name: str) -> nn.Module:
    mod = root
    for part in param_name.split(".")[:-2]:
        mod = getattr(mod, part)
    return mod


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
    drop = None
    if state_dropout > 0 and fwd.training:
        drop = torch.bernoulli(h.new_full(h.shape, 1.0 - state_dropout)) / (1.0 - state_dropout)
    out = []
    for xt_rz, xt_h, keep_t in zip(x_rz.unbind(2), x_h.unbind(2), keep.unbind(2)):  # views; cheap backward
        h_in = h if drop is None else h * drop
        h = torch.where(keep_t, gru_step(xt_rz, xt_h, h_in, U_rz, U_h, bias), h)
        out.append(h)
    states = torch.stack(out, 2)  # (2, B, S, n)
    return states[0], states[1].flip(1)
