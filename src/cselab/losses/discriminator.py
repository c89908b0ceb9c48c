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

``num_labels`` (K) must equal len(views.label) + 1. ``embedding_size`` (h, the size of the
embeddings after the projection head) may be left null: the parameters then get their shape at
the first step (``_deferred.py``: the optimizer already holds them and trains them).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab.losses import LOSSES
from cselab.losses._deferred import DeferredParameters, init_linear_
from cselab.losses.base import StepOutputs


class _ReverseGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return -ctx.alpha * grad, None


def reverse_gradient(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """Identity forward; backward multiplies the gradient by -alpha (Ganin & Lempitsky, 2015)."""
    return _ReverseGradient.apply(x, alpha)


@LOSSES.register("discriminator", "AugCSE: predict the augmentation type behind gradient reversal (BCE)")
class AugmentationDiscriminator(DeferredParameters, nn.Module):
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
        self._declare_deferred("hidden_weight", "hidden_bias", "output_weight", "output_bias")
        if embedding_size is not None and num_labels is not None:
            self._materialize(embedding_size, torch.device("cpu"))

    def _materialize(self, embedding_size: int, device: torch.device) -> None:
        if self.num_labels is None:
            raise ValueError("discriminator: set num_labels = len(views.label) + 1 in the objective term")
        with torch.no_grad():
            init_linear_(self._size("hidden_weight", (4 * embedding_size, 2 * embedding_size), device),
                         self._size("hidden_bias", (4 * embedding_size,), device))
            init_linear_(self._size("output_weight", (self.num_labels, 4 * embedding_size), device),
                         self._size("output_bias", (self.num_labels,), device))

    def logits(self, original: torch.Tensor, augmented: torch.Tensor) -> torch.Tensor:
        x = reverse_gradient(torch.cat([original, augmented], dim=-1).float(), self.alpha)
        x = F.dropout(x, self.dropout, self.training)
        x = torch.tanh(F.linear(x, self.hidden_weight, self.hidden_bias))
        x = F.dropout(x, self.dropout, self.training)
        x = F.linear(x, self.output_weight, self.output_bias)
        return torch.tanh(x) if self.output_tanh else x

    def forward(self, outputs: StepOutputs) -> tuple[torch.Tensor, dict[str, float]]:
        if "label_view" not in outputs.extra:
            raise ValueError("the discriminator term needs views.label (a list of augmenters) in the recipe")
        if not self.sized:
            self._materialize(outputs.anchor.shape[-1], outputs.anchor.device)
        labels = outputs.extra["labels"]
        if int(labels.max()) >= self.num_labels:
            raise ValueError(f"discriminator: label {int(labels.max())} >= num_labels {self.num_labels}; "
                             f"num_labels must be len(views.label) + 1")
        logits = self.logits(outputs.anchor, outputs.extra["label_view"])
        target = F.one_hot(labels.long(), self.num_labels).float()
        loss = F.binary_cross_entropy_with_logits(logits, target)
        accuracy = (logits.argmax(dim=1) == labels).float().mean().item()
        return loss, {"disc": loss.item(), "disc_acc": accuracy}
