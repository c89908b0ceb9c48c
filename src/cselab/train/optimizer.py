"""The optimiser update: AdamW with its schedule, gradient clipping without a host sync, and the
gradient scaler that fp16 training needs on a GPU."""
from __future__ import annotations

import logging

import torch
from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup
from transformers.trainer_pt_utils import get_parameter_names

from cselab.config import OptimConfig
from cselab.errors import TrainingError

log = logging.getLogger("cselab.train")


def parameter_groups(trainable: torch.nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's parameter groups as BERT and Hugging Face's Trainer make them: weight decay on the weight
    matrices only, none on biases and LayerNorm weights (decaying a normalisation's gain or a bias
    towards 0 only hurts). The names come from transformers' own helper, so the rule is the Trainer's."""
    decayed = {name for name in get_parameter_names(trainable, [torch.nn.LayerNorm]) if "bias" not in name}
    named = [(name, p) for name, p in trainable.named_parameters() if p.requires_grad]
    groups = [{"params": [p for name, p in named if name in decayed], "weight_decay": weight_decay},
              {"params": [p for name, p in named if name not in decayed], "weight_decay": 0.0}]
    return [group for group in groups if group["params"]]


def make_optimizer(trainable: torch.nn.Module, optim: OptimConfig, total_steps: int):
    """AdamW (the fused kernel where available) with transformers' warm-up + linear/constant schedule."""
    groups = parameter_groups(trainable, optim.weight_decay)
    try:
        optimizer = torch.optim.AdamW(groups, lr=optim.lr, fused=True)
    except (RuntimeError, TypeError):
        optimizer = torch.optim.AdamW(groups, lr=optim.lr)
    warmup = int(optim.warmup_ratio * total_steps)
    if optim.schedule == "constant":
        return optimizer, get_constant_schedule_with_warmup(optimizer, warmup)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total_steps)


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
    are expected, so their non-finite gradient norm is not a fault (``overflow_is_fault``). The
    schedule advances with the updates applied, as in Hugging Face's Trainer: a skipped one leaves it
    where it is. Whether AdamW stepped is known from its step hook, so no value is read back.
    """

    def __init__(self, optimizer, scheduler, parameters: list[torch.nn.Parameter], max_norm: float,
                 scaler: torch.amp.GradScaler | None = None):
        self.optimizer, self.scheduler, self.parameters = optimizer, scheduler, parameters
        self.max_norm, self.scaler = max_norm, scaler
        self.overflow_is_fault = scaler is None
        self.warned_scale = False
        self.stepped = False  # set by the optimiser's own step: the scaler skips it after an overflow
        self.moments_left_out = False  # restored from a finished run's checkpoint, which has no AdamW state
        optimizer.register_step_post_hook(self._applied)

    def _applied(self, *_) -> None:
        self.stepped = True

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss if self.scaler is None else self.scaler.scale(loss)

    def __call__(self) -> torch.Tensor:
        """Apply the update; returns the gradients' norm (before clipping), on the device."""
        if self.moments_left_out:
            raise TrainingError("the checkpoint this run resumed from is a finished run's, kept without the "
                                "optimiser's state (train.keep_optimizer_state: false); it cannot train further: "
                                "start a new run (--no-resume, or another train.output_dir)")
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        norm = clip_gradients(self.parameters, self.max_norm)
        self.stepped = False
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.stepped:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm

    def lr(self) -> float:
        return self.scheduler.get_last_lr()[0]

    def state_dict(self) -> dict:
        """AdamW's moments and step counts, the schedule's position and (fp16) the loss scale."""
        return {"optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "scaler": None if self.scaler is None else self.scaler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        # A finished run's last checkpoint has no AdamW state (RunState.save, train.keep_optimizer_state): it takes no
        # more steps, and one that would is stopped in __call__ rather than go on with fresh moments.
        self.moments_left_out = state["optimizer"] is None
        if not self.moments_left_out:
            self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])

    def check_loss_scale(self, step: int) -> None:
        """At a log window (it reads the scale back): fp16's loss scale halves on every step whose
        gradients overflow, and those steps are skipped. Below 1 the gradients overflow fp16 even
        unscaled: a warning once; below 2**-16 (16 more skipped steps at least) the run no longer
        trains, a TrainingError."""
        if self.scaler is None or not self.scaler.is_enabled():
            return
        scale = self.scaler.get_scale()
        if scale >= 1.0:
            return
        message = (f"train.precision fp16: the loss scale fell to {scale:.3g} by step {step} (halved at every step "
                   f"whose gradients overflow fp16, and those steps are skipped); use train.precision=bf16 (or "
                   f"fp32) or lower optim.lr")
        if scale < COLLAPSED_SCALE:
            raise TrainingError(message)
        if not self.warned_scale:
            self.warned_scale = True
            log.warning(message)


COLLAPSED_SCALE = 2.0 ** -16


def gradient_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler | None:
    """fp16 autocast on a GPU needs loss scaling (bf16 and fp32 do not)."""
    return torch.amp.GradScaler(device.type) if precision == "fp16" and device.type == "cuda" else None
