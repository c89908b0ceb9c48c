"""The loop's gradient clipping equals torch's clip_grad_norm_, including when nothing is clipped."""

import pytest
import torch

from cselab.train.loop import clip_gradients


def with_gradients(scale: float) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 3))
    (model(torch.randn(4, 6)) * scale).sum().backward()
    return model


@pytest.mark.parametrize("scale", [1e-4, 1.0, 100.0])
@pytest.mark.parametrize("max_norm", [0.0, 1.0])
def test_clip_gradients_matches_clip_grad_norm(scale, max_norm):
    ours, theirs = with_gradients(scale), with_gradients(scale)
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm or float("inf"))
    norm = clip_gradients(list(ours.parameters()), max_norm)
    assert torch.allclose(norm, expected)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        assert torch.equal(a.grad, b.grad)
    if max_norm and scale == 100.0:  # it did clip
        clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in ours.parameters()]))
        assert clipped == pytest.approx(max_norm, rel=1e-4)
