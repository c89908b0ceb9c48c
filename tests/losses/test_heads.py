"""Training-only projection heads: CLEAR's Linear-ReLU-Linear and DiffCSE's batch-norm MLP."""
from __future__ import annotations

import torch
from torch import nn

from cselab.model.heads import HEADS, build_head


def test_clear_mlp_is_linear_relu_linear():
    head = build_head("clear_mlp", 16, output_size=8)
    assert [type(m) for m in head] == [nn.Linear, nn.ReLU, nn.Linear]
    assert head(torch.randn(4, 16)).shape == (4, 8)


def test_bn_mlp_normalises_the_batch():
    torch.manual_seed(0)
    head = build_head("bn_mlp", 16)
    assert sum(isinstance(m, nn.BatchNorm1d) for m in head) == 2
    out = head(torch.randn(32, 16) * 5 + 3)
    assert out.shape == (32, 16)
    assert torch.allclose(out.mean(0), torch.zeros(16), atol=1e-5)  # last batch norm has no affine shift
    assert "bn_mlp" in HEADS and "clear_mlp" in HEADS
