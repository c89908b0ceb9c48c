"""Several processes: in-batch negatives across processes, and the mean gradient after backward.

With P processes of batch B, each process gathers the (P*B, d) embeddings of every role; its own
rows stay the live tensors (so gradients flow into its encoder), the others are constants. Every
process then computes the same loss over the global batch. Its own rows' gradient is multiplied by
P on the way back: averaged over processes, the encoder's gradients are then those of one batch of
P*B. Nothing else is scaled: a term's own parameters see the whole global loss on every process
(their average is that gradient), and a term over each process's own rows (MLM) averages to the
mean over processes.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from cselab.losses.base import LossInputs, scale_gradient


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_with_grad(local: torch.Tensor) -> torch.Tensor:
    """All processes' rows of ``local`` (same shape everywhere); this process's rows stay differentiable,
    their gradient multiplied by P (the module docstring says why). Integer rows (labels) are gathered
    as they are."""
    processes = world_size()
    if processes == 1:
        return local
    pieces = [torch.empty_like(local) for _ in range(processes)]
    dist.all_gather(pieces, local.detach().contiguous())
    pieces[dist.get_rank()] = scale_gradient(local, float(processes)) if local.is_floating_point() else local
    return torch.cat(pieces)


def gather_inputs(inputs: LossInputs) -> LossInputs:
    """The global batch's embeddings and labels by role; the MLM pass stays per process."""
    if world_size() == 1:
        return inputs
    gathered = {name: None if value is None else gather_with_grad(value)
                for name, value in (("anchor", inputs.anchor), ("positive", inputs.positive),
                                    ("negative", inputs.negative), ("label_view", inputs.label_view),
                                    ("negative_positive", inputs.negative_positive))}
    labels = None if inputs.labels is None else gather_with_grad(inputs.labels)
    return dataclasses.replace(inputs, labels=labels, **gathered)


def average_gradients(module: torch.nn.Module) -> None:
    """What DDP does after backward: every process ends with the mean gradient.

    One collective per dtype over a flat copy: a call per tensor pays the collective's latency a
    hundred times a step, which on CPU (gloo) costs more than the bytes themselves.
    """
    if world_size() == 1:
        return
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for p in module.parameters():
        if p.grad is not None:
            by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
    for grads in by_dtype.values():
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= world_size()
        for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(part.view_as(g))


def gather_objects(local: object) -> list:
    """Every process's ``local`` (picklable Python objects and CPU tensors), in rank order."""
    if world_size() == 1:
        return [local]
    gathered = [None] * world_size()
    dist.all_gather_object(gathered, local)
    return gathered
