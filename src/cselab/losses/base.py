"""What every objective term receives and returns."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass
class StepOutputs:
    """Embeddings of one training step, by role (rows aligned with the anchors).

    anchor, positive: (N, d) after the training head. negative: (M, d) hard negatives for the
    first M anchors, or None. extra: anything else a term needs (MLM logits, labels, ...).
    """

    anchor: torch.Tensor
    positive: torch.Tensor | None = None
    negative: torch.Tensor | None = None
    extra: dict = field(default_factory=dict)


class ObjectiveTerm(Protocol):
    """An ``nn.Module`` whose forward maps a step's outputs to (scalar loss, values to log)."""

    def __call__(self, outputs: StepOutputs) -> tuple[torch.Tensor, dict[str, float]]: ...
