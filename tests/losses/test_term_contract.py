"""The loss-term contract (losses/base.py): hooks checked when a recipe is validated, logs named by term."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from cselab.config import ConfigError
from cselab.losses import LOSSES, Objective, build_objective, check_objective, log_names
from cselab.losses.base import LossInputs, LossTerm, input_fields


@pytest.fixture
def registered():
    """A decorator registering a test term under a name for this test only."""
    saved = LOSSES.snapshot()
    yield lambda name: LOSSES.register(name, "a test term")
    LOSSES.restore(saved)


def test_registry_lives_in_base_and_every_shipped_loss_is_a_term():
    import cselab.losses as package
    import cselab.losses.base as base

    assert package.LOSSES is base.LOSSES
    for name in LOSSES.names():
        assert issubclass(LOSSES.get(name), LossTerm), name


def test_two_terms_of_one_kind_log_apart():
    """Two NT-Xent terms with different temperatures: before, both wrote "acc" and the loss's own key,
    the second overwriting the first."""
    objective = build_objective([{"name": "ntxent", "temperature": 0.05}, {"name": "ntxent", "temperature": 1.0},
                                 {"name": "infonce"}])
    anchor, positive = torch.randn(6, 8), torch.randn(6, 8)
    total, logs = objective(LossInputs(anchor, positive))
    assert set(logs) == {"ntxent.loss", "ntxent.acc", "ntxent_2.loss", "ntxent_2.acc", "infonce.loss", "infonce.acc"}
    first, second, third = (term(LossInputs(anchor, positive))[0] for term in objective.terms)
    assert logs["ntxent.loss"].item() == pytest.approx(first.item())
    assert logs["ntxent_2.loss"].item() == pytest.approx(second.item())
    assert first.item() != pytest.approx(second.item())
    assert total.item() == pytest.approx((first + second + third).item())


def test_log_names_stay_distinct_when_a_loss_is_named_like_a_numbered_one():
    assert log_names(["x", "x", "y"]) == ["x", "x_2", "y"]
    labels = log_names(["x", "x", "x_2"])
    assert len(set(labels)) == 3


def test_needs_outside_the_step_inputs_is_a_config_error(registered):
    @registered("test_needs_typo")
    class Typo(LossTerm):
        needs = frozenset({"anchor", "postive"})

    with pytest.raises(ConfigError, match=r"objective\[0\] \(test_needs_typo\): needs names postive, not a field"):
        check_objective([{"name": "test_needs_typo"}])
    assert "positive" in input_fields()


def test_a_masked_term_without_masking_rates_is_a_config_error(registered):
    @registered("test_masked_no_rates")
    class NoRates(LossTerm):
        needs = frozenset({"masked"})

    with pytest.raises(ConfigError, match=r"objective\[0\] \(test_masked_no_rates\): .*masking"):
        check_objective([{"name": "test_masked_no_rates"}])


def test_a_plain_module_is_refused_by_name_as_it_registers():
    with pytest.raises(TypeError, match=r"loss 'test_plain_module': Plain must subclass cselab.losses.base.LossTerm"):
        @LOSSES.register("test_plain_module", "an nn.Module, not a LossTerm")
        class Plain(nn.Module):
            needs = frozenset({"anchor"})
    assert "test_plain_module" not in LOSSES


def test_parameters_are_checked_against_the_constructor(registered):
    @registered("test_params")
    class WithParams(LossTerm):
        needs = frozenset({"anchor", "positive"})

        def __init__(self, scale: float = 1.0, hidden_size: int | None = None):
            super().__init__()
            self.sized = hidden_size is not None  # None while a recipe is validated

    check_objective([{"name": "test_params", "scale": 2, "weight": 0.5}])
    with pytest.raises(ConfigError, match=r"objective\[0\].scale: expected a finite number, got 'x'"):
        check_objective([{"name": "test_params", "scale": "x"}])
    with pytest.raises(ConfigError, match=r"objective\[0\].skale: unknown parameter .*allowed: weight, scale"):
        check_objective([{"name": "test_params", "skale": 2}])
    objective = build_objective([{"name": "test_params"}], {"hidden_size": 4, "vocab_size": 9})
    assert isinstance(objective, Objective) and objective.terms[0].sized  # context fills what it takes
