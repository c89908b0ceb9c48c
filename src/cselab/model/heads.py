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
