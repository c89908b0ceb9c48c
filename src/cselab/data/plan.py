"""The step plan: a seeded, resumable order of sentences, one batch of indices per step.

The step number alone is a run's data position (``StepPlan[k]`` is step k's sentences), so resuming
needs nothing else. A packed pre-training run steps through token blocks with the same plan
(``data/packing.py``).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


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
        per_epoch = len(self._epoch(0)) if epochs or max_steps else 0
        self.steps_per_epoch = per_epoch
        # max_steps, when set, is the run's length whatever ``epochs`` says (as in HF's Trainer):
        # ``--max-steps 5`` on a corpus of 3 steps an epoch runs into a second epoch.
        self.total = per_epoch * epochs if max_steps is None or not per_epoch else max_steps
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
