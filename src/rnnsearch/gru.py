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
"""

from __future__ import annotations

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

    def cell(self, x_proj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One step. x_proj: (batch, 3*hidden) = W x_i + b; h: (batch, hidden) -> h_i."""
        n = self.hidden
        if self.reset_after:
            hu = self.U(h)
            rz = torch.sigmoid(x_proj[:, : 2 * n] + hu[:, : 2 * n])
            r, z = rz[:, :n], rz[:, n:]
            cand = torch.tanh(x_proj[:, 2 * n:] + r * hu[:, 2 * n:])
        else:
            u = self.U.weight
            rz = torch.sigmoid(x_proj[:, : 2 * n] + h @ u[: 2 * n].t())
            r, z = rz[:, :n], rz[:, n:]
            cand = torch.tanh(x_proj[:, 2 * n:] + (r * h) @ u[2 * n:].t())
        return h + z * (cand - h)  # = (1 - z) ∘ h + z ∘ h̃

    def run(self, x_proj: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor,
            reverse: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Run over a padded sequence.

        x_proj (batch, len, 3*hidden); mask (batch, len) True on real tokens; h0 (batch, hidden).
        Returns the states (batch, len, hidden) and the final state (batch, hidden).
        On padded steps the state is carried unchanged, so a backward pass over
        right-padded input starts from h0 at each sentence's own last word, and the
        final state of a forward pass is the state after the last real word.
        """
        steps = range(x_proj.size(1) - 1, -1, -1) if reverse else range(x_proj.size(1))
        h, out = h0, [None] * x_proj.size(1)
        keep = mask.unsqueeze(-1)
        for t in steps:
            h = torch.where(keep[:, t], self.cell(x_proj[:, t], h), h)
            out[t] = h
        return torch.stack(out, 1), h


def init_paper_(module: nn.Module) -> None:
    """Appendix B: recurrent matrices random orthogonal, alignment model N(0, 0.001²),
    v_a and biases zero, every other matrix N(0, 0.01²)."""
    for name, p in module.named_parameters():
        leaf = name.split(".")[-2] if "." in name else name
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif leaf == "U" and isinstance(_owner(module, name), GRU):
            for block in p.data.chunk(3, 0):  # each n x n gate matrix orthogonal
                nn.init.orthogonal_(block)
        elif leaf in ("W_a", "U_a"):
            nn.init.normal_(p, 0.0, 0.001)
        elif leaf == "v_a":
            nn.init.zeros_(p)
        else:
            nn.init.normal_(p, 0.0, 0.01)


def _owner(root: nn.Module, param_name: str) -> nn.Module:
    mod = root
    for part in param_name.split(".")[:-2]:
        mod = getattr(mod, part)
    return mod
