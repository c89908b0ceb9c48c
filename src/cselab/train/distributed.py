"""In-batch negatives across processes: gather every process's embeddings, keep local gradients.

With P processes of batch B, each process gathers the (P*B, d) embeddings of every role; its own
rows stay the live tensors (so gradients flow into its encoder), the others are constants. Every
process then computes the same loss over the global batch; multiplying it by P undoes DDP's
gradient averaging, so P processes x batch B give the gradients of one batch of P*B.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from cselab.losses.base import StepOutputs


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather_with_grad(local: torch.Tensor) -> torch.Tensor:
    """All processes' rows of ``local`` (same shape everywhere), this process's rows differentiable."""
    if world_size() == 1:
        return local
    pieces = [torch.empty_like(local) for _ in range(world_size())]
    dist.all_gather(pieces, local.detach().contiguous())
    pieces[dist.get_rank()] = local
    return torch.cat(pieces)


def gather_outputs(outputs: StepOutputs) -> StepOutputs:
    """The global batch's outputs by role; ``extra`` tensors of per-row data are gathered too."""
    if world_size() == 1:
        return outputs
    extra = dict(outputs.extra)
    for key in ("label_view", "labels"):
        if key in extra and torch.is_tensor(extra[key]):
            extra[key] = gather_with_grad(extra[key]) if extra[key].is_floating_point() else _gather_plain(extra[key])
    return StepOutputs(
        anchor=gather_with_grad(outputs.anchor),
        positive=None if outputs.positive is None else gather_with_grad(outputs.positive),
        negative=None if outputs.negative is None else gather_with_grad(outputs.negative),
        extra=extra,
    )


def _gather_plain(local: torch.Tensor) -> torch.Tensor:
    pieces = [torch.empty_like(local) for _ in range(world_size())]
    dist.all_gather(pieces, local.contiguous())
    return torch.cat(pieces)
