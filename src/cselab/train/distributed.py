"""Several processes: joining them, in-batch negatives across them, and the decisions they must share.

With P processes of batch B, each process gathers the (P*B, d) embeddings of every role with
torch's differentiable all-gather, so every process computes the same loss over the global batch.
Its backward sums each row's gradient over the processes (a reduce-scatter): as every process's
loss is the same, a process's own rows get P times that loss's gradient, and once
``DistributedDataParallel`` has averaged the parameters' gradients over the processes they are
those of one batch of P*B. Nothing else is scaled: a term's own parameters see the whole global
loss on every process (their average is that gradient), and a term over each process's own rows
(MLM) averages to the mean over processes.

What one process decides alone (to stop after a signal, which checkpoint to resume from) is
agreed with a collective here, so that no process waits in a collective the others never enter.
"""
from __future__ import annotations

import dataclasses
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import _functional_collectives as functional

from cselab.losses.base import LossInputs


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def join(device: torch.device, timeout_minutes: float) -> tuple[torch.device, int, int]:
    """Join the other processes a launcher (torchrun, ``accelerate launch``) started: (this process's
    device, rank, number of processes). One process started alone joins nothing. On GPUs each
    process takes the GPU of its local rank; ``timeout_minutes`` bounds how long a collective waits
    for a process that does not arrive (a rank evaluating or saving alone, a dead node) before
    the run fails instead of hanging."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 and not dist.is_initialized():
        return device, 0, 1
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo",
                                timeout=timedelta(minutes=timeout_minutes),
                                device_id=device if device.type == "cuda" else None)
    return device, dist.get_rank(), dist.get_world_size()


def local_processes() -> int:
    """How many processes of this run share this machine (torchrun's LOCAL_WORLD_SIZE)."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def gather_with_grad(local: torch.Tensor) -> torch.Tensor:
    """All processes' rows of ``local`` (same shape everywhere), in rank order. Floating-point rows
    stay differentiable (the module docstring says how their gradient comes back); integer rows
    (labels) are gathered as they are."""
    if world_size() == 1:
        return local
    if local.is_floating_point():
        # torch's differentiable all-gather (torch.distributed.nn.functional.all_gather's
        # replacement, as its deprecation warning names it): the backward is a reduce-scatter.
        return functional.all_gather_single(local.contiguous(), 0, dist.group.WORLD)
    pieces = [torch.empty_like(local) for _ in range(world_size())]
    dist.all_gather(pieces, local.contiguous())
    return torch.cat(pieces)


def gather_inputs(inputs: LossInputs) -> LossInputs:
    """The global batch's embeddings and labels by role; the MLM pass stays per process."""
    if world_size() == 1:
        return inputs
    gathered = {role: gather_with_grad(rows) for role, rows in inputs.views().items()}
    labels = None if inputs.labels is None else gather_with_grad(inputs.labels)
    return dataclasses.replace(inputs, labels=labels).with_views(gathered)


def local_rows(inputs: LossInputs) -> LossInputs:
    """This process's rows of the gathered views (each process holds an equal share, in rank order)."""
    if world_size() == 1:
        return inputs
    rank, size = dist.get_rank(), world_size()
    views = {role: rows[rank * (len(rows) // size):(rank + 1) * (len(rows) // size)]
             for role, rows in inputs.views().items()}
    return inputs.with_views(views)


def gather_objects(local: object) -> list:
    """Every process's ``local`` (picklable Python objects and CPU tensors), in rank order."""
    if world_size() == 1:
        return [local]
    gathered = [None] * world_size()
    dist.all_gather_object(gathered, local)
    return gathered


def from_main(value: object) -> object:
    """The main process's ``value`` on every process (the others pass anything, e.g. None)."""
    if world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def any_process(flag: bool, device: torch.device) -> bool:
    """True on every process when ``flag`` is true on any (a max all-reduce: NCCL needs a device tensor)."""
    if world_size() == 1:
        return flag
    agreed = torch.tensor([int(flag)], device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
    return bool(agreed.item())
