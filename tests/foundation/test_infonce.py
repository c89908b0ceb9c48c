"""InfoNCE against hand computations on fixed similarity matrices."""
import math

import pytest
import torch

from cselab.losses.base import LossInputs
from cselab.losses.infonce import InfoNCELoss

# Columns have unit norm, so with anchors = the standard basis, cos(anchor_i, positive_j) = S[i][j].
S = [[0.8, 0.6, 0.0],
     [0.6, 0.8, 0.0],
     [0.0, 0.0, 1.0]]


def _embeddings():
    anchors = torch.eye(3)
    positives = torch.tensor(S).T  # row j is column j of S
    return anchors, positives


def _hand_loss(rows: list[list[float]], temperature: float) -> float:
    total = 0.0
    for i, row in enumerate(rows):
        log_sum = math.log(sum(math.exp(v / temperature) for v in row))
        total += log_sum - row[i] / temperature
    return total / len(rows)


@pytest.mark.parametrize("temperature", [0.05, 0.5, 1.0])
def test_infonce_equals_hand_computation(temperature):
    anchors, positives = _embeddings()
    loss, logs = InfoNCELoss(temperature=temperature)(LossInputs(anchor=anchors, positive=positives))
    assert loss.item() == pytest.approx(_hand_loss(S, temperature), rel=1e-5)
    # Row 0 and 1: the diagonal is the largest entry, so every anchor finds its positive.
    assert logs["acc"] == 1.0


def test_hard_negative_column_follows_the_formula():
    anchors, positives = _embeddings()
    # Hard negatives: negative_i has cosine 0.6 with anchor i only; chosen as rows of a matrix H.
    H = [[0.6, 0.0, 0.0], [0.0, 0.6, 0.0], [0.0, 0.0, 0.6]]
    negatives = torch.tensor(H).T + torch.tensor([[0.0, 0.0, 0.8], [0.8, 0.0, 0.0], [0.0, 0.8, 0.0]])
    # cos(anchor_i, negative_j) = negatives[j][i] / |negatives[j]| with |negatives[j]| = 1.
    neg_cos = [[negatives[j][i].item() for j in range(3)] for i in range(3)]
    temperature, weight = 0.1, 0.7
    for w in (0.0, weight):
        rows = []
        for i in range(3):
            negative_logits = [neg_cos[i][j] + (w * temperature if i == j else 0.0) for j in range(3)]
            rows.append(S[i] + negative_logits)
        expected = _hand_loss(rows, temperature)
        loss, _ = InfoNCELoss(temperature=temperature, hard_negative_weight=w)(
            LossInputs(anchor=anchors, positive=positives, negative=negatives))
        assert loss.item() == pytest.approx(expected, rel=1e-5)
    without, _ = InfoNCELoss(temperature=temperature)(LossInputs(anchor=anchors, positive=positives))
    with_column, _ = InfoNCELoss(temperature=temperature)(
        LossInputs(anchor=anchors, positive=positives, negative=negatives))
    assert with_column.item() > without.item()  # more negatives in the denominator


def test_temperature_must_be_positive():
    with pytest.raises(ValueError):
        InfoNCELoss(temperature=0)
