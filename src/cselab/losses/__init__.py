"""Objective terms, one per file, found by name in ``LOSSES``; ``Objective`` is a recipe's weighted sum."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import torch
from torch import nn

from cselab.errors import ConfigError
from cselab.losses.base import LossInputs, LossTerm
from cselab.registry import Registry

LOSSES: Registry[nn.Module] = Registry("loss")

# Each module registers its loss on import: adding a loss is adding a file.
for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"cselab.losses.{_module.name}")


def _split_term(term: dict) -> tuple[str, float, dict]:
    params = dict(term)
    name = params.pop("name")
    weight = float(params.pop("weight", 1.0))
    return name, weight, params


def check_objective(terms: list[dict]) -> None:
    """Raise ConfigError naming objective[i].key for an unknown loss or parameter."""
    for i, term in enumerate(terms):
        name, _, params = _split_term(term)
        if name not in LOSSES:
            raise ConfigError(f"objective[{i}].name: unknown loss {name!r} (known: {', '.join(LOSSES.names())})")
        signature = inspect.signature(LOSSES.get(name).__init__)
        allowed = [p for p in signature.parameters if p != "self"]
        for key in params:
            if key not in allowed:
                raise ConfigError(f"objective[{i}].{key}: unknown parameter of {name} "
                                  f"(allowed: weight, {', '.join(allowed)})")
        try:
            LOSSES.build(name, **params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"objective[{i}] ({name}): {exc}") from None


class Objective(nn.Module):
    """The weighted sum of a recipe's terms; ``needs`` is every input field some term requires,
    ``wants`` every field some term reads when the step has it (``base.LossTerm``)."""

    def __init__(self, names: list[str], weights: list[float], terms: list[LossTerm]):
        super().__init__()
        self.names, self.weights = names, weights
        self.terms = nn.ModuleList(terms)
        self.needs = frozenset().union(*(term.needs for term in terms))
        self.wants = frozenset().union(*(getattr(term, "wants", frozenset()) for term in terms))

    @property
    def encodes_views(self) -> bool:
        """Whether some term reads the contrastive views' embeddings (MLM alone does not)."""
        return bool(self.needs - {"masked"})

    @property
    def encodes_negatives_twice(self) -> bool:
        """Whether a step with hard negatives should encode each one twice (two dropout masks) and
        hand the second encoding over as ``negative_positive`` (UNA's 4N NT-Xent)."""
        return "negative_positive" in self.wants

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The weighted sum of the terms, and their logs."""
        total, logs = None, {}
        for weight, term in zip(self.weights, self.terms, strict=True):
            loss, term_logs = term(inputs)
            total = weight * loss if total is None else total + weight * loss
            logs.update(term_logs)
        return total, logs


def build_objective(terms: list[dict], context: dict | None = None) -> Objective:
    """The terms of a recipe; ``context`` fills sizes a term accepts but the recipe left unset
    (embedding and vocabulary sizes, the backbone's model type), known before step 1."""
    names, weights, built = [], [], []
    for term in terms:
        name, weight, params = _split_term(term)
        accepted = inspect.signature(LOSSES.get(name).__init__).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())  # a wrapper's context
        for key, value in (context or {}).items():
            if (key in accepted or takes_any) and params.get(key) is None and value is not None:
                params[key] = value
        names.append(name)
        weights.append(weight)
        built.append(LOSSES.build(name, **params))
    return Objective(names, weights, built)
