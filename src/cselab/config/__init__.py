"""The recipe: a YAML file whose top-level sections mirror the dataclasses of ``schema.py``.

- ``schema.py``: the dataclasses (Config and its sections), each key's facts on its field (doc, choices, the
  rule its value follows, whether it may change on resume: ``setting``, ``key_facts``), and building them
  from a dict.
- ``loading.py``: recipe files (shipped names or paths, ``inherit:``), ``--set key=value`` overrides,
  ``load_config`` and ``config_from_dict``.
- ``validation.py``: ``validate`` and its checks (names checked against the registries below).

Unknown keys, wrong types and impossible values fail before any work, with one line naming the key.
"""
from __future__ import annotations

from cselab.config.loading import RECIPE_DIR, config_from_dict, list_recipes, load_config, recipe_path
from cselab.config.schema import Config, DataConfig, ModelConfig, OptimConfig, TrainConfig, ViewsConfig
from cselab.errors import ConfigError

__all__ = ["RECIPE_DIR", "Config", "ConfigError", "DataConfig", "ModelConfig", "OptimConfig", "TrainConfig",
           "ViewsConfig", "config_from_dict", "list_recipes", "load_config", "recipe_path"]
