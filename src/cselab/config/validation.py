"""Validation of a built Config: impossible values, and names checked against the registries below."""
from __future__ import annotations

import math
from typing import Any

from cselab.config.schema import BUILTIN_CAP, MAX_INTEGER, Config, ModelConfig, ViewsConfig, key_facts
from cselab.errors import ConfigError
from cselab.registry import is_finite, shown


def validate(config: Config) -> Config:
    """Reject impossible values; every message names the key and what is allowed. Each key's own rule
    and choices are on its field (``schema.setting``); the rules across keys and registries are here."""
    _check_plain_data(config.to_dict())
    if config.data.max_sentences == "auto":
        config.data.max_sentences = BUILTIN_CAP if config.data.corpus.startswith("builtin:") else None
    for facts in key_facts():
        value = _value(config, facts.key)
        if facts.choices is not None and value not in facts.choices:
            raise ConfigError(f"{facts.key}: {value!r} is not one of {', '.join(facts.choices)}")
        if facts.check is not None and not facts.check.ok(value):
            raise ConfigError(f"{facts.key}: {facts.check.message.format(value=shown(value))}")
    if config.data.document_boundaries != "none" and not config.data.packing:
        raise ConfigError("data.document_boundaries: blank_lines applies to packed blocks; set data.packing: true")
    _check_wordpiece(config.model)
    if not config.objective:
        raise ConfigError("objective: needs at least one term")
    for i, term in enumerate(config.objective):
        if not isinstance(term, dict) or "name" not in term:
            raise ConfigError(f"objective[{i}]: each term is a mapping with a 'name'")
        if not isinstance(term["name"], str):
            raise ConfigError(f"objective[{i}].name: expected a loss name, got {term['name']!r}")
        weight = term.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"objective[{i}].weight: must be a finite number >= 0, got {weight!r}")
    from cselab.hardware import resolve_device

    # A GPU asked for where there is none fails here, before any work.
    resolve_device(config.train.device, "train.device")
    _check_report_to(config.train.report_to)
    _check_select_on(config.train.select_on)
    _check_names(config)
    _check_augmenter_params(config.views)
    # Loss parameters are checked against the loss classes themselves (names, types of the defaults).
    from cselab.losses import check_objective

    check_objective(config.objective)
    return config


# The smallest model.wordpiece_vocab_size a recipe may ask for (the special tokens, a Latin alphabet
# and its "##" pieces); the exact floor, the characters of the training lines, is checked once they
# are read (data/wordpiece.py).
MIN_VOCAB_SIZE = 64


def _check_select_on(names: list) -> None:
    """Known metrics, each once; the first picks the final model in output_dir. The names and what
    each takes come from the dev-metric registry itself (``evaluate/dev.py``; imported here, a layer up,
    so that a new metric is one class there: the module imports nothing of config's or above it)."""
    from cselab.evaluate.dev import check_select_on

    problem = check_select_on(names)
    if problem:
        raise ConfigError(problem)


def _check_wordpiece(model: ModelConfig) -> None:
    """model.wordpiece_vocab_size trains the vocabulary of a new encoder (model.from_config), which
    then takes its size from it."""
    size = model.wordpiece_vocab_size
    if size is None:
        return
    if model.from_config is None:
        raise ConfigError("model.wordpiece_vocab_size: trains the vocabulary of a new encoder; set model.from_config "
                          "too (a loaded model keeps its own tokenizer)")
    if size < MIN_VOCAB_SIZE:
        raise ConfigError(f"model.wordpiece_vocab_size: must be >= {MIN_VOCAB_SIZE} or null (null: the tokenizer of "
                          f"model.name_or_path), got {size}")
    if "vocab_size" in model.from_config:
        raise ConfigError("model.from_config.vocab_size: set by model.wordpiece_vocab_size (the trained vocabulary's "
                          "size); leave it out")


# train.report_to's loggers (train/live_logs.py); each one's module and pip package share its name.
REPORT_TO = ("tensorboard", "wandb", "trackio")


def _check_report_to(names: list) -> None:
    """Known, distinct logger names whose package is installed (found without importing it)."""
    import importlib.util
    import sys

    for i, name in enumerate(names):
        if not isinstance(name, str) or name not in REPORT_TO:
            raise ConfigError(f"train.report_to[{i}]: unknown logger {shown(name)} (known: {', '.join(REPORT_TO)})")
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            raise ConfigError(f"train.report_to[{i}]: {name} needs the {name} package; install it with "
                              f"`pip install {name}`")
    if len(set(names)) != len(names):
        raise ConfigError(f"train.report_to: names each logger once, got {shown(names)}")


def label_augmenters(views: ViewsConfig) -> list[tuple[str, str, dict]]:
    """``(key, name, params)`` of each ``views.label`` entry: a name takes its parameters from
    ``label_params[name]``; a mapping ``{name: ..., <params>}`` carries its own, so one augmenter can be listed
    more than once (``cached`` reading each AugCSE type from a `cselab augment` file). ``key`` names where the
    parameters are (``label_params.NAME`` or ``label[i]``). Entries are assumed well formed (``validate``
    checks them first)."""
    specs = []
    for i, entry in enumerate(views.label):
        if isinstance(entry, dict):
            specs.append((f"label[{i}]", entry.get("name"), {k: v for k, v in entry.items() if k != "name"}))
        else:
            specs.append((f"label_params.{entry}", entry, views.label_params.get(entry, {})))
    return specs


def _check_augmenter_params(views: ViewsConfig) -> None:
    """Each augmenter's parameters against its constructor: known names, required ones present, the
    types of the defaults (a bad value such as a ratio of 5 is left to the augmenter itself)."""
    roles = [("views.anchor", views.anchor, views.anchor_params, "identity"),
             ("views.positive", views.positive, views.positive_params, "dropout"),
             ("views.negative", views.negative, views.negative_params, "none")]
    for key, name, params, builtin in roles:
        if name != builtin:
            _check_params(f"{key}_params", name, params)
    names = [entry for entry in views.label if isinstance(entry, str)]  # a mapping entry carries its own
    for name, params in views.label_params.items():
        if name not in names:
            raise ConfigError(f"views.label_params.{name}: not one of views.label's names ({', '.join(names)})")
        if not isinstance(params, dict):
            raise ConfigError(f"views.label_params.{name}: expected a mapping of parameters, got {shown(params)}")
    for key, name, params in label_augmenters(views):
        _check_params(f"views.{key}", name, params)


def _check_params(key: str, name: str, params: dict) -> None:
    """An augmenter's parameters against its constructor: known names, required ones present, the
    types of the defaults (``Registry.argument_problem``)."""
    from cselab.augment import AUGMENTERS

    problem = AUGMENTERS.argument_problem(name, params)
    if problem:
        param, message = problem
        raise ConfigError(f"{key}.{param}: {message}" if param else f"{key}: {message}")


def _check_plain_data(value: Any, key: str = "") -> None:
    """Every value is JSON data, as checkpoints and train_config.json store it: no dates, sets or
    bytes (YAML tags make them), string mapping keys, finite numbers within 2**53."""
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, str):
                raise ConfigError(f"{key or 'recipe'}: mapping keys must be text, got {shown(name)}")
            _check_plain_data(item, f"{key}.{name}" if key else name)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_plain_data(item, f"{key}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not is_finite(value) or (isinstance(value, int) and abs(value) >= MAX_INTEGER):
            raise ConfigError(f"{key}: {shown(value)} is not a finite number within 2**53")
    elif not isinstance(value, (str, bool, type(None))):
        raise ConfigError(f"{key}: a {type(value).__name__} is not a recipe value (quote it to make it text)")


def _check_names(config: Config) -> None:
    """Augmenter and head names must exist (their registries list what is allowed)."""
    from cselab.model.heads import HEADS

    if config.model.projection not in HEADS:
        raise ConfigError(f"model.projection: unknown head {config.model.projection!r} "
                          f"(known: {', '.join(HEADS.names())})")
    views = config.views
    for i, entry in enumerate(views.label):
        if isinstance(entry, dict) and not isinstance(entry.get("name"), str):
            raise ConfigError(f"views.label[{i}]: a mapping entry needs a 'name' (the augmenter), got {shown(entry)}")
    named = [("views.anchor", views.anchor, "identity"), ("views.positive", views.positive, "dropout"),
             ("views.negative", views.negative, "none")] + [(f"views.label[{i}]", name, None)
                                                            for i, (_, name, _) in enumerate(label_augmenters(views))]
    wanted = [(key, name, builtin) for key, name, builtin in named if name != builtin]
    if not wanted:
        return
    from cselab.augment import AUGMENTERS, load_all

    load_all()
    for key, name, builtin in wanted:
        if not isinstance(name, str) or name not in AUGMENTERS:
            allowed = ([builtin] if builtin else []) + AUGMENTERS.names()
            raise ConfigError(f"{key}: unknown augmenter {name!r} (known: {', '.join(allowed)})")


def _value(config: Config, key: str) -> Any:
    """The value of a dotted key (``optim.lr``)."""
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return value
