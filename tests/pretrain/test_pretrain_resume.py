"""A packed pre-training run killed from outside, then the same command again: the result is the
uninterrupted run's, bit for bit (weights, losses, validation losses, the best model's step)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import torch

from tests.pretrain.conftest import pretrain_config, pretrain_overrides
from tests.reliability.conftest import TIMING_KEYS, metric_records, model_weights, subprocess_env, wait_for_step

STEPS = 12
SETTINGS = {"optim.max_steps": STEPS, "train.eval_steps": 4}  # checkpoints every 3 steps (pretrain_overrides)


def pretrain_command(corpus, out_dir) -> list[str]:
    command = [sys.executable, "-m", "cselab.cli", "pretrain"]
    for item in pretrain_overrides(corpus, out_dir, **SETTINGS):
        command += ["--set", item]
    return command


@pytest.mark.slow
def test_sigkill_mid_run_then_the_same_command_ends_bit_identical(tmp_path, lines_file):
    from cselab.train.loop import train

    reference = tmp_path / "reference"
    train(pretrain_config(lines_file, reference, **SETTINGS), progress=False)

    out_dir = tmp_path / "run"
    command = pretrain_command(lines_file, out_dir)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        wait_for_step(process, out_dir / "metrics.jsonl", 5)  # after the checkpoint of step 3 and an evaluation
        process.send_signal(signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert max(r["step"] for r in metric_records(out_dir)) < STEPS

    rerun = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from" in rerun.stdout and f"{STEPS}/{STEPS} steps" in rerun.stdout
    weights, expected = model_weights(out_dir), model_weights(reference)
    assert weights.keys() == expected.keys()
    assert all(torch.equal(weights[k], expected[k]) for k in weights)
    resumed, uninterrupted = metric_records(out_dir), metric_records(reference)
    assert [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in resumed] == \
           [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in uninterrupted]
    assert [r["step"] for r in resumed if "val_mlm_loss" in r] == [4, 8, 12]
    assert (json.loads((out_dir / "best_model.json").read_text())
            == json.loads((reference / "best_model.json").read_text()))
