"""AugCSE's augmentation discriminator behind a gradient-reversal layer.

Tang et al., "AugCSE: Contrastive Sentence Embedding with Diverse Augmentations", AACL 2022.
Each example's label view is one augmentation sampled from ``views.label`` (label 0 = "no
augmentation" when the text did not change). The discriminator sees [z_original, z_augmented]
(after the projection head) and predicts the augmentation type; the gradient-reversal layer makes
the encoder side receive the negated gradient, scaled by ``alpha``, so the encoder learns to make
augmentations indistinguishable while the discriminator still learns to tell them apart.

Architecture and defaults from the authors' code (NOTES.md): GRL (alpha 1.0) -> dropout 0.2 ->
Linear(2h, 4h) -> tanh -> dropout -> Linear(4h, K) -> tanh, K = augmentations + 1, binary
cross-entropy with logits on one-hot labels; the recipe weights the term with lambda = 0.005.

``num_labels`` (K) must equal len(views.label) + 1 and ``embedding_size`` (h) is the size of the
embeddings after the projection head; the training loop fills both when the recipe leaves them null.
Inputs: ``anchor`` (N, h), ``label_view`` (N, h) and ``labels`` (N,).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, accuracy, scale_gradient


def reverse_gradient(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Identity forward; backward multiplies the gradient by -alpha (Ganin & Lempitsky, 2015)."""
    return scale_gradient(x, -alpha)


@LOSSES.register("discriminator", "AugCSE: predict the augmentation type behind gradient reversal (BCE)")
class AugmentationDiscriminator(LossTerm):
    citation = citations.AUGCSE
    needs = frozenset({"anchor", "label_view", "labels"})

    def __init__(self, num_labels: int | None = None, embedding_size: int | None = None, alpha: float = 1.0,
                 dropout: float = 0.2, output_tanh: bool = True):
        super().__init__()
        if num_labels is not None and num_labels < 2:
            raise ValueError("num_labels must be >= 2 (number of views.label augmenters + 1)")
        if embedding_size is not None and embedding_size < 1:
            raise ValueError("embedding_size must be >= 1 or null")
        if not 0 <= dropout < 1:
            raise ValueError("dropout must be in [0, 1)")
        self.num_labels, self.alpha, self.dropout, self.output_tanh = num_labels, alpha, dropout, output_tanh
        # Sizes left null (a recipe being validated) build no layers; training always knows them.
        self.sized = num_labels is not None and embedding_size is not None
        if self.sized:
            self.hidden = nn.Linear(2 * embedding_size, 4 * embedding_size)
            self.output = nn.Linear(4 * embedding_size, num_labels)

    def logits(self, original: torch.Tensor, augmented: torch.Tensor) -> torch.Tensor:
        x = reverse_gradient(torch.cat([original, augmented], dim=-1).float(), self.alpha)
        x = F.dropout(x, self.dropout, self.training)
        x = torch.tanh(self.hidden(x))
        x = F.dropout(x, self.dropout, self.training)
        x = self.output(x)
        return torch.tanh(x) if self.output_tanh else x

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if inputs.label_view is None or inputs.labels is None:
            raise ValueError("the discriminator term needs views.label (a list of augmenters) in the recipe")
        if not self.sized:
            raise ValueError("discriminator: num_labels and embedding_size must be set (the training loop sets them)")
        logits = self.logits(inputs.anchor, inputs.label_view)
        # One-hot targets by a scatter: F.one_hot checks the labels' range on the host off CUDA (a
        # read-back the host-sync counter sees). A label >= num_labels still raises (an index error;
        # a device assert on CUDA): num_labels must be len(views.label) + 1.
        target = torch.zeros_like(logits).scatter_(1, inputs.labels.long().unsqueeze(1), 1.0)
        loss = F.binary_cross_entropy_with_logits(logits, target)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, inputs.labels)}
