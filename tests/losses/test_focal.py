"""Focal-InfoNCE against a hand computation of Eq. (2) and the paper's gradients, Eqs. (4) and (5)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs
from cselab.losses.focal import focal_infonce
from cselab.losses.infonce import InfoNCELoss

TAU, M = 0.07, 0.3


def random_similarities(n: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sims = rng.uniform(-0.6, 0.9, size=(n, n))
    np.fill_diagonal(sims, rng.uniform(0.5, 0.99, size=n))
    return sims


def hand_loss(sims: np.ndarray, tau: float, m: float, hard: np.ndarray | None = None) -> float:
    total = 0.0
    n = len(sims)
    for i in range(n):
        sp = sims[i, i]
        negatives = [sims[i, j] for j in range(n) if j != i] + ([] if hard is None else list(hard[i]))
        z = np.exp(sp**2 / tau) + sum(np.exp(s * (s + m) / tau) for s in negatives)
        total += -np.log(np.exp(sp**2 / tau) / z)
    return total / n


def test_loss_equals_hand_formula_on_fixed_similarities():
    sims = random_similarities()
    loss, _ = focal_infonce(torch.tensor(sims), None, M, TAU)
    assert loss.item() == pytest.approx(hand_loss(sims, TAU, M), rel=1e-9)


def test_hard_negatives_take_the_negative_form():
    sims = random_similarities()
    hard = np.random.default_rng(1).uniform(0.2, 0.95, size=(5, 3))
    loss, _ = focal_infonce(torch.tensor(sims), torch.tensor(hard), M, TAU)
    assert loss.item() == pytest.approx(hand_loss(sims, TAU, M, hard), rel=1e-9)


def test_module_uses_cosines_of_embeddings_and_hard_negatives():
    torch.manual_seed(0)
    anchor, positive, negative = torch.randn(6, 8), torch.randn(6, 8), torch.randn(6, 8)
    term = LOSSES.build("focal", temperature=TAU, margin=M)
    loss, logs = term(LossInputs(anchor, positive, negative))
    cos = lambda a, b: (F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T).double().numpy()  # noqa: E731
    assert loss.item() == pytest.approx(hand_loss(cos(anchor, positive), TAU, M, cos(anchor, negative)), rel=1e-5)
    assert 0.0 <= logs["acc"] <= 1.0


def gradients(sims: np.ndarray, tau: float, m: float) -> tuple[np.ndarray, np.ndarray]:
    s = torch.tensor(sims, requires_grad=True)
    loss, _ = focal_infonce(s, None, m, tau)
    (grad,) = torch.autograd.grad(loss, s)
    # The softmax weights e^{.}/Z_i of Eq. (4)/(5), computed by hand.
    n = len(sims)
    z = np.array([np.exp(sims[i, i] ** 2 / tau) + sum(np.exp(sims[i, j] * (sims[i, j] + m) / tau)
                                                     for j in range(n) if j != i) for i in range(n)])
    return grad.numpy() * n, z  # x n: the paper's L sums over anchors, the module averages


def test_positive_gradient_matches_equation_5():
    sims = random_similarities()
    grad, z = gradients(sims, TAU, M)
    for i in range(len(sims)):
        sp = sims[i, i]
        expected = 2 / TAU * (np.exp(sp**2 / TAU) / z[i] - 1) * sp  # Eq. (5)
        assert grad[i, i] == pytest.approx(expected, rel=1e-9)


def test_negative_gradient_matches_equation_4():
    """d/ds of s(s+m)/tau is (2s+m)/tau. Eq. (4) as printed, 2(s+m)/tau, is that derivative only at
    m = 0 (it is the derivative of (s+m)^2/tau): the implementation follows the loss, Eq. (2)."""
    sims = random_similarities()
    for m in (0.0, M):
        grad, z = gradients(sims, TAU, m)
        for i in range(len(sims)):
            for j in range(len(sims)):
                if i == j:
                    continue
                s = sims[i, j]
                weight = np.exp(s * (s + m) / TAU) / z[i]
                assert grad[i, j] == pytest.approx((2 * s + m) / TAU * weight, rel=1e-9)
                if m == 0.0:
                    assert grad[i, j] == pytest.approx(2 / TAU * weight * (s + m), rel=1e-9)  # Eq. (4) as printed


def test_harder_negatives_get_larger_gradients():
    """Eq. (4)'s reading: a negative with a higher similarity contributes more to the loss."""
    sims = np.full((3, 3), 0.1)
    np.fill_diagonal(sims, 0.9)
    sims[0, 1] = 0.8
    grad, _ = gradients(sims, TAU, M)
    assert grad[0, 1] > grad[0, 2] > 0


def test_without_modulation_and_margin_it_is_infonce():
    torch.manual_seed(0)
    anchor, positive = torch.randn(7, 16), torch.randn(7, 16)
    outputs = LossInputs(anchor, positive)
    plain, _ = LOSSES.build("focal", temperature=0.05, margin=0.0, modulated=False)(outputs)
    reference, _ = InfoNCELoss(temperature=0.05)(outputs)
    assert plain.item() == pytest.approx(reference.item(), rel=1e-6)
    focal, _ = LOSSES.build("focal", temperature=0.05, margin=0.0)(outputs)
    assert focal.item() != pytest.approx(reference.item(), rel=1e-3)


def test_temperature_default_follows_the_backbone():
    from cselab.losses import build_objective

    objective = build_objective([{"name": "focal"}], {"model_type": "bert"})
    _, logs = objective(LossInputs(torch.randn(4, 8), torch.randn(4, 8)))
    assert logs["focal.tau"].item() == pytest.approx(0.07)  # BERT-like
    objective = build_objective([{"name": "focal"}], {"model_type": "roberta"})
    _, logs = objective(LossInputs(torch.randn(4, 8), torch.randn(4, 8)))
    assert logs["focal.tau"].item() == pytest.approx(0.05)


def test_invalid_temperature_is_rejected():
    with pytest.raises(ValueError, match="temperature"):
        LOSSES.build("focal", temperature=0.0)
