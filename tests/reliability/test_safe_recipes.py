"""Recipes and --set values are parsed safely: no YAML aliases (alias bombs), numbers written as
1e3 accepted for numeric keys, inherit: paths relative to the recipe file; the builtin corpus
alone is capped, and a cap in effect is said before training."""
from __future__ import annotations

import resource
import time

import pytest

from cselab.config import load_config
from cselab.errors import ConfigError


def _bomb_line(level: int) -> str:
    """Level k: a list of nine references to level k - 1 (9^10 strings once expanded)."""
    name, previous = chr(98 + level), chr(97 + level)
    return f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]"


BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [_bomb_line(i) for i in range(9)])


def test_an_alias_bomb_recipe_is_refused_quickly_in_one_line(tmp_path):
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text("inherit: simcse\nmodel:\n  projection_params:\n    " + BOMB.replace("\n", "\n    ") + "\n")
    memory_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"aliases .* not allowed") as info:
        load_config(str(recipe))
    assert time.perf_counter() - start < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - memory_before < 200_000  # KiB: no expansion
    assert str(recipe) in str(info.value) and "\n" not in str(info.value)


def test_an_alias_in_a_set_value_is_refused():
    with pytest.raises(ConfigError, match=r"^--set model.projection_params: YAML aliases"):
        load_config("simcse", ["model.projection_params={a: &x [1, 2], b: *x}"])


def test_numbers_written_as_text_are_numbers_for_numeric_keys(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("inherit: simcse\noptim:\n  lr: 1e-5\n  batch_size: 1e2\n")
    config = load_config(str(recipe))
    assert config.optim.lr == 1e-5 and config.optim.batch_size == 100 and isinstance(config.optim.batch_size, int)
    assert load_config("simcse", ["optim.lr=3e-5"]).optim.lr == 3e-5
    with pytest.raises(ConfigError, match="optim.batch_size: expected an integer"):
        load_config(str(recipe), ["optim.batch_size=2.5"])


def test_inherit_is_relative_to_the_recipe_file(tmp_path, monkeypatch):
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "base.yaml").write_text("inherit: simcse\noptim:\n  lr: 7.0e-6\n")
    (folder / "child.yaml").write_text("inherit: base.yaml\noptim:\n  batch_size: 32\n")
    monkeypatch.chdir(tmp_path)  # not the recipes' folder
    config = load_config(str(folder / "child.yaml"))
    assert config.optim.lr == 7.0e-6 and config.optim.batch_size == 32


def test_only_the_builtin_corpus_is_capped_by_default(tmp_path):
    from cselab.config.schema import BUILTIN_CAP
    from cselab.data.indexed import read_corpus

    assert load_config("simcse").data.max_sentences == BUILTIN_CAP  # auto, resolved: what --print-config shows
    assert load_config("simcse", ["data.max_sentences=null"]).data.max_sentences is None
    assert load_config("simcse", corpus_override(tmp_path)).data.max_sentences is None
    corpus = tmp_path / "big.txt"
    corpus.write_text("".join(f"sentence number {i} of a large corpus\n" for i in range(BUILTIN_CAP + 500)))
    sentences, stats = read_corpus(str(corpus))
    assert len(sentences) == BUILTIN_CAP + 500 and stats.sample_note() is None
    sentences, stats = read_corpus(str(corpus), max_sentences=1000)
    assert len(sentences) == 1000
    assert stats.sample_note().startswith(f"corpus: training on a seeded sample of 1000 of {BUILTIN_CAP + 500}")


def corpus_override(tmp_path) -> list[str]:
    return [f"data.corpus={tmp_path / 'big.txt'}"]
