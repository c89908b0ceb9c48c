"""Batches: a seeded, resumable order of sentences, and one padded tensor batch per step.

Every view of a step is tokenised together (dynamic padding) so the encoder runs once per step;
``roles`` says which rows are anchors, positives, negatives and label views.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cselab.data.views import StepViews, ViewBuilder


@dataclass
class Batch:
    step: int
    features: dict[str, torch.Tensor]
    roles: dict[str, slice]
    views: StepViews
    extra: dict = field(default_factory=dict)

    @property
    def num_sentences(self) -> int:
        return len(self.views.anchors)


def epoch_order(num_sentences: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """The batches of one epoch: a seeded shuffle, the last short batch kept if it has 2+ rows."""
    generator = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(num_sentences, generator=generator).tolist()
    batches = [order[i:i + batch_size] for i in range(0, num_sentences, batch_size)]
    return [b for b in batches if len(b) >= 2]


class StepDataset(torch.utils.data.Dataset):
    """Item k is the k-th remaining step: (global step, its sentences)."""

    def __init__(self, corpus: list[str], steps: list[tuple[int, list[int]]]):
        self.corpus = corpus
        self.steps = steps

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, k: int) -> tuple[int, list[str]]:
        step, indices = self.steps[k]
        return step, [self.corpus[i] for i in indices]


class Collator:
    """Views then tokenisation, in the worker: (step, anchors) -> Batch."""

    def __init__(self, tokenize, view_builder: ViewBuilder):
        self.tokenize = tokenize
        self.view_builder = view_builder

    def __call__(self, item: tuple[int, list[str]]) -> Batch:
        step, anchors = item
        views = self.view_builder(step, anchors)
        texts = list(anchors)
        roles = {"anchor": slice(0, len(texts))}

        def add(role: str, rows: list[str]) -> None:
            roles[role] = slice(len(texts), len(texts) + len(rows))
            texts.extend(rows)

        add("positive", views.positives if views.positives is not None else anchors)
        if views.negatives is not None:
            add("negative", views.negatives)
        if views.label_texts is not None:
            add("label_view", views.label_texts)
        return Batch(step=step, features=dict(self.tokenize(texts)), roles=roles, views=views)
