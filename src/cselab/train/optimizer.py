"""The optimiser update: AdamW with its schedule, gradient clipping without a host sync, and the
gradient scaler that fp16 training needs on a GPU."""
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


class OptimizerStep:
    """One update after the step's backward: unscale (fp16), clip, AdamW step, schedule, zero_grad.

    With ``scaler`` (fp16 on a GPU), the step's loss is scaled before backward (:meth:`scale`); an
    update whose gradients overflowed is skipped by the scaler, which lowers its scale: such steps
    are expected, so their non-finite gradient norm is not a fault (``overflow_is_fault``).
    """

    def __init__(self, optimizer, scheduler, parameters: list[torch.nn.Parameter], max_norm: float,
                 scaler: torch.amp.GradScaler | None = None):
        self.optimizer, self.scheduler, self.parameters = optimizer, scheduler, parameters
        self.max_norm, self.scaler = max_norm, scaler
        self.overflow_is_fault = scaler is None

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss if self.scaler is None else self.scaler.scale(loss)

    def __call__(self) -> torch.Tensor:
        """Apply the update; returns the gradients' norm (before clipping), on the device."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        norm = clip_gradients(self.parameters, self.max_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]


def gradient_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 autocast on a GPU needs loss scaling (bf16 and fp32 do not)."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" and device.type == "cuda" else None
