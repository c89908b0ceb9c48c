"""Helpers of the training loop: gradient clipping equals torch's clip_grad_norm_; the matmul peak
keeps its highest probe."""

import pytest
import torch

from cselab.train.optimizer import clip_gradients


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
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a.grad, b.grad)
    if max_norm and scale == 100.0:  # it did clip
        clipped = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in ours.parameters()]))
        assert clipped == pytest.approx(max_norm, rel=1e-4)


def test_the_peak_is_the_highest_probe_so_far_and_probed_again_when_beaten_or_old(monkeypatch):
    import cselab.train.throughput as loop

    probes = iter([2.0e11, 3.0e11, 1.0e11, 2.5e11])
    monkeypatch.setattr(loop, "matmul_peak_flops", lambda dtype, seconds, device: next(probes))
    monkeypatch.setattr(loop, "_PEAKS", {})
    assert loop.measured_peak(torch.bfloat16, "cpu") == 2.0e11
    assert loop.measured_peak(torch.bfloat16, "cpu") == 2.0e11  # fresh: no second probe
    # A window beating the peak probes again, but not within REPROBE_MIN_SECONDS of the last probe.
    assert loop.measured_peak(torch.bfloat16, "cpu", achieved=2.2e11) == 2.0e11
    monkeypatch.setattr(loop, "REPROBE_MIN_SECONDS", -1.0)
    assert loop.measured_peak(torch.bfloat16, "cpu", achieved=1.9e11) == 2.0e11  # not beaten: no probe
    assert loop.measured_peak(torch.bfloat16, "cpu", achieved=2.2e11) == 3.0e11
    assert loop.measured_peak(torch.bfloat16, "cpu", achieved=3.1e11) == 3.0e11  # a slower probe does not lower it
    # An old probe is repeated whatever the windows achieve.
    monkeypatch.setattr(loop, "REPROBE_SECONDS", -1.0)
    assert loop.measured_peak(torch.bfloat16, "cpu") == 3.0e11  # the fourth probe (2.5e11) was taken
    assert next(probes, None) is None
