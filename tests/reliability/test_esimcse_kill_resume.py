"""`cselab train --recipe esimcse` killed with SIGKILL, then the same command again: the momentum encoder
and the queue come back from the checkpoint, so the run ends bit for bit as an uninterrupted one; a
checkpoint whose queue is taken out (an older cselab's) resumes with a fresh queue, and ends elsewhere."""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import torch

from cselab.train import checkpoint as ckpt
from tests.reliability.conftest import (
    STEPS,
    base_overrides,
    edit_checkpoint_state,
    metric_records,
    model_weights,
    subprocess_env,
    wait_for_step,
)

COMPONENTS = ("momentum_keys.momentum_encoder", "momentum_keys.queue")


def esimcse_command(corpus, out_dir) -> list[str]:
    command = [sys.executable, "-m", "cselab.cli", "train", "--recipe", "esimcse"]
    for item in base_overrides(corpus, out_dir):
        command += ["--set", item]
    return command


def run(command: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def final_state(out_dir) -> dict:
    return ckpt.read_checkpoint(ckpt.list_checkpoints(out_dir / "checkpoints")[-1]).states


def same_tensors(a, b) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    return a == b


def test_sigkill_then_the_same_command_ends_bit_identical_with_the_momentum_encoder_and_queue(tmp_path, corpus_file):
    reference = tmp_path / "reference"
    run(esimcse_command(corpus_file, reference))

    out_dir = tmp_path / "run"
    command = esimcse_command(corpus_file, out_dir)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        wait_for_step(process, out_dir / "metrics.jsonl", 4)
        deadline = time.monotonic() + 60  # the checkpoint of step 3 is written behind the loop: on disk first
        while ckpt.latest_valid_checkpoint(out_dir / "checkpoints") is None and time.monotonic() < deadline:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    resumed_from = ckpt.checkpoint_step(ckpt.latest_valid_checkpoint(out_dir / "checkpoints"))
    assert 3 <= resumed_from < STEPS
    without_queue = tmp_path / "without-queue"
    shutil.copytree(out_dir, without_queue)

    rerun = run(command)
    assert "resuming from" in rerun.stdout and f"{STEPS}/{STEPS} steps" in rerun.stdout
    ours, theirs = model_weights(out_dir), model_weights(reference)
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert [r["loss"] for r in metric_records(out_dir)] == [r["loss"] for r in metric_records(reference)]
    resumed, uninterrupted = final_state(out_dir), final_state(reference)
    for name in COMPONENTS:
        assert same_tensors(resumed[name], uninterrupted[name]), name
    assert len(resumed["momentum_keys.queue"]["keys"]) == min(STEPS * 8, 160)

    # The control: the same checkpoint without its queue resumes with an empty one, and ends elsewhere.
    latest = ckpt.latest_valid_checkpoint(without_queue / "checkpoints")

    def drop_queue(state: dict) -> None:
        del state["components"]["momentum_keys.queue"]
        del state["versions"]["momentum_keys.queue"]

    edit_checkpoint_state(latest, drop_queue)  # its file stays, verified by the manifest but not read
    control = run(esimcse_command(corpus_file, without_queue))
    assert f"resuming from {latest}" in control.stdout
    fresh = model_weights(without_queue)
    assert any(not torch.equal(fresh[k], theirs[k]) for k in fresh)
