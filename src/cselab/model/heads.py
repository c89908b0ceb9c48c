"""Training-only heads over the pooled sentence vectors, found by name in ``HEADS``.

A projection head maps (B, h) -> (B, h') before the objective; encoding never uses it.
"""
from __future__ import annotations

from torch import nn

from cselab.registry import Registry

HEADS: Registry[nn.Module] = Registry("projection head")


@HEADS.register("none", "no projection: the objective sees the pooled vectors")
def no_head(hidden_size: int) -> nn.Module:
    return nn.Identity()


def build_head(name: str, hidden_size: int, **params) -> nn.Module:
    return HEADS.build(name, hidden_size=hidden_size, **params)


@HEADS.register("clear_mlp", "CLEAR/SimCLR nonlinear projection: Linear-ReLU-Linear")
def clear_mlp(hidden_size: int, output_size: int | None = None) -> nn.Module:
    """Wu et al. 2020 (CLEAR) follow SimCLR (Chen et al. 2020): g(H) = W2 ReLU(W1 H)."""
    return nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, output_size or hidden_size))


@HEADS.register("bn_mlp", "DiffCSE/AugCSE projection: Linear-BN-ReLU-Linear-BN (2 layers, batch norm)")
def bn_mlp(hidden_size: int, output_size: int | None = None) -> nn.Module:
    """Chuang et al. 2022 (DiffCSE), used by AugCSE: bias-free linears, the last batch norm without affine."""
    out = output_size or hidden_size
    return nn.Sequential(nn.Linear(hidden_size, hidden_size, bias=False), nn.BatchNorm1d(hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, out, bias=False), nn.BatchNorm1d(out, affine=False))
