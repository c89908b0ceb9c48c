"""Bad configuration fails before any work, in one line naming the key and what is allowed."""
from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cselab.config import Config, ConfigError, config_from_dict, load_config


@pytest.mark.parametrize("override,fragments", [
    ("optim.lr=-1", ["optim.lr", "must be > 0"]),
    ("optim.lr=.nan", ["optim.lr", "finite"]),
    ("optim.lr=.inf", ["optim.lr", "finite"]),
    ("optim.batch_size=0", ["optim.batch_size", ">= 2"]),
    ("optim.batch_size=eight", ["optim.batch_size", "expected an integer"]),
    ("optim.max_steps=2.5", ["optim.max_steps", "expected an integer"]),
    ("objective=[{name: infonce, temperature: 0}]", ["objective[0]", "temperature must be > 0"]),
    ("objective=[{name: infonce, weight: -1}]", ["objective[0].weight", ">= 0"]),
    ("objective=[{name: [infonce]}]", ["objective[0].name"]),
    ("objective=[]", ["objective", "at least one"]),
    ("objective=[{name: nope}]", ["objective[0].name", "known: ", "infonce"]),
    ("train.precision=fp8", ["train.precision", "fp32, bf16, fp16"]),
    ("optim.schedule=cosine", ["optim.schedule", "linear, constant"]),
    ("model.pooler=max", ["model.pooler", "cls", "avg"]),
    ("model.projection=huge", ["model.projection", "known: ", "none"]),
    ("views.positive=telepathy", ["views.positive", "known: dropout"]),
    ("views.negative=telepathy", ["views.negative", "known: none"]),
    ("views.positive_prob=1.5", ["views.positive_prob", "[0, 1]"]),
    ("train.seed=-3", ["train.seed", "[0, 2**32)"]),
    ("train.save_steps=-1", ["train.save_steps", ">= 0"]),
    ("optim.lrr=1", ["optim.lrr", "unknown key", "allowed: ", "lr"]),
    ("trian.seed=1", ["trian", "unknown key", "train"]),
    ("model.name_or_path.sub=1", ["model.name_or_path.sub", "not a section"]),
    ("model=3", ["model", "expected a mapping"]),
    ("optim.lr", ["expected key=value"]),
    # Values PyYAML cannot construct are the text as typed; huge numbers are refused, not overflowed.
    ("optim.lr=2001-13-01", ["optim.lr", "expected a number", "2001-13-01"]),
    ("optim.lr=!!float x", ["optim.lr", "expected a number"]),
    ("optim.batch_size=" + "9" * 5000, ["optim.batch_size", "expected an integer", "..."]),
    ("optim.batch_size=!!int " + "9" * 5000, ["optim.batch_size", "expected an integer"]),
    ("optim.batch_size=1e400", ["optim.batch_size", "expected an integer, got inf"]),
    ("optim.lr=" + "9" * 400, ["optim.lr", "expected a finite number, got a number of about"]),
    ("optim.max_steps=" + str(2**60), ["optim.max_steps", "too large"]),
    ("optim.epochs=1e9", ["optim.epochs", "[1, 1000000]"]),
    ("train.output_dir=", ["train.output_dir", "must not be empty"]),
    ("model.projection_params={when: 2001-12-14}", ["model.projection_params.when", "date is not a recipe value"]),
    ("model.projection_params=!!set {a}", ["model.projection_params", "expected a dict"]),
    ("model.projection_params={1: 2}", ["model.projection_params", "keys must be text"]),
    ("model.from_config={hidden_size: .nan}", ["model.from_config.hidden_size", "not a finite number"]),
    ("model.projection_params={b: !!binary aGk=}", ["model.projection_params.b", "bytes is not a recipe value"]),
    ("optim.l\x1br=1", ["optim.l\\x1br", "unknown key"]),
])
def test_bad_values_fail_in_one_line_naming_key_and_allowed_values(override, fragments):
    with pytest.raises(ConfigError) as info:
        load_config("simcse", [override])
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_cli_config_error_is_one_line_and_nothing_is_written(tmp_path, capsys):
    from cselab.cli import main

    out_dir = tmp_path / "never"
    assert main(["train", "--output-dir", str(out_dir), "--set", "optim.lr=-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "optim.lr: must be > 0" in err
    assert not out_dir.exists()


def test_a_recipe_with_a_bad_inherit_is_a_config_error(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("inherit: [simcse]\n")
    with pytest.raises(ConfigError, match="inherit"):
        load_config(str(recipe))
    recipe.write_text("optim: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(str(recipe))


@pytest.mark.parametrize("overrides,fragments", [
    (["views.positive=eda_random_swap", "views.positive_params={nope: 1}"],
     ["views.positive_params.nope", "unknown parameter of augmenter 'eda_random_swap'", "allowed: "]),
    (["views.positive=eda_random_swap", "views.positive_params={alpha: high}"],
     ["views.positive_params.alpha", "expected a finite number"]),
    (["views.positive=with_probability"], ["views.positive_params", "needs augmenter"]),
    (["views.label=[eda_random_swap]", "views.label_params={eda_random_swap: 3}"],
     ["views.label_params.eda_random_swap", "expected a mapping"]),
    (["views.label=[eda_random_swap]", "views.label_params={random_crop: {}}"],
     ["views.label_params.random_crop", "not one of views.label"]),
])
def test_augmenter_parameters_are_checked_against_the_augmenter(overrides, fragments):
    with pytest.raises(ConfigError) as info:
        load_config("simcse", overrides)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


@pytest.mark.parametrize("content,fragments", [
    (b"inherit: simcse\noptim:\n  lr: 1e-5\nrecipe: caf\xe9\n", [":4: not valid UTF-8 (byte 0xE9)"]),
    (b"\xef\xbb\xbfinherit: simcse\noptim: {lr: 1e-5}\n", None),  # a BOM is fine
    (b"inherit: simcse\noptim: {lr: 2001-13-01}\n", ["invalid YAML value", "month must be in 1..12"]),
    (b"inherit: \"nul\\x00byte\"\n", ["recipe: unknown recipe 'nul\\x00byte'"]),
    (b"inherit: " + b"x" * 5000 + b"\n", ["recipe: cannot use", "as a file name"]),
    (b"inherit: self.yaml\n", ["circular inherit"]),
    (b"0\n", ["top level must be a mapping"]),
    (b"inherit: simcse\n7: {params: 1}\n", ["7: unknown key"]),
    (b"inherit: simcse\nmodel: {projection_params: {7: 1}}\n", ["model.projection_params: mapping keys must be text"]),
])
def test_a_recipe_file_that_cannot_be_read_is_one_line(tmp_path, content, fragments):
    recipe = tmp_path / "self.yaml"
    recipe.write_bytes(content)
    if fragments is None:
        assert load_config(str(recipe)).optim.lr == 1e-5
        return
    with pytest.raises(ConfigError) as info:
        load_config(str(recipe))
    message = str(info.value)
    assert "\n" not in message and all(fragment in message for fragment in fragments), message


# --- fuzzing ------------------------------------------------------------------------------------

KNOWN_KEYS = ["model.name_or_path", "model.pooler", "model.mlp", "model.max_seq_len", "model.from_config",
              "model.projection", "model.projection_params", "data.corpus", "data.column", "data.max_sentences",
              "views.positive", "views.negative", "views.positive_prob", "views.label", "views.negative_every",
              "objective", "optim.lr", "optim.batch_size", "optim.max_steps", "optim.warmup_ratio", "train.seed",
              "train.precision", "train.save_steps", "train.num_workers", "recipe", "model", "optim", "train"]
KEYS = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=20),
                 st.lists(st.sampled_from(["model", "optim", "x", "", "lr", "seed"]),
                          min_size=1, max_size=4).map(".".join))
RAW_VALUES = st.one_of(st.text(max_size=30), st.sampled_from(
    ["-1", "0", "1e-5", "1e300", ".nan", "-.inf", "null", "true", "[]", "{}", "[{name: infonce}]",
     "[{name: infonce, temperature: -1}]", "[{name: infonce, weight: x}]", "{a: 1}", "[1, 2]", "'5'",
     "2020-01-01", "!!binary aGVsbG8=", "&a [*a]", "{model_type: bert}"]))
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
                       lambda inner: (st.lists(inner, max_size=3)
                                      | st.dictionaries(st.text(max_size=10), inner, max_size=3)),
                       max_leaves=8)
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(overrides=st.lists(st.tuples(KEYS, RAW_VALUES), min_size=1, max_size=3))
def test_arbitrary_overrides_give_a_config_or_a_config_error(overrides):
    try:
        config = load_config("simcse", [f"{key}={value}" for key, value in overrides])
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(config, Config) and config.optim.lr > 0 and math.isfinite(config.optim.lr)


@FUZZ
@given(section=st.sampled_from(["model", "data", "views", "optim", "train", "objective", "recipe"]), value=JSONISH)
def test_arbitrary_structured_values_give_a_config_or_a_config_error(section, value):
    data = load_config("simcse").to_dict()
    data[section] = value
    try:
        config_from_dict(data)
    except ConfigError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(data=st.data())
def test_arbitrary_loss_parameters_give_a_config_or_a_config_error(data):
    """Every registered loss, any of its parameters, any value: checked before training starts."""
    import inspect

    from cselab.losses import LOSSES

    name = data.draw(st.sampled_from(LOSSES.names()))
    params = [p for p in inspect.signature(LOSSES.get(name).__init__).parameters if p != "self"] + ["weight"]
    term = {"name": name}
    for key in data.draw(st.lists(st.sampled_from(params), max_size=3, unique=True)):
        term[key] = data.draw(JSONISH)
    try:
        load_config("simcse", [f"objective=[{json.dumps(term)}]"])
    except ConfigError as exc:
        assert "\n" not in str(exc)


def test_a_wrappers_context_is_not_a_recipe_key():
    """``context`` is filled by the training loop for a wrapper's inner term; a recipe that sets it (found
    by the fuzz test above: a list) gets one line, not an AttributeError."""
    with pytest.raises(ConfigError, match=r"objective\[0\]\.context: filled by the training loop"):
        load_config("simcse", ['objective=[{"name": "embedding_positive", "context": [null]}]'])
