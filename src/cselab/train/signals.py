"""Ctrl-C and SIGTERM end training cleanly: the current step finishes, a checkpoint is saved.

With several processes the signal may reach one of them only (a node's scheduler, a user's
``kill``). A process that stopped alone would enter the checkpoint's collectives while the others
wait in the next step's all-reduce: a hang, then the launcher's SIGKILL and no checkpoint. So the
processes decide together, where a log window (or an evaluation) closes: one all-reduce of their
flags, and all of them stop after the same step and save together.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from cselab.train.distributed import any_process, gather_objects, world_size


@dataclass
class StopFlag:
    requested: bool = False  # this process was signalled
    signal_name: str = ""
    device: torch.device | None = None  # where the agreeing collective's tensor lives (NCCL: the GPU)

    def agreed(self, boundary: bool) -> bool:
        """Whether every process stops after this step. One process: as soon as it was signalled.
        Several: asked only at a ``boundary`` (a step every process knows as such: a log window or an
        evaluation), so the stop comes up to ``train.log_steps`` steps after the signal."""
        if world_size() == 1:
            return self.requested
        if not boundary or not any_process(self.requested, self.device or torch.device("cpu")):
            return False
        names = gather_objects(self.signal_name)  # the main process names the signal, whichever process got it
        self.signal_name = self.signal_name or next(name for name in names if name)
        return True


@contextlib.contextmanager
def stop_on_signals(device: torch.device | None = None) -> Iterator[StopFlag]:
    """A flag set by SIGINT/SIGTERM while the block runs; a second Ctrl-C stops at once (without
    a checkpoint: the run resumes from the last one). ``device``: the process's (see ``agreed``)."""
    stop = StopFlag(device=device)

    def on_signal(signum, _frame):
        if stop.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, resume from the last checkpoint
        stop.requested, stop.signal_name = True, signal.Signals(signum).name

    # Handlers can only be installed from the main thread (train() may run in another one).
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if in_main_thread else {}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def quiet_worker(_worker_id: int) -> None:
    """Data-loader workers ignore Ctrl-C/SIGTERM: the main process stops them after saving."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
