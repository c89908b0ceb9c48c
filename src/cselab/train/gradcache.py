"""Cached contrastive loss (GradCache; Gao et al., 2021, "Scaling Deep Contrastive Learning Batch
Size under Memory Limited Setup"): large batches on little memory.

1. Encode the step's rows in chunks without gradient, remembering each chunk's RNG state.
2. Compute the loss on the detached embeddings and back-propagate to them only.
3. Re-encode each chunk with gradient under its remembered RNG state — the same dropout masks, so
   the two views of a sentence keep theirs — and push that chunk's embedding gradient through.
Peak activation memory is one chunk's instead of the whole batch's; the gradients are the same.
"""
from __future__ import annotations

from typing import Callable

import torch


class RngState:
    """The CPU (and CUDA) generator states at one moment, to replay a forward pass exactly."""

    def __init__(self):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


def _chunk(features: dict[str, torch.Tensor], start: int, stop: int) -> dict[str, torch.Tensor]:
    rows = {k: v[start:stop] for k, v in features.items()}
    # Trim the padding this chunk does not need (masked positions do not change the output).
    if "attention_mask" in rows:
        length = int(rows["attention_mask"].sum(dim=1).max().item())
        rows = {k: v[:, :length] if v.dim() == 2 else v for k, v in rows.items()}
    return rows


def grad_cache_backward(encode: Callable[[dict[str, torch.Tensor]], torch.Tensor],
                        features: dict[str, torch.Tensor], chunk_size: int,
                        loss_from_embeddings: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Back-propagate ``loss_from_embeddings(encode(features))`` chunk by chunk; returns the loss."""
    total = next(iter(features.values())).shape[0]
    bounds = [(start, min(start + chunk_size, total)) for start in range(0, total, chunk_size)]
    states, pieces = [], []
    with torch.no_grad():
        for start, stop in bounds:
            states.append(RngState())
            pieces.append(encode(_chunk(features, start, stop)))
    after_first_pass = RngState()
    embeddings = torch.cat(pieces).detach().requires_grad_(True)
    loss = loss_from_embeddings(embeddings)
    loss.backward()  # gradients of the loss's own parameters, and of the cached embeddings
    gradient = embeddings.grad
    for (start, stop), state in zip(bounds, states):
        state.restore()
        encode(_chunk(features, start, stop)).backward(gradient[start:stop])
    after_first_pass.restore()  # later randomness continues as if each chunk ran once
    return loss.detach()
