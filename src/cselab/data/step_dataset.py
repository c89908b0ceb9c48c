"""The loader's dataset: item k is the k-th remaining step of a plan, as its sentences read from the corpus."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from cselab.data.plan import StepPlan

# (global step, its sentences[, their corpus line numbers]): a collator's input. Without the line
# numbers (tests, benchmarks) every row is tokenised.
StepItem = tuple[int, list[str]] | tuple[int, list[str], np.ndarray]


class StepDataset(torch.utils.data.Dataset):
    """Item k is the k-th remaining step: (global step, its sentences, their line numbers)."""

    def __init__(self, corpus: Sequence[str], plan: StepPlan, start_step: int = 0, rank: int = 0, processes: int = 1):
        self.corpus = corpus
        self.plan = plan
        self.start_step = start_step
        self.rank, self.processes = rank, processes  # each process takes its share of the global batch

    def __len__(self) -> int:
        return len(self.plan) - self.start_step

    def __getitem__(self, k: int) -> StepItem:
        step, indices = self.plan[self.start_step + k]
        share = len(indices) // self.processes
        indices = indices[self.rank * share:(self.rank + 1) * share]
        return step, [self.corpus[int(i)] for i in indices], indices
