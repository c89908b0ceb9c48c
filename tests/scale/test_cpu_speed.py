"""speed/cpu.py: the cheaper dropout is still dropout, and the attention it swaps in is exact."""
import math

import pytest
import torch
from torch import nn

from cselab.speed.cpu import FastDropout, fast_dropout, reuse_freed_memory, use_fast_dropout


def test_fast_dropout_keeps_each_element_with_probability_one_minus_p():
    torch.manual_seed(0)
    n, p = 400_000, 0.1
    out = fast_dropout(torch.ones(n), p)
    kept = out > 0
    # Binomial(n, 0.9): 5 standard deviations is a bound a correct mask essentially never crosses.
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / (1 - p)))
    assert out.mean().item() == pytest.approx(1.0, abs=0.01)  # inverted dropout keeps the expectation


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_fast_dropout_in_other_dtypes_keeps_values_and_rate(dtype):
    torch.manual_seed(2)
    n, p = 200_000, 0.25
    x = torch.rand(n, dtype=dtype) + 1
    out = fast_dropout(x, p)
    kept = out != 0
    assert out.dtype == dtype
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)
    assert torch.equal(out[kept], x[kept] * (1 / (1 - p)))
    assert torch.equal(fast_dropout(x, 1.0), torch.zeros_like(x))


def test_fast_dropout_masks_are_independent_of_position():
    torch.manual_seed(1)
    masks = torch.stack([fast_dropout(torch.ones(8), 0.5) > 0 for _ in range(4000)]).float()
    # Each of the 4 slices of a 64-bit draw (and both draws) is kept half of the time, uncorrelated.
    assert torch.allclose(masks.mean(0), torch.full((8,), 0.5), atol=0.04)
    corr = torch.corrcoef(masks.T)
    assert (corr - torch.eye(8)).abs().max() < 0.07


def test_fast_dropout_is_reproducible_from_the_seed_and_differs_between_calls():
    torch.manual_seed(3)
    a, b = fast_dropout(torch.ones(1000), 0.1), fast_dropout(torch.ones(1000), 0.1)
    torch.manual_seed(3)
    assert torch.equal(a, fast_dropout(torch.ones(1000), 0.1))
    assert not torch.equal(a, b)


def test_fast_dropout_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(4)
    x = torch.randn(50, 7, requires_grad=True)
    layer = FastDropout(0.3).train()
    y = layer(x)
    y.sum().backward()
    kept = y.detach() != 0
    assert torch.allclose(x.grad, kept.float() / 0.7)
    assert torch.equal(layer.eval()(x), x)


def test_use_fast_dropout_swaps_modules_and_attention_is_exact(tiny_encoder):
    backbone = tiny_encoder.backbone
    n_dropout = sum(type(m) is nn.Dropout for m in backbone.modules())
    features = tiny_encoder.tokenize(["a short one", "a somewhat longer sentence than the first one"])
    mask = features["attention_mask"].bool()  # padded positions' outputs are unused and may differ
    with torch.no_grad():
        backbone.eval()
        before = backbone(**features).last_hidden_state
        assert use_fast_dropout(backbone) == n_dropout > 0
        assert not any(type(m) is nn.Dropout for m in backbone.modules())
        after = backbone(**features).last_hidden_state
        assert torch.allclose(after[mask], before[mask], atol=1e-5)  # inference: the fused kernel
        # Training path with a dropout so small that nothing is dropped: equals the fused kernel.
        backbone.train()
        for m in backbone.modules():
            if isinstance(m, FastDropout):
                m.p = 1e-9
        trained_path = backbone(**features).last_hidden_state
    assert torch.allclose(trained_path[mask], before[mask], atol=1e-5)
    assert "cselab" not in backbone.config.to_json_string()  # nothing of it is saved with the model


def test_reuse_freed_memory_answers_without_error():
    assert reuse_freed_memory() in (True, False)
