"""Embedding-level positives (UNA appendix, MODALS-style) as a term wrapper."""
from __future__ import annotations

import pytest
import torch

from cselab.losses import LOSSES
from cselab.losses.base import LossInputs
from cselab.losses.embedding_positive import embedding_positive, hardest_in_batch
from cselab.losses.infonce import InfoNCELoss


@pytest.fixture
def embeddings():
    torch.manual_seed(0)
    anchor = torch.randn(6, 8)
    anchor[3] = anchor[1] * 2 + 0.01  # rows 1 and 3 are each other's hardest example
    return anchor, anchor + 0.1 * torch.randn(6, 8)


def test_hardest_example_is_the_most_similar_other_row(embeddings):
    anchor, _ = embeddings
    hardest = hardest_in_batch(anchor)
    assert hardest[1] == 3 and hardest[3] == 1
    assert all(int(h) != i for i, h in enumerate(hardest))


def test_interpolation_and_extrapolation_follow_the_formula(embeddings):
    anchor, positive = embeddings
    hardest = hardest_in_batch(anchor)
    inter = embedding_positive(anchor, positive, "interpolate", 0.25)
    extra = embedding_positive(anchor, positive, "extrapolate", 0.25)
    assert torch.allclose(inter, positive + 0.25 * (positive[hardest] - positive))
    assert torch.allclose(extra, positive + 0.25 * (positive - positive[hardest]))
    assert torch.equal(embedding_positive(anchor, positive, "none", 0.25), positive)


def test_gaussian_noise_scales_with_strength(embeddings):
    anchor, positive = embeddings
    generator = torch.Generator().manual_seed(0)
    small = (embedding_positive(anchor, positive, "gaussian", 0.01, generator) - positive).abs().mean()
    large = (embedding_positive(anchor, positive, "gaussian", 0.5, generator) - positive).abs().mean()
    assert 0 < small < large


def test_wrapper_feeds_the_new_positives_to_the_inner_term(embeddings):
    anchor, positive = embeddings
    term = LOSSES.build("embedding_positive", kind="interpolate", strength=0.3,
                        inner={"name": "infonce", "temperature": 0.1})
    loss, logs = term(LossInputs(anchor, positive))
    expected, _ = InfoNCELoss(0.1)(LossInputs(anchor, embedding_positive(anchor, positive, "interpolate", 0.3)))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert set(logs) == {"loss", "acc"}  # the inner InfoNCE's logs
    focal = LOSSES.build("embedding_positive", kind="gaussian", inner={"name": "focal", "temperature": 0.05})
    loss, logs = focal(LossInputs(anchor, positive))
    assert torch.isfinite(loss) and "tau" in logs  # Focal-InfoNCE logs its temperature


def test_bad_settings_have_clear_errors():
    with pytest.raises(ValueError, match="kind"):
        LOSSES.build("embedding_positive", kind="mixup")
    with pytest.raises(ValueError, match="unknown loss"):
        LOSSES.build("embedding_positive", inner={"name": "nope"})
    with pytest.raises(ValueError, match="inner"):
        LOSSES.build("embedding_positive", inner={"name": "infonce", "tau": 0.1})
