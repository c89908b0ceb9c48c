"""One run per output directory: a second one is refused naming the holder, a dead run's lock is
taken over, and a run that fails before its first checkpoint leaves no directory it created."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from cselab.errors import ConfigError
from cselab.run_files import LOCK
from cselab.train.loop import train
from tests.reliability.conftest import load_config_for


def write_lock(out_dir, pid: int) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / LOCK).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "earlier"}))


def test_a_second_run_on_a_busy_directory_is_refused_naming_the_holder(tmp_path, corpus_file):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out_dir = tmp_path / "run"
        write_lock(out_dir, holder.pid)
        with pytest.raises(ConfigError, match=rf"another training run .*pid {holder.pid}") as info:
            train(load_config_for(corpus_file, out_dir), progress=False)
        assert "\n" not in str(info.value)
        assert sorted(p.name for p in out_dir.iterdir()) == [LOCK]  # nothing of the holder's touched
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_runs_lock_is_taken_over_and_released_at_the_end(tmp_path, corpus_file):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out_dir = tmp_path / "run"
    write_lock(out_dir, dead.pid)
    summary = train(load_config_for(corpus_file, out_dir), progress=False)
    assert summary["finished"] and not (out_dir / LOCK).exists()


def test_a_run_failing_before_its_first_checkpoint_leaves_no_directory(tmp_path, corpus_file, monkeypatch):
    import cselab.train.loop as loop

    def broken(*args, **kwargs):
        raise RuntimeError("a bug while building the run")

    monkeypatch.setattr(loop, "build_setup", broken)
    out_dir = tmp_path / "fresh"
    with pytest.raises(RuntimeError, match="a bug"):
        train(load_config_for(corpus_file, out_dir), progress=False)
    assert not out_dir.exists()
    nested = tmp_path / "new" / "a" / "run"  # every directory the run made goes, not only the last
    with pytest.raises(RuntimeError, match="a bug"):
        train(load_config_for(corpus_file, nested), progress=False)
    assert not (tmp_path / "new").exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    with pytest.raises(RuntimeError, match="a bug"):
        train(load_config_for(corpus_file, existing), progress=False)
    assert (existing / "notes.txt").read_text() == "mine" and not (existing / LOCK).exists()
