"""The model card (README.md) of every saved model: sentence-transformers' front matter, the recipe,
the training cost, the selection rule, usage, the BibTeX of the recipe's methods; results from model
selection and from `cselab eval --update-card` in its model-index."""
from __future__ import annotations

import json

import pytest
import yaml

from cselab import citations
from cselab.cli import main
from cselab.config import load_config
from cselab.model.card import hub_base_model, record_results, write_run_cards
from cselab.model.encoder import SentenceEncoder
from cselab.run_files import RUN_CONFIG
from cselab.train.loop import train
from tests.conftest import TINY_BERT


def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


@pytest.fixture(scope="module")
def clear_run(tmp_path_factory):
    """Three steps of CLEAR (word deletion views, NT-Xent + MLM) on the tiny BERT."""
    tmp = tmp_path_factory.mktemp("card")
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(f"the cat number {i} sees a red ball near the river today" for i in range(40)) + "\n")
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={corpus}", "optim.batch_size=8",
                 "train.eval_steps=0", "train.save_steps=0", "train.precision=fp32", "optim.max_steps=3",
                 f"train.output_dir={tmp / 'run'}"]
    train(load_config("clear-del-word", overrides), progress=False)
    return tmp / "run"


def test_a_trained_model_has_a_card_with_its_recipe_cost_selection_and_citations(clear_run):
    card = (clear_run / "README.md").read_text()
    meta = front_matter(card)
    assert meta["library_name"] == "sentence-transformers" and meta["pipeline_tag"] == "sentence-similarity"
    assert {"sentence-transformers", "cselab", "cselab-recipe-clear-del-word"} <= set(meta["tags"])
    assert "base_model" not in meta  # randomly initialised (model.from_config): no base model to name
    assert "model-index" not in meta  # nothing evaluated
    for section in ("## Usage", "## Training recipe", "## Training cost", "## Model selection", "## Citation"):
        assert section in card
    assert "`ntxent`" in card and "`mlm`" in card and "clear_word_deletion" in card
    assert "3 of 3 steps" in card and "this is the last step's model (step 3)" in card
    # The usage loads the directory by its full path (issue 39, item 14: the bare name fails elsewhere).
    path = json.dumps(str(clear_run.resolve()))
    assert f"SentenceTransformer({path})" in card and f"cselab.load({path})" in card and card.startswith("---")
    assert "\n# run\n" in card  # still titled by its name
    assert citations.CLEAR in card and citations.BERT in card and citations.SENTENCE_BERT in card
    assert citations.SIMCSE not in card  # no dropout view in this recipe


def test_model_index_holds_the_selected_stsb_dev_score(clear_run, tmp_path):
    import shutil

    run = shutil.copytree(clear_run, tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary.update(selected_by="stsb_dev", best_stsb_dev=71.2345, best_step=2, base_stsb_dev=60.5)
    (run / "summary.json").write_text(json.dumps(summary))
    write_run_cards(run)
    card = (run / "README.md").read_text()
    [result] = front_matter(card)["model-index"][0]["results"]
    assert result["dataset"] == {"name": "STSBenchmark (dev)", "type": "mteb/stsbenchmark-sts", "split": "dev"}
    assert result["metrics"] == [{"type": "spearman_cosine", "value": 0.7123, "name": "Spearman Cosine"}]
    assert "the best was 71.2345 at step 2. Before training: 60.50." in card


def with_eval_steps(run, every: int) -> None:
    """The run's config as a run that evaluated every ``every`` steps (the fixture's trains without)."""
    run_config = json.loads((run / RUN_CONFIG).read_text())
    run_config["train"]["eval_steps"] = every
    (run / RUN_CONFIG).write_text(json.dumps(run_config))


def test_a_run_selected_on_any_dev_metric_states_its_rule(clear_run, tmp_path):
    """The rule comes from the summary's own label (the dev-metric registry's), for every metric that may
    pick the final model (transfer_dev, sts:PATH, ...), not a finished run called unfinished."""
    import shutil

    run = shutil.copytree(clear_run, tmp_path / "run")
    summary = json.loads((run / "summary.json").read_text())
    summary.update(selected_by="transfer_dev", selection_label="SST-2 dev + MRPC train CV accuracy",
                   best_transfer_dev=80.25, best_step=3)
    (run / "summary.json").write_text(json.dumps(summary))
    with_eval_steps(run, 3)
    write_run_cards(run)
    card = (run / "README.md").read_text()
    assert ("SST-2 dev + MRPC train CV accuracy, evaluated every 3 steps and at the last: the best was 80.25 at "
            "step 3." in card)
    assert "has not finished" not in card


def test_eval_results_recorded_in_the_card_merge_by_split(tmp_path):
    path = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="avg").save(tmp_path / "m")
    first = {"model": str(path), "path": str(path), "split": "test", "avg_over": ["STS12"], "transfer_avg_over": [],
             "tasks": {"STS12": {"score": 55.5, "n": 10}}}
    second = {**first, "avg_over": [], "transfer_avg_over": ["MR"], "tasks": {"MR": {"score": 70.0}}}
    record_results(path, first)
    record_results(path, second)
    meta = front_matter((path / "README.md").read_text())
    results = {r["dataset"]["name"]: r for r in meta["model-index"][0]["results"]}
    assert results["STS12 (test)"]["metrics"][0] == {"type": "spearman_cosine", "value": 0.555,
                                                     "name": "Spearman Cosine"}
    assert results["MR (test)"]["task"]["type"] == "text-classification"
    assert results["MR (test)"]["metrics"][0]["value"] == 0.7
    # A later save (training on from it, or re-saving) keeps the recorded results on the card.
    SentenceEncoder.from_pretrained(str(path)).save(path)
    assert "STS12 (test)" in (path / "README.md").read_text()


def test_cselab_eval_update_card_records_its_results(tmp_path, capsys):
    from tests.evaluate.senteval_files import make_senteval

    data = make_senteval(tmp_path / "senteval")
    path = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="avg").save(tmp_path / "m")
    assert "model-index" not in front_matter((path / "README.md").read_text())
    assert main(["eval", str(path), "--tasks", "STS12,STS13", "--data-dir", str(data), "--quiet", "--no-cache",
                 "--update-card"]) == 0
    assert f"updated the card: {path / 'README.md'}" in capsys.readouterr().out
    recorded = json.loads((path / "cselab_eval.json").read_text())["test"]["tasks"]
    names = {r["dataset"]["name"] for r in front_matter((path / "README.md").read_text())["model-index"][0]["results"]}
    assert set(recorded) == {"STS12", "STS13"} and names == {"STS12 (test)", "STS13 (test)"}


def test_the_base_model_is_named_by_its_hub_id():
    assert hub_base_model("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    assert hub_base_model("bert-base-uncased") == "bert-base-uncased"
    assert hub_base_model("/tmp") is None and hub_base_model(None) is None


def _registered(registry):
    return {name: registry.get(name) for name in registry.names()}


def test_every_loss_and_augmenter_carries_a_citation():
    from cselab.augment import AUGMENTERS, load_all
    from cselab.losses import LOSSES

    load_all()
    classes = {**_registered(LOSSES), **_registered(AUGMENTERS)}
    assert [name for name, cls in classes.items() if not isinstance(getattr(cls, "citation", None), str)] == []
    expected = {"infonce": citations.SIMCSE, "focal": citations.FOCAL_INFONCE, "ntxent": citations.CLEAR,
                "discriminator": citations.AUGCSE, "mlm": citations.BERT, "una": citations.UNA,
                "sda_punctuation": citations.SDA, "clear_word_deletion": citations.CLEAR,
                "eda_random_swap": citations.EDA, "eda_synonym_replacement": citations.EDA,
                "gender_swap": citations.AUGCSE, "casual2formal": citations.AUGCSE}
    assert {name: classes[name].citation for name in expected} == expected
    for entry in (citations.SIMCSE, citations.CLEAR, citations.FOCAL_INFONCE, citations.AUGCSE, citations.SDA,
                  citations.UNA, citations.EDA, citations.BERT, citations.SENTENCE_BERT):
        assert entry.startswith("@") and entry.count("{") == entry.count("}") and "\n\n" not in entry


def test_a_composed_augmenter_cites_its_parts():
    from cselab.augment import AUGMENTERS, load_all

    load_all()
    composed = AUGMENTERS.build("one_of", choices=[{"name": "eda_random_swap"}, {"name": "clear_word_deletion"}])
    assert citations.entries(composed.citation) == [citations.EDA, citations.CLEAR]


def test_a_further_metrics_best_model_has_its_own_selection_on_its_card(clear_run, tmp_path):
    import shutil

    run = shutil.copytree(clear_run, tmp_path / "run")
    kept = SentenceEncoder.from_pretrained(str(run)).save(run / "best-transfer_dev")
    summary = json.loads((run / "summary.json").read_text())
    summary.update(best_transfer_dev=81.5, best_transfer_dev_step=2)
    (run / "summary.json").write_text(json.dumps(summary))
    with_eval_steps(run, 2)
    assert kept / "README.md" in write_run_cards(run)
    card = (kept / "README.md").read_text()
    assert "The best of `transfer_dev` over the evaluations every 2 steps: 81.5 at step 2." in card
    assert "## Training recipe" in card and "cselab-recipe-clear-del-word" in front_matter(card)["tags"]
