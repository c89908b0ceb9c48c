"""Count host syncs inside training steps only (tests/train and tests/gpu use it).

The counter (``cselab.train.host_syncs``) is entered around the whole run but counts only while one
of a step's three calls runs: the step (forward and backward), the optimiser update and the
metrics' per-step ``add``. The log window's single read-back, evaluation, checkpoints and the
loader's host-side batch making are outside them.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from cselab.train.host_syncs import HostSyncCounter


@contextlib.contextmanager
def counting_steps(monkeypatch, cuda_sync_debug: bool = False) -> Iterator[HostSyncCounter]:
    """``cuda_sync_debug``: also ``torch.cuda.set_sync_debug_mode("error")`` during those calls
    (CUDA's own check: a synchronising CUDA call raises)."""
    import torch

    from cselab.train import loop
    from cselab.train.metrics import MetricsLog
    from cselab.train.optimizer import OptimizerStep

    counter = HostSyncCounter()
    counter.paused = True

    def counted(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            counter.paused = False
            if cuda_sync_debug:
                torch.cuda.set_sync_debug_mode("error")
            try:
                return function(*args, **kwargs)
            finally:
                counter.paused = True
                if cuda_sync_debug:
                    torch.cuda.set_sync_debug_mode("default")

        return call

    choose_step = loop.choose_step
    monkeypatch.setattr(loop, "choose_step", lambda *args, **kwargs: counted(choose_step(*args, **kwargs)))
    monkeypatch.setattr(OptimizerStep, "__call__", counted(OptimizerStep.__call__))
    monkeypatch.setattr(MetricsLog, "add", counted(MetricsLog.add))
    with counter:
        yield counter


def describe(counter: HostSyncCounter) -> str:
    return "; ".join(f"{reason} at {where} x{count}" for (reason, where), count in counter.where.most_common())
