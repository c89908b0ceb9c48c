"""Recipes, overrides and validation."""
import pytest

from cselab.config import ConfigError, list_recipes, load_config


def test_simcse_recipe_holds_the_papers_defaults():
    config = load_config("simcse")
    assert config.optim.batch_size == 64 and config.optim.lr == 3e-5 and config.optim.epochs == 1
    assert config.objective == [{"name": "infonce", "temperature": 0.05}]
    assert config.train.eval_steps == 125 and config.model.max_seq_len == 32 and config.model.mlp_only_train


@pytest.mark.parametrize("override,value", [("optim.lr=1e-5", 1e-5), ("optim.lr=2", 2.0), ("train.seed=7", 7)])
def test_set_overrides(override, value):
    section, key = override.split("=")[0].split(".")
    assert getattr(getattr(load_config("simcse", [override]), section), key) == value


@pytest.mark.parametrize("override,fragment", [
    ("optim.lrx=1", "optim.lrx: unknown key"),
    ("optim.lr=fast", "optim.lr: expected a number"),
    ("optim.batch_size=0", "optim.batch_size"),
    ("optim.lr=-1", "optim.lr: must be > 0"),
    ("train.precision=fp8", "train.precision"),
    ("model.pooler=max", "model.pooler"),
    ("objective=[{name: infonce, temperature: 0}]", "temperature"),
    ("objective=[{name: nope}]", "objective[0].name"),
    ("objective=[{name: infonce, temp: 1}]", "objective[0].temp"),
    ("bogus.key=1", "bogus: unknown key"),
    # a list entry by its index
    ("objective[1].weight=2", "--set objective[1].weight: objective has 1 entry, so no [1] (indices run from 0 to 0)"),
    ("objective[-1].weight=2", "objective has 1 entry, so no [-1]"),
    ("objectives[0].weight=2", "--set objectives[0].weight: objectives is not in the recipe, so it has no entry [0]"),
    ("optim[0].lr=1", "--set optim[0].lr: optim is not a list"),
    ("objective[0].temperature=0", "objective[0] (infonce): temperature must be > 0"),
    ("optim.lr.x=1", "--set optim.lr.x: optim.lr is not a section"),
])
def test_bad_values_fail_naming_the_key(override, fragment):
    with pytest.raises(ConfigError) as info:
        load_config("simcse", [override])
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_set_reaches_a_list_entry_by_its_index():
    """The recipes' comments and the validation errors name terms as objective[i].key: --set takes that too."""
    config = load_config("augcse", ["objective[0].positive_role=label_view", "objective[1].weight=0.01"])
    assert config.objective[0]["positive_role"] == "label_view" and config.objective[1]["weight"] == 0.01
    assert config.objective[0]["temperature"] == 0.05  # the rest of the term is kept
    clear = load_config("clear-del-word", ["objective[ 0 ].reduction=mean", "objective[1]={name: mlm, weight: 0.5}"])
    assert clear.objective == [{"name": "ntxent", "temperature": 0.05, "reduction": "mean"},
                               {"name": "mlm", "weight": 0.5}]


def test_recipe_files_and_inherit(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text("inherit: simcse\noptim:\n  lr: 1.0e-4\n")
    config = load_config(str(child))
    assert config.optim.lr == 1e-4 and config.optim.batch_size == 64
    assert "simcse" in list_recipes()
    with pytest.raises(ConfigError):
        load_config("no-such-recipe")
