"""The optimiser step's parts: AdamW with its schedule, and gradient clipping without a host sync."""
from __future__ import annotations

import torch

from cselab.config import Config


def make_optimizer(trainable: torch.nn.Module, config: Config, total_steps: int):
    """AdamW (the fused kernel where available) and the warm-up + linear/constant schedule."""
    parameters = [p for p in trainable.parameters() if p.requires_grad]
    settings = {"lr": config.optim.lr, "weight_decay": config.optim.weight_decay}
    try:
        optimizer = torch.optim.AdamW(parameters, fused=True, **settings)
    except (RuntimeError, TypeError):
        optimizer = torch.optim.AdamW(parameters, **settings)
    warmup = int(config.optim.warmup_ratio * total_steps)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if config.optim.schedule == "constant":
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def clip_gradients(parameters: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """The gradients' total norm, after scaling them to at most ``max_norm`` (0: no clipping).

    The same coefficient as ``clip_grad_norm_`` (max_norm / (norm + 1e-6), clamped to 1), applied on
    the device whatever the norm: deciding on the host whether to clip would read the norm back
    every step. A coefficient of 1 leaves the gradients bit for bit as they were.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads)
    if max_norm:
        torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return norm
