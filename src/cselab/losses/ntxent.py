"""NT-Xent over the 2N views of a batch (SimCLR's loss, as CLEAR uses it).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (1): every
sentence is augmented twice; the 2N views are compared with each other, each view's positive is
its twin and the other 2N - 2 views are its negatives (self-similarity is masked out):
l(i, j) = -log exp(sim(z_i, z_j)/tau) / sum_{k != i} exp(sim(z_i, z_k)/tau), averaged over all 2N views.

Rows are the anchors and their positives (``positive_role: label_view`` takes the AugCSE label view
as the positive instead). Hard negatives in ``inputs.negative`` join as extra columns for every
view (UNA's symmetric form). ``intra_view_negatives: false`` drops the same-side columns, giving the
symmetric InfoNCE (mean of anchor->positive and positive->anchor cross-entropies).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs, accuracy

POSITIVE_ROLES = ("positive", "label_view")


@LOSSES.register("ntxent", "NT-Xent over 2N views (CLEAR/SimCLR); hard negatives as extra columns")
class NTXentLoss(nn.Module):
    def __init__(self, temperature: float = 0.05, intra_view_negatives: bool = True, positive_role: str = "positive"):
        super().__init__()
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        if positive_role not in POSITIVE_ROLES:
            raise ValueError(f"positive_role must be one of {', '.join(POSITIVE_ROLES)}, got {positive_role!r}")
        self.temperature = temperature
        self.intra_view_negatives = intra_view_negatives
        self.positive_role = positive_role
        self.needs = frozenset({"anchor", positive_role})  # and the hard negatives when the step has them

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        anchor = inputs.anchor
        if self.positive_role == "label_view":
            if inputs.label_view is None:
                raise ValueError("ntxent positive_role=label_view needs views.label (AugCSE label views)")
            positive = inputs.label_view
        else:
            positive = inputs.positive
        n = len(anchor)
        views = F.normalize(torch.cat([anchor, positive]).float(), dim=-1)  # (2N, d)
        logits = views @ views.T / self.temperature
        # Self-similarity never counts; without intra-view negatives only the other side's columns do.
        side = torch.arange(2 * n, device=views.device) // n
        excluded = side.unsqueeze(0) == side.unsqueeze(1) if not self.intra_view_negatives else \
            torch.eye(2 * n, dtype=torch.bool, device=views.device)
        logits = logits.masked_fill(excluded, float("-inf"))
        if inputs.negative is not None and len(inputs.negative):
            negatives = F.normalize(inputs.negative.float(), dim=-1)
            logits = torch.cat([logits, views @ negatives.T / self.temperature], dim=1)
        targets = torch.arange(2 * n, device=views.device).roll(n)  # view i's twin: i + n, and back
        loss = F.cross_entropy(logits, targets)
        return loss, {"ntxent": loss.detach(), "acc": accuracy(logits, targets)}
