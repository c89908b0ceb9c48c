"""Focal-InfoNCE: InfoNCE with self-paced modulation of positive and negative logits.

Hou & Li, "Improving Contrastive Learning of Sentence Embeddings with Focal-InfoNCE", EMNLP 2023
Findings. Eq. (2): for anchor i with positive similarity s_p and negative similarities s_n (raw
cosines), the logits are s_p^2 / tau for the positive and s_n (s_n + m) / tau for every negative,
followed by cross-entropy over [positive, negatives]. Negatives are the other sentences' positives
in the batch (SimCSE's layout) and, when present, the hard negatives of ``inputs.negative`` (each
anchor sees every hard-negative column, all in the negative form).

Temperature: the paper's text lists tau = {0.7, 0.7, 0.5, 0.5}, but its own ablation (Table 4)
peaks at 0.05-0.07 for the base models (BERT-base 0.07: 79.31 STS-B; RoBERTa-base 0.05: 81.72).
``temperature: null`` therefore picks 0.05 for RoBERTa-like backbones and 0.07 otherwise (the
training loop passes the backbone's ``model_type`` when it builds the term).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, accuracy

ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl")
BERT_TEMPERATURE, ROBERTA_TEMPERATURE = 0.07, 0.05


def cosine_matrix(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a.float(), dim=-1) @ F.normalize(b.float(), dim=-1).T


def focal_logits(positive_sim: torch.Tensor, negative_sim: torch.Tensor, margin: float, temperature: float,
                 modulated: bool = True) -> torch.Tensor:
    """Column 0 = s_p^2 / tau, the rest = s_n (s_n + m) / tau (Eq. 2).

    ``modulated=False`` drops the modulation factors (s_p and s_n + m -> 1): s_p / tau and
    (s_n + m) / tau, which with m = 0 is InfoNCE (an ablation of the paper's contribution).
    """
    positive = positive_sim.unsqueeze(1)
    if modulated:
        positive, negative = positive ** 2, negative_sim * (negative_sim + margin)
    else:
        negative = negative_sim + margin
    return torch.cat([positive, negative], dim=1) / temperature


def default_temperature(model_type: str | None) -> float:
    return ROBERTA_TEMPERATURE if model_type in ROBERTA_LIKE else BERT_TEMPERATURE


@LOSSES.register("focal", "Focal-InfoNCE (Hou & Li 2023): s_p^2/tau positive, s_n(s_n+m)/tau negatives")
class FocalInfoNCELoss(LossTerm):
    citation = citations.FOCAL_INFONCE
    needs = frozenset({"anchor", "positive"})
    wants = frozenset({"negative"})  # hard negatives when the step has them

    def __init__(self, temperature: float | None = None, margin: float = 0.3, modulated: bool = True,
                 model_type: str | None = None):
        super().__init__()
        if temperature is not None and temperature <= 0:
            raise ValueError("temperature must be > 0 (or null: 0.07 for BERT-like, 0.05 for RoBERTa-like models)")
        self.temperature = temperature or default_temperature(model_type)
        self.margin = margin
        self.modulated = modulated

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        sims = cosine_matrix(inputs.anchor, inputs.positive)  # (N, N), diagonal = positives
        hard = None
        if inputs.negative is not None and len(inputs.negative):
            hard = cosine_matrix(inputs.anchor, inputs.negative)
        loss, logits = focal_infonce(sims, hard, self.margin, self.temperature, self.modulated)
        targets = torch.zeros(len(logits), dtype=torch.long, device=logits.device)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, targets),
                      "tau": logits.new_full((), self.temperature)}  # a fill: no host copy


def focal_infonce(sims: torch.Tensor, hard_negative_sims: torch.Tensor | None, margin: float, temperature: float,
                  modulated: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean of Eq. (2) over anchors from cosines: sims (N, N) anchor x positive, diagonal = positive
    pairs, off-diagonal = in-batch negatives; hard_negative_sims (N, M) extra negatives or None."""
    n = sims.shape[0]
    # The off-diagonal entries row by row, by a strided view: after dropping the first element, the
    # flattened matrix is (n - 1) rows of [n off-diagonal values..., next diagonal], so the last
    # column goes. A boolean mask would be a nonzero: a wait for the device on a GPU.
    negative_sims = sims.flatten()[1:].view(n - 1, n + 1)[:, :-1].reshape(n, n - 1)
    if hard_negative_sims is not None:
        negative_sims = torch.cat([negative_sims, hard_negative_sims], dim=1)
    logits = focal_logits(sims.diagonal(), negative_sims, margin, temperature, modulated)
    targets = torch.zeros(n, dtype=torch.long, device=sims.device)
    return F.cross_entropy(logits, targets), logits
