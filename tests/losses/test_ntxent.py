"""NT-Xent over 2N views (CLEAR Eq. 1) against a hand computation; its reductions, hard negatives as
columns or as instances (UNA's 4N form), and what it asks of the step (tests/losses/test_equations.py
checks the numbers against the papers' equations)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs

TAU = 0.1


def hand_ntxent(anchor: np.ndarray, positive: np.ndarray, tau: float, negatives: np.ndarray | None = None) -> float:
    views = np.concatenate([anchor, positive])
    views = views / np.linalg.norm(views, axis=1, keepdims=True)
    extra = None if negatives is None else negatives / np.linalg.norm(negatives, axis=1, keepdims=True)
    n2 = len(views)
    n = n2 // 2
    total = 0.0
    for i in range(n2):
        twin = (i + n) % n2
        denominator = sum(np.exp(views[i] @ views[k] / tau) for k in range(n2) if k != i)
        if extra is not None:
            denominator += sum(np.exp(views[i] @ e / tau) for e in extra)
        total += -np.log(np.exp(views[i] @ views[twin] / tau) / denominator)
    return total / n2


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    return rng.normal(size=(4, 6)), rng.normal(size=(4, 6)), rng.normal(size=(3, 6))


def test_matches_hand_computation(batch):
    anchor, positive, _ = batch
    loss, logs = LOSSES.build("ntxent", temperature=TAU)(LossInputs(torch.tensor(anchor), torch.tensor(positive)))
    assert loss.item() == pytest.approx(hand_ntxent(anchor, positive, TAU), rel=1e-6)
    assert 0 <= logs["acc"] <= 1


def test_negatives_are_extra_columns_for_every_view(batch):
    anchor, positive, negative = batch
    outputs = LossInputs(torch.tensor(anchor), torch.tensor(positive), torch.tensor(negative))
    loss, _ = LOSSES.build("ntxent", temperature=TAU)(outputs)
    assert loss.item() == pytest.approx(hand_ntxent(anchor, positive, TAU, negative), rel=1e-6)


def test_self_similarity_is_masked(batch):
    """Were the diagonal (cos = 1) a column, the loss would be larger than the hand value."""
    anchor, positive, _ = batch
    loss, _ = LOSSES.build("ntxent", temperature=TAU)(LossInputs(torch.tensor(anchor), torch.tensor(positive)))
    views = F.normalize(torch.tensor(np.concatenate([anchor, positive])), dim=-1)
    unmasked = views @ views.T / TAU
    targets = torch.tensor([4, 5, 6, 7, 0, 1, 2, 3])
    assert loss.item() < F.cross_entropy(unmasked, targets).item()
    # Identical views: the twin equals self; masked, each row's loss is log(1 + other columns).
    same = torch.tensor(anchor)
    loss_same, _ = LOSSES.build("ntxent", temperature=TAU)(LossInputs(same, same.clone()))
    assert loss_same.item() == pytest.approx(hand_ntxent(anchor, anchor, TAU), rel=1e-3)


def test_without_intra_view_negatives_is_symmetric_infonce(batch):
    anchor, positive, _ = batch
    a, p = torch.tensor(anchor), torch.tensor(positive)
    loss, _ = LOSSES.build("ntxent", temperature=TAU, intra_view_negatives=False)(LossInputs(a, p))
    logits = F.normalize(a, dim=-1) @ F.normalize(p, dim=-1).T / TAU
    targets = torch.arange(4)
    expected = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_label_view_as_positive(batch):
    anchor, positive, negative = batch
    outputs = LossInputs(torch.tensor(anchor), torch.tensor(positive),
                         label_view=torch.tensor(negative[:1].repeat(4, 0) + anchor))
    loss, _ = LOSSES.build("ntxent", temperature=TAU, positive_role="label_view")(outputs)
    assert loss.item() == pytest.approx(hand_ntxent(anchor, negative[:1].repeat(4, 0) + anchor, TAU), rel=1e-6)
    with pytest.raises(ValueError, match="views.label"):
        LOSSES.build("ntxent", positive_role="label_view")(LossInputs(torch.tensor(anchor), torch.tensor(positive)))
    with pytest.raises(ValueError, match="positive_role"):
        LOSSES.build("ntxent", positive_role="anchor")


def test_sum_reduction_is_the_mean_times_the_number_of_views(batch):
    anchor, positive, _ = batch
    inputs = LossInputs(torch.tensor(anchor), torch.tensor(positive))
    mean, _ = LOSSES.build("ntxent", temperature=TAU)(inputs)
    total, logs = LOSSES.build("ntxent", temperature=TAU, reduction="sum")(inputs)
    assert total.item() == pytest.approx(8 * mean.item(), rel=1e-6)
    assert logs["loss"].item() == pytest.approx(total.item())


def test_negatives_as_instances_need_their_second_view(batch):
    anchor, positive, negative = batch
    term = LOSSES.build("ntxent", temperature=TAU, hard_negatives="instances")
    a, p, n = (torch.tensor(x) for x in (anchor, positive, negative))
    with pytest.raises(ValueError, match="second view of the hard negatives"):
        term(LossInputs(a, p, n))
    with pytest.raises(ValueError, match="row for row"):
        term(LossInputs(a, p, n, negative_positive=n[:2]))


def test_negatives_as_instances_with_fewer_negatives_than_anchors(batch):
    """3 negatives for 4 anchors: NT-Xent over the 2 x 7 views, each negative paired with its twin."""
    anchor, positive, negative = batch
    twin = negative + 0.1
    a, p, n, t = (torch.tensor(x) for x in (anchor, positive, negative, twin))
    loss, logs = LOSSES.build("ntxent", temperature=TAU, hard_negatives="instances")(
        LossInputs(a, p, n, negative_positive=t))
    expected = hand_ntxent(np.concatenate([anchor, negative]), np.concatenate([positive, twin]), TAU)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert 0 <= logs["acc"] <= 1


def test_the_second_view_of_the_negatives_receives_gradient(batch):
    anchor, positive, negative = batch
    twin = torch.tensor(negative + 0.1, requires_grad=True)
    loss, _ = LOSSES.build("ntxent", temperature=TAU, hard_negatives="instances")(
        LossInputs(torch.tensor(anchor), torch.tensor(positive), torch.tensor(negative), negative_positive=twin))
    loss.backward()
    assert twin.grad is not None and twin.grad.abs().sum() > 0


def test_what_the_term_asks_of_the_step():
    from cselab.losses import build_objective

    instances = LOSSES.build("ntxent", hard_negatives="instances")
    assert instances.needs == {"anchor", "positive"} and "negative_positive" in instances.wants
    assert "negative_positive" not in LOSSES.build("ntxent").wants
    # The collator encodes each hard negative twice (the role negative_positive) when some term reads it.
    assert "negative_positive" in build_objective([{"name": "ntxent", "hard_negatives": "instances"}]).wants
    assert "negative_positive" in build_objective([{"name": "embedding_positive", "inner": {
        "name": "ntxent", "hard_negatives": "instances"}}]).wants
    for terms in ([{"name": "ntxent"}], [{"name": "infonce"}], [{"name": "focal"}, {"name": "mlm"}]):
        objective = build_objective(terms)
        assert "negative_positive" not in objective.wants | objective.needs


@pytest.mark.parametrize("key, value", [("hard_negatives", "rows"), ("reduction", "none")])
def test_unknown_choices_are_refused(key, value):
    with pytest.raises(ValueError, match=key):
        LOSSES.build("ntxent", **{key: value})
