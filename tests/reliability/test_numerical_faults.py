"""A NaN or infinite loss/gradient stops training naming the step; good checkpoints stay good."""
from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from cselab.errors import TrainingError
from cselab.run_files import BEST_MODEL
from cselab.train import checkpoint as ckpt
from cselab.train.loop import train
from tests.reliability.conftest import load_config_for, model_weights


@pytest.fixture
def poison_loss_at(monkeypatch):
    """poison_loss_at(k, value): the loss of step k (1-based) becomes ``value``."""
    from cselab.train.steps import StepForward

    original = StepForward.loss

    def arm(step: int, value: float) -> None:
        def loss(self, embeddings, batch):
            value_, logs = original(self, embeddings, batch)
            if batch.step + 1 == step:
                value_ = value_ * value  # keeps the graph: the NaN reaches the weights of the running process
            return value_, logs

        monkeypatch.setattr(StepForward, "loss", loss)

    return arm


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_loss_stops_naming_the_step_and_keeps_the_best_model(tmp_path, corpus_file, stsb_dev_dir,
                                                                       poison_loss_at, value):
    out_dir = tmp_path / "run"
    poison_loss_at(7, value)
    config = load_config_for(corpus_file, out_dir, **{"train.eval_steps": 2, "train.save_steps": 2,
                                                       "data.dev_dir": str(stsb_dev_dir)})
    with pytest.raises(TrainingError) as info:
        train(config, progress=False)
    message = str(info.value)
    assert message.startswith("step 7: loss is ") and "\n" not in message and str(out_dir) in message
    # The last good checkpoint is step 6, intact, with finite weights; nothing was written for step 7.
    checkpoints = ckpt.list_checkpoints(out_dir / "checkpoints")
    assert [ckpt.checkpoint_step(p) for p in checkpoints] == [4, 6] and all(ckpt.verify(p) for p in checkpoints)
    assert all(torch.isfinite(t).all() for t in load_file(str(checkpoints[-1] / "encoder.safetensors")).values())
    # The best model so far is complete, finite, and the one its marker names.
    best = json.loads((out_dir / BEST_MODEL).read_text())
    assert best["step"] <= 6
    assert all(torch.isfinite(t).all() for t in model_weights(out_dir).values())
    assert max(json.loads(line)["step"] for line in (out_dir / "metrics.jsonl").read_text().splitlines()) == 6


def test_non_finite_gradient_stops_before_the_update(tmp_path, corpus_file, monkeypatch):
    """A finite loss whose gradient is NaN (d sqrt(x)/dx at 0) stops the run naming its step; no
    checkpoint is written from the poisoned weights (checks run on the device, read at the window's end)."""
    from cselab.losses.infonce import InfoNCELoss

    original = InfoNCELoss.forward
    calls = []

    def forward(self, inputs):
        loss, logs = original(self, inputs)
        calls.append(None)
        if len(calls) == 3:
            loss = loss + 0 * torch.sqrt(inputs.anchor[0, 0] * 0)  # adds 0 to the loss, NaN to the gradient
        return loss, logs

    monkeypatch.setattr(InfoNCELoss, "forward", forward)
    out_dir = tmp_path / "run"
    with pytest.raises(TrainingError, match=r"^step 3: gradient norm is not finite"):
        config = load_config_for(corpus_file, out_dir, **{"train.save_steps": 1, "optim.max_grad_norm": 0})
        train(config, progress=False)
    checkpoints = ckpt.list_checkpoints(out_dir / "checkpoints")
    assert [ckpt.checkpoint_step(p) for p in checkpoints] == [1, 2]
    assert all(torch.isfinite(t).all() for t in load_file(str(checkpoints[-1] / "encoder.safetensors")).values())


def test_cli_reports_a_numerical_fault_in_one_line(tmp_path, corpus_file, poison_loss_at, capsys):
    import cselab.cli as cli
    from tests.reliability.conftest import base_overrides

    poison_loss_at(2, math.nan)
    args = ["train"]
    for item in base_overrides(corpus_file, tmp_path / "run"):
        args += ["--set", item]
    assert cli.main(args) == 2  # TrainingError is a CselabError: one line, exit 2
    err = capsys.readouterr().err
    # The progress bar also writes to stderr; the error itself is one line and no traceback.
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "step 2: loss is not finite" in errors[0] and "Traceback" not in err
