"""A Ctrl-C while the loop waits for the checkpoint writer (a second Ctrl-C right after the first one's
save) leaves the writer to finish: the block's end waits for it. Interrupting ``Thread.join`` instead
made CPython mark the still-writing thread stopped, the process exited under it and aborted
("terminate called without an active exception", exit code 134 instead of 130)."""
from __future__ import annotations

import signal
import threading
import time
from types import SimpleNamespace

import pytest

from cselab.train import checkpoint as ckpt


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_a_ctrl_c_while_waiting_for_the_writer_still_lets_it_finish(monkeypatch, tmp_path):
    finished = threading.Event()

    def slow_write(snap):
        time.sleep(0.6)
        finished.set()

    monkeypatch.setattr(ckpt, "write_snapshot", slow_write)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        writer = ckpt.CheckpointWriter()
        writer.save(SimpleNamespace(step=1, final=tmp_path / "step-00000001"))
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # the second Ctrl-C, while the loop waits for the writer
        with pytest.raises(KeyboardInterrupt):
            writer.wait()
        assert not finished.is_set()  # interrupted while the write still ran
        writer.wait()  # what the with block's end does
        assert finished.is_set()  # it waited for the write, not for a thread marked stopped
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
