"""The causes of the test run's warnings are gone (issue 39, item 15), not filtered: an fp16 update the
gradient scaler skips no longer steps the learning-rate schedule (torch's "lr_scheduler.step() before
optimizer.step()" warning), and the Hub's connection attempt ends cleanly (tests/reliability/test_new_user.py)."""
from __future__ import annotations

import warnings

import pytest
import torch

from cselab.train.optimizer import OptimizerStep


def update_with_a_scaler():
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    return OptimizerStep(optimizer, scheduler, [weight], 1.0, scaler), weight, scheduler


def step(update, weight, gradient: float) -> None:
    update.scale(torch.ones(()))
    weight.grad = torch.full_like(weight, gradient)
    update()


def test_a_skipped_fp16_update_leaves_the_schedule_and_warns_of_nothing():
    update, weight, scheduler = update_with_a_scaler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's scheduler-order warning would raise here
        step(update, weight, float("inf"))  # overflow: the scaler skips the update
        assert scheduler.last_epoch == 0 and torch.equal(weight.detach(), torch.ones(3))
        step(update, weight, 1.0)  # applied: the schedule moves on
        assert scheduler.last_epoch == 1 and not torch.equal(weight.detach(), torch.ones(3))


def test_without_a_scaler_every_update_steps_the_schedule():
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([weight], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    update = OptimizerStep(optimizer, scheduler, [weight], 1.0)
    for _ in range(3):
        weight.grad = torch.ones_like(weight)
        update()
    assert scheduler.last_epoch == 3


@pytest.mark.parametrize("gradient", [float("inf"), 1.0])
def test_the_gpu_paths_scaler_test_sees_no_scheduler_warning(gradient):
    update, weight, _ = update_with_a_scaler()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            step(update, weight, gradient)
    assert [str(w.message) for w in caught if "lr_scheduler.step()" in str(w.message)] == []
