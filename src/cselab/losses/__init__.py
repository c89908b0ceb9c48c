"""Objective terms, one per file, found by name in ``LOSSES``."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

from torch import nn

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
    from cselab.config import ConfigError

    for i, term in enumerate(terms):
        name, _, params = _split_term(term)
        if name not in LOSSES:
            raise ConfigError(f"objective[{i}].name: unknown loss {name!r} (known: {', '.join(LOSSES.names())})")
        signature = inspect.signature(LOSSES.get(name).__init__)
        allowed = [p for p in signature.parameters if p != "self"]
        for key in params:
            if key not in allowed:
                raise ConfigError(f"objective[{i}].{key}: unknown parameter of {name} (allowed: weight, {', '.join(allowed)})")
        try:
            LOSSES.build(name, **params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"objective[{i}] ({name}): {exc}") from None


def build_objective(terms: list[dict], context: dict | None = None) -> list[tuple[str, float, nn.Module]]:
    """The terms of a recipe; ``context`` fills sizes a term accepts but the recipe left unset."""
    built = []
    for term in terms:
        name, weight, params = _split_term(term)
        accepted = inspect.signature(LOSSES.get(name).__init__).parameters
        for key, value in (context or {}).items():
            if key in accepted and params.get(key) is None and value is not None:
                params[key] = value
        built.append((name, weight, LOSSES.build(name, **params)))
    return built
