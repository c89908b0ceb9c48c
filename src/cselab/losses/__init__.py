"""Objective terms, one per file, found by name in ``LOSSES`` (``base.py``); ``Objective`` is a recipe's
weighted sum."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import torch
from torch import nn

from cselab.errors import ConfigError
from cselab.losses.base import LOSSES, TOKEN_PASSES, LossInputs, LossTerm, build_term, input_fields

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
    """Raise ConfigError naming objective[i].key for an unknown loss, a parameter its constructor does
    not take or of the wrong type, a value it refuses, or a ``needs``/``wants`` field no step provides."""
    known = input_fields()
    given: dict[str, tuple[int, dict]] = {}
    for i, term in enumerate(terms):
        name, _, params = _split_term(term)
        if name not in LOSSES:
            raise ConfigError(f"objective[{i}].name: unknown loss {name!r} (known: {', '.join(LOSSES.names())})")
        if "context" in params:  # a wrapper's parameter that build_term fills with the model's sizes
            raise ConfigError(f"objective[{i}].context: filled by the training loop (the model's sizes), not a "
                              f"recipe key")
        problem = LOSSES.argument_problem(name, params, also_allowed=("weight",))
        if problem:
            key, message = problem
            raise ConfigError(f"objective[{i}].{key}: {message}" if key else f"objective[{i}] ({name}): {message}")
        try:
            built = LOSSES.build(name, **params)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"objective[{i}] ({name}): {exc}") from None
        for hook, fields in (("needs", built.needs), ("wants", built.wants)):
            unknown = sorted(set(fields) - set(known))
            if unknown:
                raise ConfigError(f"objective[{i}] ({name}): {hook} names {', '.join(unknown)}, not a field of "
                                  f"LossInputs ({', '.join(known)})")
        _check_token_passes(i, name, built, given)


def _check_token_passes(i: int, name: str, term: LossTerm, given: dict[str, tuple[int, dict]]) -> None:
    """Each token pass a term reads has the term's parameters for it, which the pass takes, and which
    are those of any earlier term reading the same pass (``given``: pass -> (term index, parameters))."""
    for pass_name in sorted((term.needs | term.wants) & set(TOKEN_PASSES)):
        if pass_name not in term.token_passes:
            raise ConfigError(f"objective[{i}] ({name}): reads {pass_name}, the token pass of "
                              f"{TOKEN_PASSES.describe(pass_name)}, but sets none of its parameters "
                              f"(.token_passes[{pass_name!r}])")
        params = dict(term.token_passes[pass_name])
        problem = TOKEN_PASSES.argument_problem(pass_name, params)
        if problem:
            raise ConfigError(f"objective[{i}] ({name}): token pass {pass_name}: {problem[1]}")
        if pass_name in given and given[pass_name][1] != params:
            first, earlier = given[pass_name]
            changed = sorted(key for key in {*params, *earlier} if params.get(key) != earlier.get(key))
            raise ConfigError(f"objective[{i}] ({name}): reads the token pass {pass_name} with other settings than "
                              f"objective[{first}] ({', '.join(changed)}); one pass serves every term that reads it")
        given.setdefault(pass_name, (i, params))


def model_problems(terms: list[dict], ask_hub: bool = False) -> list[str]:
    """One line per model a term names (``LossTerm.models``: the recipe's value, else the parameter's
    default) that cannot be loaded now, naming its key: ``objective[1].generator: cannot load ...``.
    ``ask_hub``: a Hub name counts only where the Hub answers for it (``sources.model_source_problem``)."""
    from cselab.sources import model_source_problem

    problems = []
    for i, term in enumerate(terms):
        name, _, params = _split_term(term)
        factory = LOSSES.get(name)
        for key, instead in factory.models.items():
            value = params.get(key, inspect.signature(factory).parameters[key].default)
            problem = model_source_problem(value, ask_hub=ask_hub, instead=instead)
            if problem:
                problems.append(f"objective[{i}].{key}: cannot load {value!r}: {problem}")
    return problems


def check_models(terms: list[dict]) -> None:
    """Raise ConfigError with the first of ``model_problems``: before any work, so that an offline run
    without a term's model stops at once."""
    problems = model_problems(terms)
    if problems:
        raise ConfigError(problems[0])


def log_names(names: list[str]) -> list[str]:
    """The name each term's logs go under: its loss name, numbered from the second use of a name on
    (``ntxent``, ``ntxent_2``), so that no two terms share one."""
    labels, seen = [], {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    if len(set(labels)) != len(labels):  # a registered name that looks like a numbered one ("x_2")
        labels = [f"{name}_{i + 1}" for i, name in enumerate(names)]
    return labels


class Objective(nn.Module):
    """The weighted sum of a recipe's terms; ``needs`` is every input field some term requires,
    ``wants`` every field some term reads when the step has it (``base.LossTerm``); ``passes`` the token
    passes they read (``base.TokenPass``), by name, in the registry's order, each built with the
    parameters its terms give it (the same for every term reading it: ``check_objective``)."""

    def __init__(self, names: list[str], weights: list[float], terms: list[LossTerm]):
        super().__init__()
        self.names, self.weights = names, weights
        self.log_names = log_names(names)
        self.terms = nn.ModuleList(terms)
        self.needs = frozenset().union(*(term.needs for term in terms))
        self.wants = frozenset().union(*(term.wants for term in terms))
        read = {}
        for term in terms:
            for name in (term.needs | term.wants) & set(TOKEN_PASSES):
                read.setdefault(name, dict(term.token_passes[name]))
        self.passes = nn.ModuleDict({name: TOKEN_PASSES.build(name, **read[name]) for name in TOKEN_PASSES
                                     if name in read})

    def stateful_parts(self) -> list[tuple[str, nn.Module]]:
        """Each term (by its log name) and token pass (by its name), for the state they keep across steps
        (``components()``)."""
        return [*zip(self.log_names, self.terms, strict=True), *self.passes.items()]

    def readers(self, pass_name: str) -> list[LossTerm]:
        """The terms that read the token pass ``pass_name``."""
        return [term for term in self.terms if pass_name in term.needs | term.wants]

    @property
    def encodes_views(self) -> bool:
        """Whether some term reads the contrastive views' embeddings (MLM alone does not)."""
        return bool(self.needs - set(TOKEN_PASSES))

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The weighted sum of the terms, and their logs as ``<term>.<key>``."""
        total, logs = None, {}
        for label, weight, term in zip(self.log_names, self.weights, self.terms, strict=True):
            loss, term_logs = term(inputs)
            total = weight * loss if total is None else total + weight * loss
            logs.update({f"{label}.{key}": value for key, value in term_logs.items()})
        return total, logs


def build_objective(terms: list[dict], context: dict | None = None) -> Objective:
    """The terms of a recipe, built with ``context`` (``base.build_term``)."""
    names, weights, built = [], [], []
    for term in terms:
        name, weight, params = _split_term(term)
        names.append(name)
        weights.append(weight)
        built.append(build_term(name, params, context))
    return Objective(names, weights, built)
