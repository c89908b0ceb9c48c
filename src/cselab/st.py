"""cselab's objectives as sentence-transformers losses, for ``SentenceTransformerTrainer``.

Each loss follows sentence-transformers' custom-loss contract (the model first,
``forward(sentence_features, labels)`` returning a scalar, ``get_config_dict`` and ``citation`` for the
model card) and computes its value with cselab's own objective term from ``cselab.losses``: the
columns' embeddings become a ``LossInputs`` and the term does the math, so a recipe and the trainer
minimise the same function. Dataset columns, in order:

- ``FocalInfoNCELoss``: (anchor, positive[, negative, ...]); Focal-InfoNCE (Hou & Li 2023).
- ``NTXentLoss``: (anchor, positive[, negative, ...]); CLEAR's Eq. 2 over the 2N views, hard negatives
  as extra columns.
- ``UNALoss``: (anchor, positive[, negative, ...]); UNA's NT-Xent over 2(N + M) views: every hard
  negative is encoded twice (two dropout masks) and is an instance of its own (the ``una`` recipe).
- ``AugCSELoss``: (anchor, positive, augmented) and a ``label`` column (the augmentation type, 0 =
  unchanged): symmetric InfoNCE plus the augmentation discriminator behind gradient reversal.

For unsupervised training the positive column repeats the anchor (SimCSE's dropout positives): each
column is encoded in its own forward pass, so the two get different dropout masks. ``augmented_columns``
turns a ``cselab augment`` file into such columns (augmented texts, UNA negatives, AugCSE labels).
"""
from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cselab import citations
from cselab.augment.cache import read_cache
from cselab.errors import ConfigError
from cselab.losses.base import LossInputs
from cselab.losses.discriminator import AugmentationDiscriminator
from cselab.losses.focal import FocalInfoNCELoss as FocalTerm
from cselab.losses.ntxent import NTXentLoss as NTXentTerm

__all__ = ["AugCSELoss", "ColumnsError", "FocalInfoNCELoss", "NTXentLoss", "UNALoss", "augmented_columns"]


class ColumnsError(ConfigError):
    """A training dataset whose columns (or labels) do not fit the loss."""


def _model_type(model: nn.Module) -> str | None:
    """The backbone's ``config.model_type`` (Focal-InfoNCE's default temperature depends on it)."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "model_type", None):
            return config.model_type
    return None


def _embedding_size(model: nn.Module) -> int:
    # sentence-transformers 5.x renamed get_sentence_embedding_dimension to get_embedding_dimension.
    size = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return size()


class _TermLoss(nn.Module):
    """The shared part: keeps the model (the trainer swaps in its wrapped copy by the name ``model``)
    and encodes each column in its own forward pass."""

    name = ""
    column_names = "anchor, positive[, negative, ...]"

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def embed(self, sentence_features: Iterable[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
        return [self.model(features)["sentence_embedding"] for features in sentence_features]

    def columns(self, embeddings: list[torch.Tensor], least: int, most: int | None = None) -> None:
        if len(embeddings) < least or (most is not None and len(embeddings) > most):
            wanted = f"{least}" if most == least else f"at least {least}" if most is None else f"{least} to {most}"
            raise ColumnsError(f"{self.name}: the dataset has {len(embeddings)} text columns, the loss takes "
                               f"{wanted} ({self.column_names})")

    def loss_inputs(self, embeddings: list[torch.Tensor]) -> LossInputs:
        """(anchor, positive[, negative, ...]) columns: every anchor sees all the negatives."""
        self.columns(embeddings, 2)
        return LossInputs(anchor=embeddings[0], positive=embeddings[1], negative=_negatives(embeddings))

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None):
        return self.term(self.loss_inputs(self.embed(sentence_features)))[0]


def _negatives(embeddings: list[torch.Tensor]) -> torch.Tensor | None:
    """The hard-negative columns after (anchor, positive), stacked: every anchor sees all of them."""
    return torch.cat(embeddings[2:]) if len(embeddings) > 2 else None


class FocalInfoNCELoss(_TermLoss):
    """Focal-InfoNCE (Hou & Li 2023, Eq. 2) on (anchor, positive[, negative, ...]) columns: s_p^2 / tau
    for the positive, s_n (s_n + m) / tau for the in-batch and hard negatives (``cselab.losses.focal``).
    ``temperature=None`` takes the paper's best for the backbone: 0.05 RoBERTa-like, 0.07 otherwise."""

    name = "FocalInfoNCELoss"

    def __init__(self, model: nn.Module, temperature: float | None = None, margin: float = 0.3,
                 modulated: bool = True):
        super().__init__(model)
        self.term = FocalTerm(temperature=temperature, margin=margin, modulated=modulated,
                              model_type=_model_type(model))

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.term.temperature, "margin": self.term.margin, "modulated": self.term.modulated}

    citation = FocalTerm.citation


class NTXentLoss(_TermLoss):
    """CLEAR's NT-Xent (Wu et al. 2020, Eq. 2) over the 2N views of (anchor, positive) pairs: each view's
    positive is its twin, the other 2N - 2 views its negatives; hard-negative columns join as extra
    negatives of every view. ``reduction="sum"`` is Eq. 2 (CLEAR's recipes), ``"mean"`` divides by 2N."""

    name = "NTXentLoss"

    def __init__(self, model: nn.Module, temperature: float = 0.05, reduction: str = "sum"):
        super().__init__(model)
        self.term = NTXentTerm(temperature=temperature, reduction=reduction, hard_negatives="columns")

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.term.temperature, "reduction": self.term.reduction}

    citation = NTXentTerm.citation


class UNALoss(NTXentLoss):
    """UNA's NT-Xent (Shu et al. 2023, as its authors' code) on (anchor, positive[, negative, ...])
    columns: each hard negative is encoded a second time (its own dropout view) and becomes an instance
    with two views, so the loss runs over 2(N + M) views, 4N x 4N with one negative column (the ``una``
    recipe's ``hard_negatives: instances``). Without a negative column it is NT-Xent over the 2N views.
    Feed it UNA's TF-IDF negatives, e.g. from ``cselab augment --aug una``."""

    name = "UNALoss"

    def __init__(self, model: nn.Module, temperature: float = 0.05, reduction: str = "mean"):
        _TermLoss.__init__(self, model)
        self.term = NTXentTerm(temperature=temperature, reduction=reduction, hard_negatives="instances")

    def embed(self, sentence_features: Iterable[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
        sentence_features = list(sentence_features)
        # The negatives' second encodings come last: one more forward pass, new dropout masks.
        return super().embed(sentence_features + sentence_features[2:])

    def loss_inputs(self, embeddings: list[torch.Tensor]) -> LossInputs:
        """``embeddings``: anchor, positive, the K negative columns, then their K second encodings."""
        self.columns(embeddings, 2)
        if len(embeddings) % 2:
            raise ColumnsError(f"{self.name}: expected each negative column's two encodings, got {len(embeddings)} "
                               f"columns of embeddings")
        k = (len(embeddings) - 2) // 2
        negative = _negatives(embeddings[:2 + k])
        twins = torch.cat(embeddings[2 + k:]) if k else None
        return LossInputs(anchor=embeddings[0], positive=embeddings[1], negative=negative, negative_positive=twins)

    citation = citations.UNA


class AugCSELoss(_TermLoss):
    """AugCSE (Tang et al. 2022): symmetric InfoNCE between anchor and positive plus, weighted by
    ``discriminator_weight`` (lambda), a discriminator that predicts each augmented column's
    augmentation type (the ``label`` column, 0 = unchanged) from [anchor, augmented] behind gradient
    reversal (``alpha``). Columns: (anchor, positive, augmented); with ``positive_role="label_view"``
    the augmented sentence is the positive and the columns are (anchor, augmented). ``num_labels`` is
    the number of augmentations + 1. The discriminator's weights are the loss's own parameters: the
    trainer optimises them with the model's."""

    name = "AugCSELoss"
    column_names = "anchor, positive, augmented; and a label column"

    def __init__(self, model: nn.Module, num_labels: int, temperature: float = 0.05,
                 discriminator_weight: float = 0.005, alpha: float = 1.0, dropout: float = 0.2,
                 positive_role: str = "positive"):
        super().__init__(model)
        self.contrastive = NTXentTerm(temperature=temperature, intra_view_negatives=False, positive_role=positive_role)
        self.discriminator = AugmentationDiscriminator(num_labels=num_labels, embedding_size=_embedding_size(model),
                                                       alpha=alpha, dropout=dropout)
        self.discriminator_weight = discriminator_weight
        if positive_role == "label_view":
            self.column_names = "anchor, augmented; and a label column"

    def loss_inputs(self, embeddings: list[torch.Tensor], labels: torch.Tensor | None) -> LossInputs:
        two = self.contrastive.positive_role == "label_view"
        self.columns(embeddings, 2 if two else 3, 2 if two else 3)
        if labels is None:
            raise ColumnsError(f"{self.name}: the dataset needs a 'label' column: each augmented sentence's "
                               f"augmentation type (0 = unchanged, 1..{self.discriminator.num_labels - 1})")
        return LossInputs(anchor=embeddings[0], positive=None if two else embeddings[1], label_view=embeddings[-1],
                          labels=labels)

    def forward(self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor | None = None):
        inputs = self.loss_inputs(self.embed(sentence_features), labels)
        return self.contrastive(inputs)[0] + self.discriminator_weight * self.discriminator(inputs)[0]

    def get_config_dict(self) -> dict[str, Any]:
        return {"num_labels": self.discriminator.num_labels, "temperature": self.contrastive.temperature,
                "discriminator_weight": self.discriminator_weight, "alpha": self.discriminator.alpha,
                "dropout": self.discriminator.dropout, "positive_role": self.contrastive.positive_role}

    citation = AugmentationDiscriminator.citation


def augmented_columns(path: str | Path, column: str = "augmented", seed: int = 0) -> dict[str, list]:
    """A ``cselab augment`` file as training columns, one row per sentence: ``anchor`` and ``positive``
    (the sentence twice: two dropout views), ``column`` (one of its augmentations, drawn uniformly with
    ``seed`` as AugCSE draws; the only one for a single augmenter) and ``label`` (the drawn augmenter's
    place in ``--aug`` + 1, or 0 when it left the sentence unchanged: AugCSELoss's labels, as the
    recipes' ``views.label``). ``Dataset.from_dict`` makes them a dataset; drop ``label`` where the loss
    takes none."""
    path = Path(path).expanduser()
    sidecar = path.with_name(path.name + ".settings.json")
    try:
        names = json.loads(sidecar.read_text(encoding="utf-8"))["aug"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ColumnsError(f"{sidecar}: the augmenters of {path.name} cannot be read ({exc}); write the file with "
                           f"`cselab augment`") from None
    rng = random.Random(seed)
    rows: dict[str, list] = {"anchor": [], "positive": [], column: [], "label": []}
    # `cselab augment` writes every sentence's augmentations in --aug order: entry k is augmenter k's.
    for sentence, augmented in read_cache(path).items():
        if len(augmented) < len(names):
            raise ColumnsError(f"{path}: {sentence[:60]!r} has {len(augmented)} of {len(names)} augmentations "
                               f"(an interrupted `cselab augment`: run it again to finish the file)")
        k = rng.randrange(len(names))
        rows["anchor"].append(sentence)
        rows["positive"].append(sentence)
        rows[column].append(augmented[k])
        rows["label"].append(k + 1 if augmented[k] != sentence else 0)
    return rows
