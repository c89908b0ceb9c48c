"""Checkpoints off the critical path: host snapshots written by a background thread, hashed as they
are written, errors raised in the loop's thread; train.save_minutes; the same files as before."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

from cselab.train import checkpoint as ckpt
from cselab.train.checkpoint import Checkpointing
from cselab.train.loop import train
from tests.conftest import TINY_BERT, free_port
from tests.reliability.conftest import STEPS, load_config_for, metric_records


def test_streamed_safetensors_read_back_by_safetensors_and_hashed_as_written(tmp_path):
    tensors = {"scalar": torch.tensor(3.5), "empty": torch.zeros(0, 4), "bf16": torch.randn(3, 5).bfloat16(),
               "half": torch.randn(7).half(), "ids": torch.arange(6, dtype=torch.int64).view(2, 3),
               "mask": torch.tensor([True, False, True]), "bytes": torch.arange(5, dtype=torch.uint8),
               "strided": torch.randn(4, 6)[:, ::2]}  # not contiguous: written in row-major order
    path = tmp_path / "t.safetensors"
    digest = ckpt._write_safetensors(path, tensors)
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    again = load_file(str(path))
    assert again.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert again[name].dtype == tensor.dtype and again[name].shape == tensor.shape
        assert torch.equal(again[name], tensor), name


def test_unknown_dtype_is_a_one_line_error(tmp_path):
    with pytest.raises(ckpt.CheckpointError, match=r"t.safetensors: c: no safetensors dtype for torch.complex64"):
        ckpt._write_safetensors(tmp_path / "t.safetensors", {"c": torch.zeros(2, dtype=torch.complex64)})


def tiny_training_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(12, 4), torch.nn.Linear(4, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.tensor([1, 2])).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    return model, optimizer, scheduler


def take_snapshot(directory, step, model, optimizer, scheduler):
    states = {"weights": model.state_dict(), "optimizer": {"optimizer": optimizer.state_dict(),
                                                           "scheduler": scheduler.state_dict()}}
    return ckpt.CheckpointDir(directory, keep=2).snapshot(states, {"step": step, "config": {"k": 1}})


def test_snapshot_is_a_copy_training_may_change_the_live_tensors(tmp_path):
    """On a CPU, ``tensor.cpu()`` is the tensor itself: without a real copy the file written later
    would hold the weights of a later step (resume would not be exact)."""
    model, optimizer, scheduler = tiny_training_state()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = optimizer.state_dict()["state"][0]["exp_avg"].clone()
    snap = take_snapshot(tmp_path, 1, model, optimizer, scheduler)
    model(torch.tensor([3, 4])).sum().backward()  # the loop goes on before the writer ran
    optimizer.step()
    assert not torch.equal(model[0].weight, before["0.weight"])
    path = ckpt.write_snapshot(snap)
    assert ckpt.verify(path)
    fresh, fresh_optimizer, fresh_scheduler = tiny_training_state()
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()
    saved = ckpt.read_checkpoint(path)
    fresh.load_state_dict(saved.states["weights"])
    fresh_optimizer.load_state_dict(saved.states["optimizer"]["optimizer"])
    assert saved.manifest == {"step": 1, "config": {"k": 1}}
    for name, value in fresh.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert torch.equal(fresh_optimizer.state_dict()["state"][0]["exp_avg"], moments)


def test_digests_come_from_the_written_bytes_not_a_re_read(tmp_path, monkeypatch):
    model, optimizer, scheduler = tiny_training_state()
    snap = take_snapshot(tmp_path, 3, model, optimizer, scheduler)

    def no_reading(path):
        raise AssertionError(f"{path} read back to hash it")

    monkeypatch.setattr(ckpt, "_digest", no_reading)
    path = ckpt.write_snapshot(snap)
    monkeypatch.undo()
    manifest = json.loads((path / ckpt.MANIFEST).read_text())
    files = ["optimizer.safetensors", "state.json", "weights.safetensors"]
    assert sorted(manifest) == files and ckpt.verify(path)


def test_writer_returns_at_once_and_a_second_save_waits_for_the_first(tmp_path, monkeypatch):
    release, order = threading.Event(), []

    def slow_write(snap):
        if snap.step == 1:
            assert release.wait(10)
        order.append(snap.step)

    monkeypatch.setattr(ckpt, "write_snapshot", slow_write)
    first, second = SimpleNamespace(step=1, final=tmp_path / "1"), SimpleNamespace(step=2, final=tmp_path / "2")
    with ckpt.CheckpointWriter() as writer:
        writer.save(first)
        assert order == []  # save returned while step 1 is still being written
        threading.Timer(0.2, release.set).start()
        writer.save(second)  # waits for step 1 first
        assert order[0] == 1
    assert order == [1, 2]  # the block's end joined the writer


def test_synchronous_writer_has_written_when_save_returns(tmp_path, monkeypatch):
    written = []
    monkeypatch.setattr(ckpt, "write_snapshot", lambda snap: written.append(threading.current_thread()))
    with ckpt.CheckpointWriter(background=False) as writer:
        writer.save(SimpleNamespace(step=1, final=tmp_path / "1"))
        assert written == [threading.current_thread()]


def failing_write(snap):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("surfaces_at", ["next_save", "wait", "end"])
def test_a_writer_error_is_raised_in_the_loops_thread(tmp_path, monkeypatch, surfaces_at):
    monkeypatch.setattr(ckpt, "write_snapshot", failing_write)
    snap = SimpleNamespace(step=7, final=tmp_path / "step-00000007")
    with pytest.raises(ckpt.CheckpointError) as info:
        with ckpt.CheckpointWriter() as writer:
            writer.save(snap)
            if surfaces_at == "next_save":
                writer.save(SimpleNamespace(step=8, final=tmp_path / "step-00000008"))
            elif surfaces_at == "wait":
                writer.wait()
    message = str(info.value)
    assert "\n" not in message and "step-00000007" in message and "No space left on device" in message


def test_a_writer_error_during_a_failing_run_is_logged_not_lost(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(ckpt, "write_snapshot", failing_write)
    with caplog.at_level(logging.ERROR, logger="cselab.train.checkpoint"):
        with pytest.raises(KeyError, match="the run's own error"):
            with ckpt.CheckpointWriter() as writer:
                writer.save(SimpleNamespace(step=4, final=tmp_path / "step-00000004"))
                raise KeyError("the run's own error")
    assert any("step-00000004" in r.getMessage() and "No space left" in r.getMessage() for r in caplog.records)


def test_training_stops_naming_the_checkpoint_that_could_not_be_written(tmp_path, corpus_file, monkeypatch):
    monkeypatch.setattr(ckpt, "write_snapshot", failing_write)
    with pytest.raises(ckpt.CheckpointError, match=r"step-00000003: writing the checkpoint failed \(.*No space"):
        train(load_config_for(corpus_file, tmp_path / "run"), progress=False)


def checkpoint_steps(out_dir) -> list[int]:
    return [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(out_dir / "checkpoints")]


def test_save_minutes_checks_the_clock_at_log_windows(tmp_path, corpus_file):
    """save_steps 0 and a clock that is always late: a checkpoint at every log window (every 2 steps)."""
    out_dir = tmp_path / "run"
    settings = {"train.save_steps": 0, "train.save_minutes": 1e-9, "train.log_steps": 2, "train.keep_checkpoints": 3}
    assert train(load_config_for(corpus_file, out_dir, **settings), progress=False)["finished"]
    assert checkpoint_steps(out_dir) == [8, 10, 12]
    assert all(ckpt.verify(p) for p in ckpt.list_checkpoints(out_dir / "checkpoints"))


def test_save_minutes_not_reached_saves_the_last_step_only(tmp_path, corpus_file):
    out_dir = tmp_path / "run"
    settings = {"train.save_steps": 0, "train.save_minutes": 60, "train.keep_checkpoints": 5}
    train(load_config_for(corpus_file, out_dir, **settings), progress=False)
    assert checkpoint_steps(out_dir) == [STEPS]


def test_no_checkpoint_when_both_are_off(tmp_path, corpus_file):
    out_dir = tmp_path / "run"
    train(load_config_for(corpus_file, out_dir, **{"train.save_steps": 0, "train.save_minutes": 0}), progress=False)
    assert checkpoint_steps(out_dir) == []


def test_every_process_follows_the_main_process_clock(monkeypatch):
    """A non-main process whose own clock is not late still saves when rank 0's is (and the reverse):
    the answer is rank 0's, shared at the window."""
    import cselab.train.checkpoint as saving

    train_config = SimpleNamespace(save_steps=0, save_minutes=10.0, keep_checkpoints=1, keep_optimizer_state=False)
    other = Checkpointing(SimpleNamespace(main=False, processes=2, out_dir=Path("run")), train_config, {}, None)
    asked = []

    def rank0_says(answer):
        def broadcast(local):
            asked.append(local)
            return answer
        return broadcast

    monkeypatch.setattr(saving, "from_main", rank0_says(True))
    assert other.due(step=5, last=False, window=True) is True
    assert asked == [None]  # the non-main process reads no clock of its own
    assert other.due(step=6, last=False, window=False) is False and len(asked) == 1  # no collective off a window
    main = Checkpointing(SimpleNamespace(main=True, processes=2, out_dir=Path("run")), train_config, {}, None)
    main.last_save -= 601  # its clock is late
    monkeypatch.setattr(saving, "from_main", rank0_says(True))
    assert main.due(step=5, last=False, window=True) is True and asked[-1] is True


def test_asynchronous_and_synchronous_checkpoints_hold_the_same_tensors(tmp_path, corpus_file):
    runs = {}
    for name, background in (("async", "true"), ("sync", "false")):
        out_dir = tmp_path / name
        train(load_config_for(corpus_file, out_dir, **{"train.async_checkpoint": background}), progress=False)
        runs[name] = ckpt.list_checkpoints(out_dir / "checkpoints")
        assert [ckpt.checkpoint_step(p) for p in runs[name]] == [9, 12]
    for a, b in zip(runs["async"], runs["sync"], strict=True):
        for file in ("encoder.safetensors", "heads.safetensors", "optimizer.safetensors", "rng.safetensors"):
            x, y = load_file(str(a / file)), load_file(str(b / file))
            assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), file
    losses = {name: [r["loss"] for r in metric_records(tmp_path / name)] for name in runs}
    assert losses["async"] == losses["sync"]


def train_two_processes(tmp_path, corpus_file, port: int, **settings) -> Path:
    """Six steps of a tiny BERT under torchrun (gloo), two processes; returns the output directory."""
    out = tmp_path / "run"
    settings = {"model.from_config": json.dumps(TINY_BERT), "optim.batch_size": 4, "train.precision": "fp32",
                **settings}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", f"--master_port={port}",
               "-m", "cselab.cli", "train", "--corpus", str(corpus_file), "--output-dir", str(out), "--max-steps", "6"]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CSELAB_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_two_processes_save_by_time_at_the_same_steps(tmp_path, corpus_file):
    """Under torchrun (gloo), a clock that is always late: both processes save at every log window
    (one would otherwise wait in the checkpoint's gather for the other: a hang, then the timeout)."""
    out = train_two_processes(tmp_path, corpus_file, free_port(), **{
        "train.eval_steps": 0, "train.save_steps": 0, "train.save_minutes": 1e-9, "train.log_steps": 2,
        "train.keep_checkpoints": 5})
    assert checkpoint_steps(out) == [2, 4, 6]
    assert len(ckpt.read_state(ckpt.list_checkpoints(out / "checkpoints")[-1])["components"]["rng"]["ranks"]) == 2


def test_two_processes_evaluate_at_steps_between_log_windows(tmp_path, corpus_file, stsb_dev_dir):
    """Only the main process has the dev data; an evaluation at a step that closes no log window (3 with
    log_steps 2) is still every process's decision (the others once waited alone in a collective)."""
    out = train_two_processes(tmp_path, corpus_file, free_port(), **{
        "train.eval_steps": 3, "train.log_steps": 2, "train.save_steps": 0, "train.dist_timeout_minutes": 1,
        "data.dev_dir": str(stsb_dev_dir)})
    assert [r["step"] for r in metric_records(out) if "stsb_dev" in r] == [3, 6]
