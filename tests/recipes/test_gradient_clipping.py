"""Gradient clipping follows each method's own training loop: UNA's authors do not clip, SimCSE's
Trainer clips at 1.0 (issue 38 item 5)."""
from __future__ import annotations

import json

import pytest

from cselab.config import list_recipes, load_config

UNA_RECIPES = [name for name in list_recipes() if name == "una" or name.startswith("una-")]


def test_una_prints_no_clipping(capsys):
    from cselab.cli import main

    assert main(["train", "--recipe", "una", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["optim"]["max_grad_norm"] == 0


@pytest.mark.parametrize("recipe", UNA_RECIPES)
def test_every_una_recipe_trains_without_clipping(recipe):
    assert load_config(recipe).optim.max_grad_norm == 0


def test_simcse_keeps_clipping_at_one():
    assert load_config("simcse").optim.max_grad_norm == 1.0
    assert len(UNA_RECIPES) >= 7  # una and its ablations, all inheriting una.yaml
