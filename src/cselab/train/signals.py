"""Ctrl-C and SIGTERM end training cleanly: the current step finishes, a checkpoint is saved."""
from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class StopFlag:
    requested: bool = False
    signal_name: str = ""


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopFlag]:
    """A flag set by SIGINT/SIGTERM while the block runs; a second Ctrl-C stops at once."""
    stop = StopFlag()

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
