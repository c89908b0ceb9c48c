"""The validation split: lines of the corpus held out of training (``data.validation_fraction``).

Line i is held out when the i-th draw of a fixed-seed uniform stream is below the fraction. The
rule depends on nothing but the line's position: every run on a corpus holds out the same lines,
whatever its ``train.seed`` (validation losses compare across runs), lines appended to the corpus
leave the earlier lines where they were, and a resumed run splits exactly as it did at the start.
At least one line is held out when the fraction is above 0.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cselab.data.corpus import CorpusError, CorpusStats
from cselab.errors import counted

SPLIT_SEED = 20_240_622  # not train.seed: the held-out lines must not move with the run's seed
HELD_OUT = "held_out_for_validation"  # the corpus summary's count of the held-out lines


@dataclass(frozen=True)
class LineSplit:
    """Sorted line numbers: those trained on, those held out."""

    train: np.ndarray
    validation: np.ndarray


def hold_out(num_lines: int, fraction: float) -> LineSplit:
    if fraction <= 0:
        return LineSplit(np.arange(num_lines, dtype=np.int64), np.zeros(0, dtype=np.int64))
    draws = np.random.Generator(np.random.PCG64(SPLIT_SEED)).random(num_lines, dtype=np.float32)
    held = draws < fraction
    if not held.any():
        held[int(np.argmin(draws))] = True
    if num_lines - int(held.sum()) < 2:
        raise CorpusError(f"data.validation_fraction {fraction} of {counted(num_lines, 'line')} "
                          "leaves fewer than 2 to train on")
    return LineSplit(np.flatnonzero(~held), np.flatnonzero(held))


def lines_of(corpus: Sequence[str], rows: np.ndarray) -> Sequence[str]:
    """The corpus restricted to ``rows`` (sorted), still read lazily where the corpus is on disk."""
    if len(rows) == len(corpus):
        return corpus
    if hasattr(corpus, "select"):
        return corpus.select(rows)
    return [corpus[int(i)] for i in rows]


def count_held_out(stats: CorpusStats, split: LineSplit) -> None:
    """The held-out lines are not trained on: the corpus summary says how many, like any skipped line."""
    if len(split.validation):
        stats.skipped[HELD_OUT] += len(split.validation)
        stats.kept -= len(split.validation)
