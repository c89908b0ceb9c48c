"""Ctrl-C ends every command with one line and exit 130 (issue 39, item 9): `cselab eval` and `cselab encode`,
which have nothing to save, and a second Ctrl-C during training (the first saves a checkpoint and stops,
exit 3). Each is a real process sent SIGINT, as a terminal sends it."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_BERT
from tests.reliability.conftest import subprocess_env

INTERRUPTED = 130


class Running:
    """A cselab command in a process of its own, its stderr collected as it comes."""

    def __init__(self, argv: list[str], cwd: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "cselab.cli", *argv], cwd=cwd, env=subprocess_env(),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for chunk in iter(lambda: self.process.stderr.read1(4096), b""):
            self.err += chunk

    def wait_for(self, ready, seconds: float = 300) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            assert self.process.poll() is None, f"ended early ({self.process.returncode}): {self.err.decode()[-2000:]}"
            assert time.monotonic() < deadline, f"not ready in {seconds} s: {self.err.decode()[-2000:]}"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        code = self.process.wait(timeout=120)
        self.reader.join(timeout=10)
        return code, self.err.decode()


def last_line(err: str) -> str:
    return err.replace("\r", "\n").strip().splitlines()[-1]


@pytest.fixture
def many_sentences(tmp_path) -> Path:
    path = tmp_path / "many.txt"
    path.write_text("".join(f"sentence number {i} of a long file , to keep the encoder busy for a while .\n"
                            for i in range(60000)))
    return path


def test_ctrl_c_in_encode_is_one_line_and_130(saved_model, many_sentences, tmp_path):
    out = tmp_path / "vectors.npy"
    running = Running(["encode", str(saved_model), "--in", str(many_sentences), "--out", str(out), "--batch-size",
                       "4"], tmp_path)
    running.wait_for(lambda: b"encode:" in running.err)
    running.process.send_signal(signal.SIGINT)
    code, err = running.finish()
    assert code == INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and last_line(err) == "cselab encode: interrupted (Ctrl-C); nothing written"
    assert not out.exists() and list(tmp_path.glob(".vectors.npy*")) == []


def test_ctrl_c_in_eval_is_one_line_and_130(saved_model, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"a first sentence {i} .\tthe second sentence {i * 7} .\t{i % 5}\n" for i in range(30000)))
    running = Running(["eval", str(saved_model), "--sts-file", str(pairs), "--batch-size", "4", "--cache-dir",
                       str(tmp_path / "cache")], tmp_path)
    running.wait_for(lambda: b"encode:" in running.err)
    running.process.send_signal(signal.SIGINT)
    code, err = running.finish()
    assert code == INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and last_line(err).startswith("cselab eval: interrupted (Ctrl-C); the tasks encoded")


def test_a_second_ctrl_c_in_training_is_one_line_and_130_and_the_run_resumes(tmp_path, many_sentences):
    run = tmp_path / "run"
    argv = ["train", "--corpus", str(many_sentences), "--output-dir", str(run), "--max-steps", "60",
            *[item for key, value in {"model.from_config": json.dumps(TINY_BERT), "optim.batch_size": "64",
                                      "train.precision": "fp32", "train.eval_steps": "0", "train.save_steps": "1",
                                      "train.log_steps": "1", "train.num_workers": "0"}.items()
              for item in ("--set", f"{key}={value}")]]
    running = Running(argv, tmp_path)
    metrics = run / "metrics.jsonl"
    running.wait_for(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 2)
    running.process.send_signal(signal.SIGINT)  # the first: finish the step, save, stop
    time.sleep(0.05)
    running.process.send_signal(signal.SIGINT)  # the second: stop at once
    code, err = running.finish()
    assert code == INTERRUPTED, err[-3000:]
    assert "Traceback" not in err
    assert last_line(err) == ("cselab train: interrupted (Ctrl-C): stopped at once by a second Ctrl-C, without "
                              "saving; run the same command again to resume from the last checkpoint")
    again = subprocess.run([sys.executable, "-m", "cselab.cli", *argv], cwd=tmp_path, env=subprocess_env(),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stdout and json.loads((run / "summary.json").read_text())["steps"] == 60
