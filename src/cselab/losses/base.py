"""The step -> objective hand-off: what a loss term receives, declares and returns.

Every term is an ``nn.Module`` whose ``forward(inputs: LossInputs)`` returns ``(loss, logs)``: a
scalar tensor and a dict of detached scalar tensors to log. Logs stay on the device; the training
loop reads them back once per log window, so a term never forces the host to wait for the GPU.
Each term declares in ``needs`` the fields of ``LossInputs`` it cannot do without (hard negatives
are read when a step has them); a recipe whose views cannot provide them fails before training, and
the step computes only what some term reads (no contrastive pass for MLM alone).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass
class MaskedTokens:
    """The MLM pass of a step: the encoder's MLM head over the masked positions, and what they were.

    logits: (K, V) the backbone's own MLM head (``model/mlm_head.py``) at the K masked positions;
    labels: (K,) the original token ids.
    """

    logits: torch.Tensor
    labels: torch.Tensor


@dataclass
class LossInputs:
    """Embeddings of one training step by role, rows aligned with the anchors.

    anchor, positive: (N, d) after the training head. negative: (M, d) hard negatives of the first M
    anchors. label_view: (N, d) each anchor's augmented text (AugCSE); labels: (N,) its augmentation
    type (0 = unchanged). masked: the MLM pass (CLEAR, pre-training). negative_positive: (M, d) a second
    encoding of each hard negative (its own dropout view, rows aligned with ``negative``), only on steps
    with hard negatives and only when some term wants it (UNA's 4N NT-Xent). An objective of MLM alone
    gets no embeddings at all (the step skips the contrastive forward pass).
    """

    anchor: torch.Tensor | None = None
    positive: torch.Tensor | None = None
    negative: torch.Tensor | None = None
    label_view: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    masked: MaskedTokens | None = None
    negative_positive: torch.Tensor | None = None


class LossTerm(Protocol):
    """An objective term: reads the ``needs`` fields of the inputs, returns (loss, detached logs).

    A term may also declare ``wants``: fields it reads when the step has them (hard negatives exist on
    UNA's steps only). The step builds ``negative_positive`` (M more encoded rows) only when some term
    of the objective wants it; a term without ``wants`` wants nothing optional.
    """

    needs: frozenset[str]
    # The BibTeX of the paper whose objective this is (cselab/citations.py); "" where none defines it.
    citation: str = ""

    def parameters(self): ...

    def __call__(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.factor * grad, None


def scale_gradient(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Identity forward; backward multiplies the gradient by ``factor`` (gradient reversal: a
    negative factor; the gather across processes: their number)."""
    return _ScaleGradient.apply(x, factor)


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Share of rows whose highest logit is the target, as a detached tensor (no host sync)."""
    return (logits.detach().argmax(dim=-1) == targets).float().mean()
