"""Poolers: token states -> one vector per sentence (SimCSE's five), found by name."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from cselab.registry import Registry

Pooler = Callable[[Sequence[torch.Tensor], torch.Tensor], torch.Tensor]
POOLERS: Registry[Pooler] = Registry("pooler")
# Poolers that read intermediate layers need the backbone to return all hidden states.
NEEDS_HIDDEN_STATES = {"avg_first_last", "avg_top2"}


def _masked_mean(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mask = mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


@POOLERS.register("cls", "[CLS] state of the last layer; SimCSE's MLP goes on top")
def cls_pool(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    return hidden_states[-1][:, 0]


@POOLERS.register("cls_before_pooler", "[CLS] state of the last layer, no MLP")
def cls_before_pooler(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    return hidden_states[-1][:, 0]


@POOLERS.register("avg", "mean of the last layer's token states")
def avg_pool(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    return _masked_mean(hidden_states[-1], mask)


@POOLERS.register("avg_first_last", "mean over tokens of the first and last layers' average")
def avg_first_last(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    # hidden_states[0] is the embedding output; SimCSE's "first" is the first transformer layer.
    return _masked_mean((hidden_states[1] + hidden_states[-1]) / 2, mask)


@POOLERS.register("avg_top2", "mean over tokens of the last two layers' average")
def avg_top2(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    return _masked_mean((hidden_states[-2] + hidden_states[-1]) / 2, mask)
