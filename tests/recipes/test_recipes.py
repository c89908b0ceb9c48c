"""Every shipped recipe parses and trains 5 steps on a tiny BERT; compositions need no code."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from cselab.config import RECIPE_DIR, list_recipes, load_config


def _root_conftest():
    """tests/conftest.py (loaded by path: every test folder may have a conftest)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ROOT = _root_conftest()
TINY_BERT = _ROOT.TINY_BERT

RECIPES = list_recipes()


def tiny_overrides(corpus: Path, out: Path) -> list[str]:
    return [f"model.from_config={json.dumps(TINY_BERT)}", "model.name_or_path=minilm", f"data.corpus={corpus}",
            "optim.batch_size=8", "optim.max_steps=5", "train.eval_steps=0", "train.save_steps=0",
            f"train.output_dir={out}", "train.precision=fp32"]


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_starts_with_a_one_line_description(recipe):
    first = (RECIPE_DIR / f"{recipe}.yaml").read_text().splitlines()[0]
    assert first.startswith("# ") and len(first) > 20


def missing_cache_files(config) -> list[str]:
    """Dotted keys of views parameters naming an augmentation cache (.jsonl) that does not exist."""
    keys = []
    for role in ("anchor", "positive", "negative"):
        for key, value in getattr(config.views, f"{role}_params").items():
            if isinstance(value, str) and value.endswith(".jsonl") and not Path(value).is_file():
                keys.append(f"views.{role}_params.{key}")
    return keys


def own_model_overrides(recipe: str, overrides: list[str], tmp_path: Path) -> list[str]:
    """A recipe whose terms load a model of their own (``LossTerm.models``: diffcse's generator, a
    Hub model) gets a tiny local masked language model for each, as the offline stand-in."""
    from cselab.losses import LOSSES

    keys = [f"objective[{i}].{key}" for i, term in enumerate(load_config(recipe, overrides).objective)
            for key in LOSSES.get(term["name"]).models]
    if not keys:
        return []
    directory = _ROOT.save_tiny_generator(tmp_path / "tiny-generator")
    return [f"{key}={directory}" for key in keys]


def with_tiny_caches(recipe: str, overrides: list[str], corpus: Path, tmp_path: Path):
    """Recipes that read a cache written by `cselab augment` get one for the tiny corpus
    (a cheap augmenter stands in for the recipe's: this tests the plumbing, not the paraphrases), and
    recipes that load a model of their own a tiny one (``own_model_overrides``)."""
    overrides = overrides + own_model_overrides(recipe, overrides, tmp_path)
    config = load_config(recipe, overrides)
    if config.views.positive == "cached" and config.views.positive_params.get("augmenter"):
        # A recipe that builds its cache on first use (una-paraphrase): a cheap augmenter builds it here.
        return load_config(recipe, overrides + ["views.positive_params.augmenter=eda_random_swap"])
    keys = missing_cache_files(config)
    if not keys:
        return config
    from cselab.cli import main

    cache = tmp_path / "cache.jsonl"
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(corpus), "--out", str(cache)]) == 0
    return load_config(recipe, overrides + [f"{key}={cache}" for key in keys])


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_trains_five_steps_on_a_tiny_model(recipe, tiny_corpus, tmp_path):
    config = with_tiny_caches(recipe, tiny_overrides(tiny_corpus, tmp_path / "run"), tiny_corpus, tmp_path)
    torch.manual_seed(0)
    from cselab.train.loop import train

    summary = train(config, progress=False)
    assert summary["finished"] and summary["steps"] == 5
    assert math.isfinite(summary["first_loss"]) and math.isfinite(summary["final_loss"])
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    for term in config.objective:  # each term's own loss, logged under its name: proof that it ran
        assert f"{term['name']}.loss" in last, f"{term['name']} did not log"


def test_every_issue_recipe_ships():
    wanted = {"focal", "augcse", "sda-pi", "sda-aa", "sda-dn", "clear-del-word", "clear-del-span",
              "clear-subs-del-word", "clear-subs-del-span", "clear-del-word-reorder", "clear-del-span-reorder",
              "mlm-pretrain", "example-focal-una-sda"}
    assert wanted <= set(RECIPES)


def test_clear_recipes_use_two_views_of_the_same_augmentation():
    for recipe in [r for r in RECIPES if r.startswith("clear-")]:
        config = load_config(recipe, [])
        assert config.views.anchor == config.views.positive and config.views.anchor != "identity"
        assert config.views.anchor_params == config.views.positive_params
        assert [t["name"] for t in config.objective] == ["ntxent", "mlm"]
        assert config.model.projection == "clear_mlp"


def test_clear_recipes_sum_the_contrastive_loss_and_add_mlm_unweighted():
    """CLEAR Eq. 2: L_CL is the sum of the per-view NT-Xent losses; Eq. 3: L = L_MLM + L_CL."""
    for recipe in [r for r in RECIPES if r.startswith("clear-")]:
        ntxent, mlm = load_config(recipe, []).objective
        assert ntxent["reduction"] == "sum" and ntxent.get("weight", 1.0) == 1.0 and mlm.get("weight", 1.0) == 1.0


def test_sda_recipes_use_the_papers_bert_optimisation():
    """SDA, Training Details: BERT with batch 128, lr 2e-5, one epoch, STS-B dev every 250 steps."""
    for recipe in [r for r in RECIPES if r.startswith("sda-")]:
        config = load_config(recipe, [])
        assert (config.optim.batch_size, config.optim.lr, config.optim.epochs) == (128, 2e-5, 1)
        assert config.train.eval_steps == 250


def test_augcse_discriminator_classes_match_the_label_views():
    for recipe in [r for r in RECIPES if r.startswith("augcse")]:
        data = yaml.safe_load((RECIPE_DIR / f"{recipe}.yaml").read_text())  # no augmenter needed to read it
        (term,) = [t for t in data["objective"] if t["name"] == "discriminator"]
        assert term["num_labels"] == len(data["views"]["label"]) + 1
        assert term["weight"] == 0.005 and term.get("alpha", 1.0) == 1.0


def test_augcse_subsets_match_the_augmenter_module():
    from cselab.augment.augcse import AUGCSE_SUBSETS

    for size, names in AUGCSE_SUBSETS.items():
        recipe = "augcse" if size == 12 else f"augcse-{size}"
        data = yaml.safe_load((RECIPE_DIR / f"{recipe}.yaml").read_text())
        assert data["views"]["label"] == list(names), recipe


def test_composition_recipe_parses_without_code():
    config = load_config("example-focal-una-sda", [])
    assert config.views.positive.startswith("sda_") and config.views.negative == "una"
    assert [t["name"] for t in config.objective] == ["focal"]


def test_composition_by_overrides(tiny_corpus, tmp_path):
    """Any loss, any positive generator, plus MLM, from the command line alone."""
    from cselab.train.loop import train

    overrides = tiny_overrides(tiny_corpus, tmp_path / "run") + [
        "views.positive=eda_random_deletion", "views.positive_prob=0.5",
        'objective=[{name: embedding_positive, kind: interpolate, strength: 0.2, inner: {name: focal}}, '
        '{name: mlm, weight: 0.1}]']
    config = load_config("simcse", overrides)
    summary = train(config, progress=False)
    assert summary["finished"]
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert "embedding_positive.tau" in last and "mlm.loss" in last  # the wrapped Focal-InfoNCE logs its tau


def test_terms_with_their_own_parameters_are_sized_before_the_first_step_and_trained(tiny_corpus, tmp_path,
                                                                                     monkeypatch):
    """The discriminator's sizes come from the model before step 1, the MLM head is the backbone's own
    (built before step 1, on the encoder); the optimizer holds their parameters and updates them."""
    import cselab.train.setup as parts
    from cselab.losses.mlm import MaskedTokensPass

    built, heads = [], []
    original, original_setup = parts.build_objective, MaskedTokensPass.setup

    def capture(terms, context=None):
        objective = original(terms, context)
        built.extend((name, term, {k: v.detach().clone() for k, v in term.named_parameters()})
                     for name, term in zip(objective.names, objective.terms, strict=True))
        return objective

    def capture_head(self, encoder, source):  # the MLM pass builds the head on the encoder
        original_setup(self, encoder, source)
        head = encoder.mlm_head
        own = set(head.own_state())  # the tied decoder weight is the embeddings': left out
        heads.append((head, {k: v.detach().clone() for k, v in head.named_parameters()
                             if f"{head.prefix}.{k.removeprefix('head.')}" in own}))

    monkeypatch.setattr(parts, "build_objective", capture)
    monkeypatch.setattr(MaskedTokensPass, "setup", capture_head)
    overrides = tiny_overrides(tiny_corpus, tmp_path / "run") + [
        "views.label=[eda_random_deletion, eda_random_swap]", "model.projection=bn_mlp",
        "objective=[{name: infonce}, {name: discriminator, weight: 0.5}, {name: mlm}]"]
    config = load_config("simcse", overrides)
    from cselab.train.loop import train

    train(config, progress=False)
    assert [name for name, _, _ in built] == ["infonce", "discriminator", "mlm"]
    assert built[1][1].num_labels == 3
    (head, head_before), = heads
    for name, module, before in [("discriminator", built[1][1], built[1][2]), ("mlm head", head, head_before)]:
        assert before, f"{name} has no parameters"
        for key, parameter in module.named_parameters():
            if key in before:
                assert not torch.equal(before[key], parameter.detach()), f"{name}.{key} never updated"


def test_a_discriminator_without_label_views_or_with_the_wrong_label_count_is_refused(tiny_corpus, tmp_path):
    from cselab.config import ConfigError
    from cselab.train.loop import train

    base = tiny_overrides(tiny_corpus, tmp_path / "run")
    config = load_config("simcse", base + ["objective=[{name: infonce}, {name: discriminator}]"])
    with pytest.raises(ConfigError, match="views.label"):
        train(config, progress=False)
    config = load_config("simcse", base + ["views.label=[eda_random_deletion]",
                                            "objective=[{name: infonce}, {name: discriminator, num_labels: 5}]"])
    with pytest.raises(ConfigError, match="num_labels"):
        train(config, progress=False)


def test_recipes_are_valid_yaml_mappings():
    for recipe in RECIPES:
        data = yaml.safe_load((RECIPE_DIR / f"{recipe}.yaml").read_text())
        assert isinstance(data, dict) and data, recipe


def test_run_with_term_parameters_resumes_from_a_checkpoint(tiny_corpus, tmp_path):
    """The discriminator's and the MLM head's parameters are restored from the checkpoint on resume;
    the resumed run ends exactly where the uninterrupted one did."""
    import shutil

    from cselab.train.loop import train

    overrides = tiny_overrides(tiny_corpus, tmp_path / "run") + [
        "optim.max_steps=4", "train.save_steps=2", "train.keep_checkpoints=2",
        "views.label=[eda_random_deletion, eda_random_swap]",
        "objective=[{name: infonce}, {name: discriminator, weight: 0.5, num_labels: 3}, {name: mlm}]"]
    config = load_config("simcse", overrides)
    first = train(config, progress=False)
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    assert checkpoints and checkpoints[0].name.endswith("2")
    for later in checkpoints[1:]:
        shutil.rmtree(later)  # as if the run had stopped after step 2
    resumed = train(config, progress=False)
    assert resumed["finished"] and resumed["final_loss"] == pytest.approx(first["final_loss"], rel=1e-6)


def test_clear_anchor_rows_are_the_first_augmented_view(tiny_encoder):
    from cselab.data.collate import Collator
    from cselab.data.views import ViewBuilder

    config = load_config("clear-del-word", [])
    sentences = ["the old man reads a long letter slowly at night", "a small child follows the red bird home",
                 "our team builds a new house near the river", "the teacher carries the map to the garden"]
    batch = Collator(tiny_encoder.tokenize, ViewBuilder(config.views, sentences, seed=0))((0, sentences))
    assert batch.views.anchors != sentences  # the augmenter did change them
    decode = lambda ids: tiny_encoder.tokenizer.batch_decode(ids, skip_special_tokens=True)  # noqa: E731
    anchor_rows = decode(batch.features["input_ids"][batch.roles["anchor"]])
    assert anchor_rows == decode(tiny_encoder.tokenize(batch.views.anchors)["input_ids"])
