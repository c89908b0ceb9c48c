"""The real thing: `cselab train` killed from outside, then the same command run again."""
from __future__ import annotations

import os
import random
import signal
import subprocess

from cselab.train import checkpoint as ckpt
from tests.reliability.conftest import (
    STEPS,
    assert_same_metrics,
    assert_same_weights,
    cli_command,
    load_config_for,
    metric_records,
    model_weights,
    subprocess_env,
    wait_for_step,
)


def test_sigkill_mid_run_then_same_command_finishes_like_an_uninterrupted_run(tmp_path, corpus_file, reference_run):
    out_dir = tmp_path / "run"
    command = cli_command(corpus_file, out_dir)
    # A seeded choice of when to kill: after at least one checkpoint (step 3), well before the end.
    kill_after = random.Random(2024).randint(4, 8)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
    try:
        wait_for_step(process, out_dir / "metrics.jsonl", kill_after)
        process.send_signal(signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out_dir / "model.safetensors").exists()  # it really stopped before the end
    killed_at = max(r["step"] for r in metric_records(out_dir))
    assert killed_at < STEPS

    rerun = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming from" in rerun.stdout and f"{STEPS}/{STEPS} steps" in rerun.stdout
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
    # One record per step, no duplicates from the replayed steps, and the same losses.
    assert_same_metrics(metric_records(out_dir), metric_records(reference_run))


def test_sigterm_stops_after_the_step_saves_and_says_how_to_resume(tmp_path, corpus_file, reference_run):
    """SIGTERM to the whole process group, data-loader worker included (as `kill -TERM -PGID` or a
    terminal's Ctrl-C do): the worker must not die mid-batch and break the clean stop."""
    from cselab.train.loop import train

    out_dir = tmp_path / "run"
    process = subprocess.Popen(cli_command(corpus_file, out_dir, **{"train.num_workers": 1}), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=subprocess_env(), start_new_session=True)
    try:
        wait_for_step(process, out_dir / "metrics.jsonl", 4)
        os.killpg(process.pid, signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 3, stderr[-2000:]  # the CLI's "stopped early" code, not a crash
    assert "Traceback" not in stderr
    line = next(line for line in stdout.splitlines() if line.startswith("SIGTERM"))
    stopped = int(line.split("stopped after step ")[1].split(";")[0])
    assert "checkpoint saved" in line and "Run the same command again to resume" in line
    assert "run again to resume" in stdout  # the summary line
    # The checkpoint is of the step it names (not a multiple of save_steps necessarily).
    latest = ckpt.latest_valid_checkpoint(out_dir / "checkpoints")
    assert latest is not None and ckpt.checkpoint_step(latest) == stopped
    assert 4 <= stopped < STEPS
    # Resumed in-process without workers (train.num_workers may change on resume).
    summary = train(load_config_for(corpus_file, out_dir), progress=False)
    assert summary["finished"]
    assert_same_weights(model_weights(out_dir), model_weights(reference_run))
    assert_same_metrics(metric_records(out_dir), metric_records(reference_run))
