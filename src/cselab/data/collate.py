"""Batches: a seeded, resumable order of sentences, and one padded tensor batch per step.

Every view of a step is tokenised together (dynamic padding) so the encoder runs once per step;
``roles`` says which rows are anchors, positives, negatives and label views.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
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


def epoch_order(num_sentences: int, batch_size: int, seed: int, epoch: int,
                lengths: Sequence[int] | None = None, length_grouping: int = 0,
                drop_last: bool = False) -> list[np.ndarray]:
    """The batches of one epoch: a seeded shuffle, the last short batch kept if it has 2+ rows
    (dropped with ``drop_last``: processes of a multi-process run need equal shares).

    With ``length_grouping = k``, each run of k batches of the shuffle is sorted by length before it
    is cut into batches, and the batches are shuffled again: less padding, while every batch is
    still drawn from a random window of k x batch_size sentences (in-batch negatives stay random).
    """
    generator = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(num_sentences, generator=generator).numpy().astype(np.int64)
    if length_grouping > 1 and lengths is not None:
        window = length_grouping * batch_size
        for start in range(0, num_sentences, window):
            part = order[start:start + window]
            order[start:start + window] = part[np.argsort(np.asarray([lengths[i] for i in part]), kind="stable")]
    batches = [order[i:i + batch_size] for i in range(0, num_sentences, batch_size)]
    batches = [b for b in batches if len(b) == batch_size or (len(b) >= 2 and not drop_last)]
    if length_grouping > 1 and lengths is not None:
        shuffle = torch.randperm(len(batches), generator=generator).tolist()
        batches = [batches[i] for i in shuffle]
    return batches


class StepPlan(Sequence[tuple[int, np.ndarray]]):
    """Every step of a run as (global step, sentence indices), computed an epoch at a time.

    The data position of a run is just the step number, so resuming needs nothing else; only the
    current epoch's order is held in memory (a few bytes per sentence), whatever the corpus size.
    """

    def __init__(self, num_sentences: int, batch_size: int, epochs: int, seed: int, max_steps: int | None = None,
                 lengths: Sequence[int] | None = None, length_grouping: int = 0, drop_last: bool = False):
        self.args = (num_sentences, batch_size, seed)
        self.lengths, self.length_grouping, self.drop_last = lengths, length_grouping, drop_last
        per_epoch = len(self._epoch(0)) if epochs else 0
        self.steps_per_epoch = per_epoch
        total = per_epoch * epochs
        self.total = total if max_steps is None else min(total, max_steps)
        self._cached: tuple[int, list[np.ndarray]] | None = None

    def _epoch(self, epoch: int) -> list[np.ndarray]:
        if getattr(self, "_cached", None) is None or self._cached[0] != epoch:
            n, b, seed = self.args
            self._cached = (epoch, epoch_order(n, b, seed, epoch, self.lengths, self.length_grouping, self.drop_last))
        return self._cached[1]

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, step: int) -> tuple[int, np.ndarray]:  # type: ignore[override]
        if not 0 <= step < self.total:
            raise IndexError(step)
        epoch, position = divmod(step, self.steps_per_epoch)
        return step, self._epoch(epoch)[position]


class StepDataset(torch.utils.data.Dataset):
    """Item k is the k-th remaining step: (global step, its sentences)."""

    def __init__(self, corpus: Sequence[str], plan: StepPlan, start_step: int = 0, rank: int = 0, processes: int = 1):
        self.corpus = corpus
        self.plan = plan
        self.start_step = start_step
        self.rank, self.processes = rank, processes  # each process takes its share of the global batch

    def __len__(self) -> int:
        return len(self.plan) - self.start_step

    def __getitem__(self, k: int) -> tuple[int, list[str]]:
        step, indices = self.plan[self.start_step + k]
        share = len(indices) // self.processes
        indices = indices[self.rank * share:(self.rank + 1) * share]
        return step, [self.corpus[int(i)] for i in indices]


class Collator:
    """Views then tokenisation, in the worker: (step, anchors) -> Batch."""

    def __init__(self, tokenize, view_builder: ViewBuilder):
        self.tokenize = tokenize
        self.view_builder = view_builder

    def __call__(self, item: tuple[int, list[str]]) -> Batch:
        step, sentences = item
        views = self.view_builder(step, sentences)
        texts = list(views.anchors)
        roles = {"anchor": slice(0, len(texts))}

        def add(role: str, rows: list[str]) -> None:
            roles[role] = slice(len(texts), len(texts) + len(rows))
            texts.extend(rows)

        add("positive", views.positives if views.positives is not None else views.anchors)
        if views.negatives is not None:
            add("negative", views.negatives)
        if views.label_texts is not None:
            add("label_view", views.label_texts)
        extra = {}
        if views.anchors is not sentences:
            # CLEAR augments both views; its MLM term masks the originals, which are not contrastive rows.
            extra["original_features"] = dict(self.tokenize(sentences))
        return Batch(step=step, features=dict(self.tokenize(texts)), roles=roles, views=views, extra=extra)
