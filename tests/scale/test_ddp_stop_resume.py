"""Several processes decide together: to stop after a signal that reached one of them, and which
checkpoint to resume from (the main process's, or a one-line failure on every process)."""
from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TINY_BERT, free_port


def _command(corpus: Path, out: Path, port: int) -> list[str]:
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", "optim.batch_size=4", "train.precision=fp32",
                 "train.eval_steps=0", "train.save_steps=0", "train.log_steps=2", "train.num_workers=0"]
    args = ["train", "--corpus", str(corpus), "--output-dir", str(out), "--max-steps", "5000"]
    for item in overrides:
        args += ["--set", item]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
            "-m", "cselab.cli", *args]


def _records(out: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from /proc's parent ids (Linux)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone already
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _rank_pid(launcher: subprocess.Popen, rank: int) -> int:
    """The pid of the worker of ``rank``: torchrun's child whose environment says RANK=rank."""
    for pid in _descendants(launcher.pid):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # gone already
            continue
        if f"RANK={rank}".encode() in environ:
            return pid
    raise AssertionError(f"no worker of rank {rank} among {_descendants(launcher.pid)}")


def _signal_one_rank_after(launcher: subprocess.Popen, out: Path, rank: int, after_step: int) -> tuple[int, str]:
    """Once a record past ``after_step`` is logged, SIGTERM the worker of ``rank`` only; the step every
    process stopped after, and the run's output."""
    deadline = time.monotonic() + 240
    while not any(r["step"] > after_step for r in _records(out)):
        assert launcher.poll() is None, launcher.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "training did not log in time"
        time.sleep(0.05)
    os.kill(_rank_pid(launcher, rank), signal.SIGTERM)
    try:
        stdout, stderr = launcher.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # the processes disagreed: one waits in a collective forever
        for pid in [*_descendants(launcher.pid), launcher.pid]:  # torchrun starts each worker in a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        stdout, stderr = launcher.communicate()
        pytest.fail(f"the run hung after one process was signalled: {stderr[-3000:]}")
    output = stdout + stderr
    # Each process ends as a run stopped early does (its summary, exit status 3, which torchrun reports
    # as a failure), after the same step; none was killed waiting for the others.
    steps = re.findall(r"recipe simcse: (\d+)/5000 steps \(stopped early", output)
    assert len(steps) == 2 and steps[0] == steps[1], output[-3000:]
    assert "(SIGKILL)" not in output, output[-3000:]
    # The main process wrote its summary before any process left (torchrun stops the rest when one exits).
    assert json.loads((out / "summary.json").read_text())["steps"] == int(steps[0])
    return int(steps[0]), output


def test_a_signal_to_one_process_stops_every_process_at_the_same_step_and_the_run_resumes(tmp_path, tiny_corpus):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "run"
    command = _command(tiny_corpus, out, free_port())
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    step, output = _signal_one_rank_after(first, out, rank=1, after_step=0)  # not the main process
    # Said by the main process, which was not signalled itself; decided where a log window closes.
    assert f"SIGTERM: stopped after step {step}; checkpoint saved" in output, output[-3000:]
    assert step % 2 == 0
    assert [p.name for p in (out / "checkpoints").glob("step-*")] == [f"step-{step:08d}"]
    assert _records(out)[-1]["step"] == step

    second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    again, output = _signal_one_rank_after(second, out, rank=0, after_step=step)
    assert f"step-{step:08d} (step {step} of 5000)" in output, output[-3000:]
    assert again > step and f"SIGTERM: stopped after step {again}; checkpoint saved" in output
    steps = [r["step"] for r in _records(out)]
    assert steps == sorted(set(steps)) and steps[-1] == again  # resumed where it stopped, no step twice


RESUME_SCRIPT = r'''
import json, os, sys
from pathlib import Path
import torch.distributed as dist
sys.path.insert(0, os.environ["REPO_SRC"])
from cselab.train import checkpoint as ckpt
from cselab.train.checkpoint import shared_resume_point

class Process:  # what shared_resume_point reads of train/process.py's Process
    def __init__(self, out_dir, rank, processes):
        self.out_dir, self.rank, self.processes, self.main = out_dir, rank, processes, rank == 0

dist.init_process_group("gloo")
rank = dist.get_rank()
root = Path(sys.argv[1])
results = {}
for case in ("copied", "absent"):
    # Each process has its own output directory, as machines that do not share one.
    process = Process(root / case / f"out-rank{rank}", rank, dist.get_world_size())
    latest = None
    if rank == 0:
        latest = process.out_dir / "checkpoints" / "step-00000007"
    try:
        found = shared_resume_point(process, latest)
        results[case] = {"found": str(found)}
    except ckpt.CheckpointError as error:
        results[case] = {"error": str(error)}
(root / f"result-rank{rank}.json").write_text(json.dumps({"rank": rank, **results}))  # stdout interleaves
dist.destroy_process_group()
'''


def _fake_checkpoint(path: Path) -> None:
    path.mkdir(parents=True)
    for name in ("encoder.safetensors", "state.json"):
        (path / name).write_text("x")
    (path / "manifest.json").write_text(json.dumps({"encoder.safetensors": "0", "state.json": "0"}))


def test_the_main_process_names_the_checkpoint_and_a_process_that_cannot_read_it_stops_every_process(tmp_path):
    for rank in (0, 1):
        _fake_checkpoint(tmp_path / "copied" / f"out-rank{rank}" / "checkpoints" / "step-00000007")
    _fake_checkpoint(tmp_path / "absent" / "out-rank0" / "checkpoints" / "step-00000007")
    # rank 1's directory holds an older checkpoint only: looking for itself, it would resume from it.
    _fake_checkpoint(tmp_path / "absent" / "out-rank1" / "checkpoints" / "step-00000003")
    script = tmp_path / "resume.py"
    script.write_text(RESUME_SCRIPT)
    env = {**os.environ, "REPO_SRC": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          f"--master_port={free_port()}",
                          str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    results = {r["rank"]: r for r in (json.loads(f.read_text()) for f in sorted(tmp_path.glob("result-rank*.json")))}
    assert set(results) == {0, 1}
    for rank in (0, 1):
        # Where every process has the file: each resumes from the main process's step, under its own directory.
        assert results[rank]["copied"] == {"found": str(tmp_path / "copied" / f"out-rank{rank}" / "checkpoints"
                                                        / "step-00000007")}
        # Where one lacks it: every process fails with the same line, naming the path and the process.
        error = results[rank]["absent"]["error"]
        assert "\n" not in error
        assert str(tmp_path / "absent" / f"out-rank{rank}" / "checkpoints" / "step-00000007") in error
        assert "process 1 of 2 cannot read manifest.json" in error
