"""A finished run keeps what a user needs (issue 39, item 13): its model, and a final checkpoint without
AdamW's moments (twice the weights), with which re-running the command still says it is done;
``train.keep_optimizer_state: true`` keeps them. Exact resume of an unfinished run is untouched (its
checkpoints keep everything; tests/reliability/test_resume.py and test_kill_resume.py)."""
from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from cselab.config import load_config
from cselab.train.checkpoint import list_checkpoints, read_checkpoint, verify
from cselab.train.loop import train
from tests.reliability.conftest import base_overrides


def run_dir_bytes(path) -> int:
    seen, total = set(), 0
    for file in path.rglob("*"):
        if file.is_file() and (file.stat().st_dev, file.stat().st_ino) not in seen:  # a hard link counts once
            seen.add((file.stat().st_dev, file.stat().st_ino))
            total += file.stat().st_size
    return total


def finished_run(corpus, out, **extra):
    """The reliability tests' 12-step run, with the default of train.keep_optimizer_state unless ``extra``
    sets it (their base settings keep the state, to check every component's file)."""
    settings = {"train.keep_optimizer_state": str(load_config("simcse").train.keep_optimizer_state).lower(),
                **extra}
    config = load_config("simcse", base_overrides(corpus, out, **settings))
    summary = train(config, progress=False)
    assert summary["finished"]
    return config, summary


def test_a_finished_runs_last_checkpoint_keeps_no_optimizer_state(tiny_corpus, tmp_path):
    assert load_config("simcse").train.keep_optimizer_state is False  # the default
    _, summary = finished_run(tiny_corpus, tmp_path / "lean")
    final = list_checkpoints(tmp_path / "lean" / "checkpoints")[-1]
    assert verify(final) and not (final / "optimizer.safetensors").exists()
    assert read_checkpoint(final).states["optimizer"]["optimizer"] is None
    _, kept = finished_run(tiny_corpus, tmp_path / "kept", **{"train.keep_optimizer_state": "true"})
    moments = load_file(str(list_checkpoints(tmp_path / "kept" / "checkpoints")[-1] / "optimizer.safetensors"))
    assert any("exp_avg" in name for name in moments)
    assert run_dir_bytes(tmp_path / "lean") < run_dir_bytes(tmp_path / "kept") - sum(
        t.numel() * t.element_size() for t in moments.values()) * 0.9


def test_a_finished_run_run_again_is_done_and_unchanged(tiny_corpus, tmp_path):
    config, summary = finished_run(tiny_corpus, tmp_path / "run")
    weights = (tmp_path / "run" / "model.safetensors").read_bytes()
    again = train(config, progress=False)
    assert again == summary and (tmp_path / "run" / "model.safetensors").read_bytes() == weights
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics][-1] == summary["steps"]


def test_a_finished_checkpoint_cannot_train_on_with_fresh_moments(tiny_corpus, tmp_path):
    import torch

    from cselab.errors import TrainingError
    from cselab.train.optimizer import OptimizerStep, make_optimizer

    config, _ = finished_run(tiny_corpus, tmp_path / "run")
    state = read_checkpoint(list_checkpoints(tmp_path / "run" / "checkpoints")[-1]).states["optimizer"]
    layer = torch.nn.Linear(2, 2)
    optimizer, scheduler = make_optimizer(layer, config.optim, 10)
    update = OptimizerStep(optimizer, scheduler, list(layer.parameters()), 1.0)
    update.load_state_dict({**state, "scheduler": scheduler.state_dict()})
    with pytest.raises(TrainingError, match="cannot train further"):
        update()


def test_keep_optimizer_state_may_change_on_resume(tiny_corpus, tmp_path):
    config, summary = finished_run(tiny_corpus, tmp_path / "run")
    again = load_config("simcse", base_overrides(tiny_corpus, tmp_path / "run",
                                                 **{"train.keep_optimizer_state": "true"}))
    assert again.train.keep_optimizer_state != config.train.keep_optimizer_state
    assert train(again, progress=False) == summary
