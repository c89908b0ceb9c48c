"""Parameters whose shapes are known only at the first training step (a term's own head).

The loop builds the optimizer before the first step, when a term does not yet know the
embedding size or vocabulary. Such parameters start as empty ``nn.Parameter`` placeholders that
are already in the optimizer; at the first step (or when a checkpoint is loaded) they get their
shape in place, keeping their identity, so the optimizer trains them. Unlike PyTorch's lazy
modules, the placeholders are ordinary tensors: state dicts, parameter counts and checkpoint
loading work before and after sizing. (Distributed data-parallel training needs the sizes at
construction: pass them as the term's parameters.)
"""
from __future__ import annotations

import math

import torch
from torch import nn


def init_linear_(weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """nn.Linear's default initialisation, for parameters created after construction."""
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(weight.shape[1])
        nn.init.uniform_(bias, -bound, bound)


class DeferredParameters:
    """Mixin for an ``nn.Module`` with placeholder parameters sized later (see module docstring)."""

    def _declare_deferred(self, *names: str) -> None:
        self._deferred_names = names
        for name in names:
            setattr(self, name, nn.Parameter(torch.empty(0)))
        self._register_load_state_dict_pre_hook(self._size_from_state_dict)

    @property
    def sized(self) -> bool:
        return all(getattr(self, name).numel() > 0 for name in self._deferred_names)

    def _size(self, name: str, shape: tuple[int, ...], device: torch.device | None = None) -> nn.Parameter:
        parameter = getattr(self, name)
        parameter.data = torch.empty(shape, dtype=parameter.dtype, device=device or parameter.device)
        return parameter

    def _size_from_state_dict(self, state_dict, prefix, *args) -> None:
        for name in self._deferred_names:
            saved = state_dict.get(prefix + name)
            if saved is not None and getattr(self, name).numel() == 0:
                self._size(name, tuple(saved.shape))
