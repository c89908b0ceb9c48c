"""InfoNCE with in-batch negatives and an optional hard-negative column (SimCSE).

Gao, Yao & Chen, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", EMNLP 2021.
Inputs: ``anchor`` (N, d) and ``positive`` (N, d) — for unsupervised SimCSE, two dropout passes of
the same sentences — and optionally ``negative`` (M, d), hard negatives of the first M anchors.
Logits are cos(anchor_i, x_j) / temperature over all positives and negatives; the target of row i
is column i. ``hard_negative_weight`` is added to the logit of each anchor's own hard negative
(SimCSE's z3_weight: 0 leaves it an ordinary negative).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, accuracy


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T


@LOSSES.register("infonce", "SimCSE InfoNCE: in-batch negatives, optional hard-negative column")
class InfoNCELoss(LossTerm):
    citation = citations.SIMCSE
    needs = frozenset({"anchor", "positive"})
    wants = frozenset({"negative"})  # hard negatives when the step has them

    def __init__(self, temperature: float = 0.05, hard_negative_weight: float = 0.0):
        super().__init__()
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        self.temperature = temperature
        self.hard_negative_weight = hard_negative_weight

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        anchor, positive = inputs.anchor, inputs.positive
        logits = cosine_matrix(anchor, positive) / self.temperature
        if inputs.negative is not None and len(inputs.negative):
            negative_logits = cosine_matrix(anchor, inputs.negative) / self.temperature
            bonus = torch.zeros_like(negative_logits)
            bonus.diagonal().fill_(self.hard_negative_weight)  # a fill: no tensor made from a Python number
            logits = torch.cat([logits, negative_logits + bonus], dim=1)
        targets = torch.arange(len(anchor), device=anchor.device)
        loss = F.cross_entropy(logits, targets)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, targets)}
