"""UNA inside cselab: recipes, the TF-IDF corpus of the paraphrase variant, a short training run, the CLI."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cselab.augment import build_augmenter
from cselab.augment.una import tokenize
from cselab.config import load_config
from tests.conftest import TINY_BERT

UNA_RECIPES = ["una", "una-infonce", "una-ntxent", "una-paraphrase", "una-random-terms", "una-random-replacement",
               "una-random-both"]
# The authors' loss (NOTES.md): symmetric NT-Xent, each negative an instance with its own dropout view.
AUTHORS_LOSS = {"name": "ntxent", "temperature": 0.05, "hard_negatives": "instances"}
LOSS_ABLATIONS = {"una-infonce": {"name": "infonce", "temperature": 0.05, "hard_negative_weight": 0.0},
                  "una-ntxent": {"name": "ntxent", "temperature": 0.05, "hard_negatives": "columns"}}


def train_tiny(config):
    import cselab.train.loop as loop

    return loop.train(config, progress=False)


@pytest.mark.parametrize("recipe", UNA_RECIPES)
def test_recipes_load_with_the_paper_defaults(recipe):
    config = load_config(recipe)
    assert config.views.negative == "una" and config.views.negative_every == 5
    params = config.views.negative_params
    assert params["p"] == 0.5 and params["radius"] == 4000
    assert config.optim.batch_size == 64 and config.optim.lr == 3e-5 and config.optim.schedule == "linear"
    assert config.train.eval_steps == 100  # STS-B dev every 100 steps
    assert config.objective == [LOSS_ABLATIONS.get(recipe, AUTHORS_LOSS)]
    build_augmenter("una", **params)  # every recipe's parameters are accepted by the augmenter
    ablation = recipe.removeprefix("una-random-")
    if recipe.startswith("una-random-"):
        assert (params["term_choice"] == "random") == (ablation in ("terms", "both"))
        assert (params["replacement"] == "random") == (ablation in ("replacement", "both"))


def test_paraphrase_recipe_fits_tfidf_on_the_cached_positives_too(tmp_path, corpus):
    config = load_config("una-paraphrase")
    assert config.views.positive == "cached"
    assert config.views.negative_params["extra_fit_positives"] is True  # the cached paraphrases join the TF-IDF
    cache = tmp_path / "positives.jsonl"
    lines = [{"original": s, "augmented": f"{s} paraphrasedword{i}", "augmentation": "back_translation",
              "changed": True} for i, s in enumerate(corpus[:50])]
    lines.append({"original": "x", "augmented": "onlyinotheraug", "augmentation": "other", "changed": True})
    cache.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    plain = build_augmenter("una", radius=40).fit(corpus)
    with_cache = build_augmenter("una", radius=40, extra_fit_texts_from=str(cache)).fit(corpus)
    filtered = build_augmenter("una", radius=40, extra_fit_texts_from=str(cache),
                               extra_fit_augmentation="back_translation").fit(corpus)
    assert "paraphrasedword7" not in plain.stats.vocabulary
    assert "paraphrasedword7" in with_cache.stats.vocabulary and "onlyinotheraug" in with_cache.stats.vocabulary
    assert "paraphrasedword7" in filtered.stats.vocabulary and "onlyinotheraug" not in filtered.stats.vocabulary
    assert with_cache.stats.num_documents == len(corpus) + len(lines)
    text_file = tmp_path / "extra.txt"
    text_file.write_text("fromatextfile here\n\n", encoding="utf-8")
    assert "fromatextfile" in build_augmenter("una", extra_fit_texts_from=str(text_file)).fit(corpus).stats.vocabulary


def spy_on_steps(monkeypatch) -> list[dict]:
    """Each step's texts, its number of encoded rows and the rows of each role, as the loss sees them."""
    from cselab.train.steps import StepForward

    seen = []
    original = StepForward.loss

    def spy(self, embeddings, batch):
        seen.append({"negatives": batch.views.negatives, "anchors": batch.views.anchors, "rows": embeddings.shape[0],
                     **{f"{role}_rows": part.stop - part.start for role, part in batch.roles.items()}})
        return original(self, embeddings, batch)

    monkeypatch.setattr(StepForward, "loss", spy)
    return seen


def una_config(recipe: str, tiny_corpus, out, *extra: str):
    return load_config(recipe, [f"data.corpus={tiny_corpus}", "optim.batch_size=8", "optim.max_steps=5",
                                "views.negative_every=1", "train.eval_steps=0", "train.save_steps=0",
                                "train.precision=fp32", f"train.output_dir={out}", *extra],
                       **{"model.from_config": TINY_BERT})


def test_five_una_steps_put_negatives_in_every_step(tmp_path, tiny_corpus, monkeypatch):
    """negative_every=1, SimCSE's form (una-infonce): every step encodes anchors, positives and UNA
    negatives in one forward pass, each negative once (3N rows)."""
    import cselab.train.loop as loop

    seen = spy_on_steps(monkeypatch)
    summary = loop.train(una_config("una-infonce", tiny_corpus, tmp_path / "run"), progress=False)
    assert summary["finished"] and summary["steps"] == 5
    assert len(seen) == 5
    for step in seen:
        assert step["negative_rows"] == 8 and step["rows"] == 24 and "negative_positive_rows" not in step
        assert all(neg != anchor.lower() for neg, anchor in zip(step["negatives"], step["anchors"], strict=True))
    # Every 5th step only, with the recipe's f = 5 (steps 0 and 5 of 6).
    config = load_config("una")
    from cselab.data.views import ViewBuilder

    builder = ViewBuilder(config.views, ["the cat sees a dog.", "a bird reads the map."] * 5, seed=0)
    has_negatives = [builder(step, ["the cat sees a dog.", "a bird reads."]).negatives is not None for step in range(6)]
    assert has_negatives == [True, False, False, False, False, True]


def test_una_steps_encode_each_negative_twice_for_the_4n_loss(tmp_path, tiny_corpus, monkeypatch):
    """The una recipe (authors' form): on a UNA step the forward pass holds 4N rows, the sentences, their
    dropout views, the negatives and the negatives' own dropout views; other steps hold 2N."""
    seen = spy_on_steps(monkeypatch)
    summary = train_tiny(una_config("una", tiny_corpus, tmp_path / "run", "views.negative_every=2"))
    assert summary["finished"] and [step["rows"] for step in seen] == [32, 16, 32, 16, 32]
    for step in seen[::2]:
        assert step["negative_rows"] == 8 and step["negative_positive_rows"] == 8


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=6), st.integers(min_value=0, max_value=2**31 - 1))
def test_any_text_gives_one_deterministic_negative_per_input(fitted, sentences, seed):
    out = fitted.augment(sentences, seed)
    assert len(out) == len(sentences) and out == fitted.augment(sentences, seed)
    for original, negative in zip(sentences, out, strict=True):
        if tokenize(original.lower()):
            assert negative != original.lower()


def test_cselab_augment_cli_shows_negatives(tmp_path, corpus):
    """`cselab augment --aug una` fits on the input sentences and writes one negative per line."""
    from cselab.cli import build_parser, main

    commands = build_parser()._subparsers._group_actions[0].choices
    if "augment" not in commands:
        pytest.skip("the `cselab augment` command (cselab/augment_command.py) is not present in this tree")
    source = tmp_path / "corpus.txt"
    source.write_text("\n".join(corpus[:120]) + "\n", encoding="utf-8")
    out = tmp_path / "negatives.jsonl"
    assert main(["augment", "--aug", "una", "--in", str(source), "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(records) == 120
    assert all(r["augmented"] != r["original"].lower() for r in records)
    assert all(r["augmented"] == r["augmented"].lower() for r in records)


def test_una_paraphrase_trains_on_cached_positives(tmp_path, tiny_corpus, monkeypatch):
    """The paraphrase variant end to end: positives read from the cache, UNA negatives every step."""
    sentences = [line for line in tiny_corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    cache = tmp_path / "positives.jsonl"
    cache.write_text("".join(json.dumps({"original": s, "augmented": f"{s} (cached paraphrase)",
                                         "augmentation": "back_translation", "changed": True}) + "\n"
                             for s in sentences), encoding="utf-8")
    from cselab.train.steps import StepForward

    seen = []
    original = StepForward.loss

    def spy(self, embeddings, batch):
        seen.append(batch.views)
        return original(self, embeddings, batch)

    monkeypatch.setattr(StepForward, "loss", spy)
    config = load_config("una-paraphrase", [
        f"data.corpus={tiny_corpus}", "optim.batch_size=8", "optim.max_steps=2", "views.negative_every=1",
        "train.eval_steps=0", "train.save_steps=0", "train.precision=fp32", f"train.output_dir={tmp_path / 'run'}",
        f"views.positive_params.path={cache}", f"views.negative_params.extra_fit_texts_from={cache}",
        "views.positive_params.augmenter=null"], **{"model.from_config": TINY_BERT})
    assert train_tiny(config)["finished"]
    assert len(seen) == 2
    for views in seen:
        assert views.positives == [f"{a} (cached paraphrase)" for a in views.anchors]
        assert views.negatives is not None and len(views.negatives) == len(views.anchors)
