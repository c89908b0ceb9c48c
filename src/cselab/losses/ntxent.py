"""NT-Xent over the paired views of a batch (SimCLR's loss, as CLEAR and UNA's authors use it).

Wu et al., "CLEAR: Contrastive Learning for Sentence Representation", 2020, Eq. (1): every
sentence is augmented twice; the 2N views are compared with each other, each view's positive is
its twin and the other 2N - 2 views are its negatives (self-similarity is masked out):
l(i, j) = -log exp(sim(z_i, z_j)/tau) / sum_{k != i} exp(sim(z_i, z_k)/tau).
Eq. (2) sums l over all positive pairs, L_CL = sum_i sum_j m(i, j) l(i, j) (``reduction: sum``,
the CLEAR recipes, so that Eq. 3's L_MLM + L_CL keeps the paper's balance); ``reduction: mean``
(the default) divides that sum by the number of views.

Inputs: ``anchor`` (N, d) and ``positive`` (N, d) — or the AugCSE ``label_view`` with
``positive_role: label_view`` — and, on steps that have them, ``negative`` (M, d) hard negatives.
``hard_negatives`` says how these join:

- ``columns``: extra columns for every one of the 2N views; a negative has no positive of its own
  (2N x (2N + M) logits).
- ``instances``: each hard negative is an instance with two views of its own, ``negative`` and
  ``negative_positive`` (M, d), its second dropout encoding. NT-Xent then runs over the 2(N + M)
  views: a negative's positive is its own second view and everything else is a negative. This is
  the form of UNA's authors' code (Shu et al. 2023; NOTES.md): 4N x 4N on UNA steps, 2N x 2N on
  the others.

``intra_view_negatives: false`` keeps only the other side's columns (the side of a row is which of
its instance's two views it is), giving the symmetric InfoNCE: the mean of the anchor->positive
and positive->anchor cross-entropies (AugCSE).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, accuracy

POSITIVE_ROLES = ("positive", "label_view")
HARD_NEGATIVE_FORMS = ("columns", "instances")
REDUCTIONS = ("mean", "sum")


def paired_view_logits(first: torch.Tensor, second: torch.Tensor, extra: torch.Tensor | None, temperature: float,
                       intra_view_negatives: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of NT-Xent over K instances with two views each (row k of ``first`` and of ``second``).

    Rows are the 2K views, first views then second views; columns the same 2K views (self masked,
    and the same side too without intra-view negatives), then ``extra`` (M, d) if given. The target
    of view k is its twin, k + K (and back).
    """
    k = len(first)
    views = F.normalize(torch.cat([first, second]).float(), dim=-1)
    logits = views @ views.T / temperature
    side = torch.arange(2 * k, device=views.device) // k
    # Self-similarity (cos = 1) never counts; without intra-view negatives the row's own side does not either.
    excluded = side.unsqueeze(0) == side.unsqueeze(1) if not intra_view_negatives else \
        torch.eye(2 * k, dtype=torch.bool, device=views.device)
    logits = logits.masked_fill(excluded, float("-inf"))
    if extra is not None:
        logits = torch.cat([logits, views @ F.normalize(extra.float(), dim=-1).T / temperature], dim=1)
    targets = torch.arange(2 * k, device=views.device).roll(k)
    return logits, targets


@LOSSES.register("ntxent", "NT-Xent over paired views (CLEAR/SimCLR, UNA's 4N form); mean or sum (CLEAR Eq. 2)")
class NTXentLoss(LossTerm):
    citation = citations.CLEAR
    def __init__(self, temperature: float = 0.05, intra_view_negatives: bool = True, positive_role: str = "positive",
                 hard_negatives: str = "columns", reduction: str = "mean"):
        super().__init__()
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        if positive_role not in POSITIVE_ROLES:
            raise ValueError(f"positive_role must be one of {', '.join(POSITIVE_ROLES)}, got {positive_role!r}")
        if hard_negatives not in HARD_NEGATIVE_FORMS:
            raise ValueError(f"hard_negatives must be one of {', '.join(HARD_NEGATIVE_FORMS)}, got {hard_negatives!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
        self.temperature = temperature
        self.intra_view_negatives = intra_view_negatives
        self.positive_role = positive_role
        self.hard_negatives = hard_negatives
        self.reduction = reduction
        self.needs = frozenset({"anchor", positive_role})
        # Hard negatives are read when a step has them; as instances they need their second encoding too.
        self.wants = frozenset({"negative", "negative_positive"} if hard_negatives == "instances" else {"negative"})

    def second_views(self, inputs: LossInputs) -> torch.Tensor:
        if self.positive_role == "label_view":
            if inputs.label_view is None:
                raise ValueError("ntxent positive_role=label_view needs views.label (AugCSE label views)")
            return inputs.label_view
        return inputs.positive

    def instances(self, inputs: LossInputs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(first views, second views, extra columns) of the step's instances."""
        first, second = inputs.anchor, self.second_views(inputs)
        negative = inputs.negative
        if negative is None or not len(negative):
            return first, second, None
        if self.hard_negatives == "columns":
            return first, second, negative
        twin = inputs.negative_positive
        if twin is None:
            raise ValueError("ntxent hard_negatives=instances: the step gave no second view of the hard negatives "
                             "(negative_positive); the training step must encode each negative twice")
        if twin.shape != negative.shape:
            raise ValueError(f"ntxent: negative_positive {tuple(twin.shape)} must match negative "
                             f"{tuple(negative.shape)} row for row")
        return torch.cat([first, negative]), torch.cat([second, twin]), None

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        first, second, extra = self.instances(inputs)
        logits, targets = paired_view_logits(first, second, extra, self.temperature, self.intra_view_negatives)
        loss = F.cross_entropy(logits, targets, reduction=self.reduction)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, targets)}
