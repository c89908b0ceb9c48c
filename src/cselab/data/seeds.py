"""The run's seed streams: every random draw a step makes in the collator (views, label choices, token
passes) has a seed of its own, given by (run seed, step, stream), so a step's data does not depend on
which worker made it or on the steps before it, and a resumed run draws exactly what an uninterrupted
one would have."""
from __future__ import annotations

from enum import IntEnum


class Stream(IntEnum):
    """The per-step seed streams (``step_seed``'s third argument)."""

    ANCHOR = 0  # views.anchor's augmenter
    POSITIVE = 1  # views.positive's augmenter
    NEGATIVE = 2  # views.negative's augmenter
    LABEL_CHOICE = 3  # views.label: which augmenter each sentence gets
    POSITIVE_SHARE = 4  # views.positive_prob: which rows keep their augmented positive
    FIRST_TOKEN_PASS = 5  # the run's first token pass (MLM's masks) on process 0
    LABELER = 10  # + k: views.label's k-th augmenter
    FIRST_TOKEN_PASS_OTHER_PROCESS = 1000  # + rank: the first token pass on the other processes
    FURTHER_TOKEN_PASS = 2000  # + 1000 * (k - 1) + rank: the run's k-th token pass, k >= 1


# The "step" of the draws made once for the whole run (views.label sampled once per sentence): no real
# step has it, so these seeds are none of any step's.
WHOLE_RUN = -1


def step_seed(seed: int, step: int, stream: int) -> int:
    """A distinct, reproducible seed per (run, step, stream), independent of worker scheduling."""
    return (seed * 1_000_003 + step * 31 + stream) % (2**31 - 1)


def token_pass_stream(position: int, rank: int) -> int:
    """The stream of the run's ``position``-th token pass (in the registry's order) on process ``rank``:
    each process draws its own rows' tokens (rank 0 keeps the single-process stream)."""
    if position == 0:
        return Stream.FIRST_TOKEN_PASS if rank == 0 else Stream.FIRST_TOKEN_PASS_OTHER_PROCESS + rank
    return Stream.FURTHER_TOKEN_PASS + 1000 * (position - 1) + rank
