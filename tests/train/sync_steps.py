"""Count host syncs inside training steps only (tests/train and tests/gpu use it).

The counter (``cselab.train.host_syncs``) is entered around the whole run but counts only while one
of a step's three calls runs: the step (forward and backward), the optimiser update and the
metrics' per-step ``add``. The log window's single read-back, evaluation, checkpoints and the
loader's host-side batch making are outside them.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from cselab.train.host_syncs import HostSyncCounter, around_steps


@contextlib.contextmanager
def counting_steps(cuda_sync_debug: bool = False) -> Iterator[HostSyncCounter]:
    """``cuda_sync_debug``: also ``torch.cuda.set_sync_debug_mode("error")`` during those calls
    (CUDA's own check: a synchronising CUDA call raises)."""
    import torch

    counter = HostSyncCounter()
    counter.paused = True

    @contextlib.contextmanager
    def region():
        with counter.counting():
            if cuda_sync_debug:
                torch.cuda.set_sync_debug_mode("error")
            try:
                yield
            finally:
                if cuda_sync_debug:
                    torch.cuda.set_sync_debug_mode("default")

    with around_steps(region), counter:
        yield counter


def describe(counter: HostSyncCounter) -> str:
    return "; ".join(f"{reason} at {where} x{count}" for (reason, where), count in counter.where.most_common())
