"""Data-parallel training with PyTorch DDP, launched by torchrun.

    torchrun --nproc_per_node=4 -m rnnsearch train CONFIG            # one machine, 4 GPUs
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST:29500 -m rnnsearch train CONFIG    # two machines

Every rank builds the same list of global batches (seeded by epoch) and takes every
world-th sentence of each, so a global batch is exactly the batch a single process would
train on, whatever the number of ranks; resuming with another number of ranks works the
same way. Each rank's summed loss is divided by the global batch's token count and
multiplied by the world size, so DDP's gradient average equals the single-process
gradient. Only rank 0 validates and writes logs and checkpoints; its decisions (best
score, learning rate, early stop) are broadcast to the others.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

import torch
import torch.distributed as dist

from rnnsearch.io import DataError


@dataclass
class Context:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def resolve_device(name: str = "auto") -> torch.device:
    """The device a name means: "auto" is the GPU where there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def setup(device_name: str) -> tuple[Context, torch.device]:
    """Join the process group torchrun set up (if any) and pick this rank's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return Context(), resolve_device(device_name)
    ctx = Context(int(os.environ["RANK"]), world, int(os.environ.get("LOCAL_RANK", "0")))
    use_cuda = torch.cuda.is_available() and device_name in ("auto", "cuda")
    if use_cuda:
        torch.cuda.set_device(ctx.local_rank)
        device = torch.device("cuda", ctx.local_rank)
    else:
        device = torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
    return ctx, device


def shard(items: list, ctx: Context) -> tuple[list, bool]:
    """This rank's share of a global batch; (items, real). A rank left with nothing
    takes the first item with real=False (its loss is multiplied by 0): every rank must
    still take part in the gradient all-reduce."""
    mine = items[ctx.rank::ctx.world]
    return (mine, True) if mine else (items[:1], False)


def all_sum(values: list[float], ctx: Context, device: torch.device) -> list[float]:
    if not ctx.enabled:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


def broadcast(obj: Any, ctx: Context) -> Any:
    """Rank 0's object, on every rank."""
    if not ctx.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def on_main_rank(ctx: Context, work: Callable[[], Any]) -> Any:
    """`work()` on rank 0, its result on every rank; a DataError it raises is raised on every rank
    with the same message, so that no rank waits for one that has stopped."""
    result: Any = None
    error: Optional[DataError] = None
    if ctx.main:
        try:
            result = work()
        except DataError as e:
            error = e
    result, error = broadcast((result, error), ctx)
    if error is not None:
        raise error
    return result


def barrier(ctx: Context) -> None:
    if ctx.enabled:
        dist.barrier()


def weight_checksums(model: torch.nn.Module, ctx: Context) -> list[float]:
    """A checksum of the parameters from every rank (rank order), to confirm they agree."""
    with torch.no_grad():
        mine = float(sum(p.double().sum() + p.double().abs().sum() for p in model.parameters()))
    if not ctx.enabled:
        return [mine]
    out: list = [None] * ctx.world
    dist.all_gather_object(out, mine)
    return out


def cleanup(ctx: Context) -> None:
    if ctx.enabled and dist.is_initialized():
        # whatever still holds DDP's reducer through a reference cycle goes now, not at exit
        # after the group: a rank once aborted there ("terminate called without an active
        # exception") after a finished run, in a full test suite under load
        gc.collect()
        dist.barrier()  # no rank tears down gloo/NCCL while another is still inside a collective
        dist.destroy_process_group()
