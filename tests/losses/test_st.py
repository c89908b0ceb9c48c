"""cselab.st: the objectives as sentence-transformers losses, in SentenceTransformerTrainer, against
the shipped recipes' own terms on the same embeddings."""
from __future__ import annotations

import json

import pytest
import torch

from cselab.losses.base import LossInputs
from tests.conftest import TINY_BERT

pytest.importorskip("datasets")

ANCHORS = ["the cat sat on the mat", "a dog ran in the park", "birds fly south in winter", "fish swim upstream",
           "she reads a long letter", "the old man builds a boat", "our team won the match", "rain fell all night"]
OTHERS = ["a cat is sitting", "the dog is running", "birds migrate", "the salmon swims", "she is reading",
          "an old man makes a boat", "we won the game", "it rained at night"]
NEGATIVES = ["the cat ran off the mat", "a dog slept in the park", "birds walk north in summer", "fish sink",
             "she writes a short letter", "the young man breaks a boat", "our team lost the match", "sun shone all day"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 2-layer, 32-wide BERT with MiniLM's vocabulary, randomly initialised, as a Transformers directory."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from cselab.sources import resolve_model_path

    path = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    settings = {k: v for k, v in TINY_BERT.items() if k != "model_type"}
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tokenizer.vocab_size, **settings)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def model(model_dir):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    torch.manual_seed(0)
    return SentenceTransformer(modules=[Transformer(str(model_dir), max_seq_length=32),
                                        Pooling(TINY_BERT["hidden_size"], "cls")], device="cpu")


def features(model, *columns: list[str]) -> list[dict[str, torch.Tensor]]:
    return [model.tokenize(column) for column in columns]


def embed(model, *columns: list[str]) -> list[torch.Tensor]:
    return [model(f)["sentence_embedding"] for f in features(model, *columns)]


def recipe_terms(recipe: str, **context):
    from cselab.config import load_config
    from cselab.losses import build_objective

    return build_objective(load_config(recipe).objective, context)


def test_focal_equals_the_focal_recipes_term(model):
    from cselab.st import FocalInfoNCELoss

    loss = FocalInfoNCELoss(model).eval()
    model.eval()
    term = recipe_terms("focal", model_type="bert").terms[0]
    assert loss.term.temperature == term.temperature == 0.07  # read from the backbone's model_type: BERT
    with torch.no_grad():
        ours = loss(features(model, ANCHORS, OTHERS, NEGATIVES), None)
        anchor, positive, negative = embed(model, ANCHORS, OTHERS, NEGATIVES)
        theirs, _ = term(LossInputs(anchor=anchor, positive=positive, negative=negative))
        without, _ = term(LossInputs(anchor=anchor, positive=positive))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert ours.item() != pytest.approx(without.item(), rel=1e-3)  # the negative column counts


def test_ntxent_equals_clears_term(model):
    from cselab.st import NTXentLoss

    loss = NTXentLoss(model).eval()
    model.eval()
    term = recipe_terms("clear-del-word", embedding_size=32, hidden_size=32, vocab_size=30522).terms[0]
    assert term.reduction == loss.term.reduction == "sum"  # Eq. 2
    with torch.no_grad():
        ours = loss(features(model, ANCHORS, OTHERS), None)
        anchor, positive = embed(model, ANCHORS, OTHERS)
        theirs, _ = term(LossInputs(anchor=anchor, positive=positive))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)


def test_una_equals_the_una_recipes_term_over_4n_views(model):
    from cselab.st import UNALoss

    loss = UNALoss(model).eval()
    model.eval()
    term = recipe_terms("una").terms[0]
    assert term.hard_negatives == "instances"
    with torch.no_grad():
        ours = loss(features(model, ANCHORS, OTHERS, NEGATIVES), None)
        anchor, positive, negative, twin = embed(model, ANCHORS, OTHERS, NEGATIVES, NEGATIVES)
        theirs, _ = term(LossInputs(anchor=anchor, positive=positive, negative=negative, negative_positive=twin))
        as_columns, _ = recipe_terms("una-ntxent").terms[0](LossInputs(anchor=anchor, positive=positive,
                                                                       negative=negative))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert ours.item() != pytest.approx(as_columns.item(), rel=1e-3)  # instances, not extra columns


def test_una_encodes_each_negative_twice_with_its_own_dropout(model):
    from cselab.st import UNALoss

    loss = UNALoss(model).train()
    embeddings = loss.embed(features(model, ANCHORS, OTHERS, NEGATIVES))
    assert len(embeddings) == 4
    inputs = loss.loss_inputs(embeddings)
    assert inputs.negative.shape == inputs.negative_positive.shape == (len(NEGATIVES), TINY_BERT["hidden_size"])
    assert not torch.allclose(inputs.negative, inputs.negative_positive)  # a second dropout mask


def test_augcse_equals_the_augcse_recipes_objective(model):
    from cselab.st import AugCSELoss

    labels = torch.tensor([0, 1, 2, 3, 12, 5, 0, 7])
    loss = AugCSELoss(model, num_labels=13).eval()
    model.eval()
    objective = recipe_terms("augcse", embedding_size=32).eval()
    assert objective.weights == [1.0, loss.discriminator_weight]
    objective.terms[1].load_state_dict(loss.discriminator.state_dict())  # the same discriminator weights
    with torch.no_grad():
        ours = loss(features(model, ANCHORS, ANCHORS[::-1], OTHERS), labels)
        anchor, positive, augmented = embed(model, ANCHORS, ANCHORS[::-1], OTHERS)
        theirs, logs = objective(LossInputs(anchor=anchor, positive=positive, label_view=augmented, labels=labels))
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    assert logs["discriminator.loss"].item() > 0


def test_wrong_columns_and_missing_labels_are_one_line_errors(model):
    from cselab.errors import ConfigError
    from cselab.st import AugCSELoss, FocalInfoNCELoss

    with pytest.raises(ConfigError, match=r"FocalInfoNCELoss: the dataset has 1 text columns, the loss takes at "
                                          r"least 2"):
        FocalInfoNCELoss(model)(features(model, ANCHORS), None)
    with pytest.raises(ConfigError, match=r"AugCSELoss: the dataset has 2 text columns, the loss takes 3 \(anchor, "
                                          r"positive, augmented"):
        AugCSELoss(model, num_labels=3)(features(model, ANCHORS, OTHERS), torch.zeros(8, dtype=torch.long))
    with pytest.raises(ConfigError, match=r"AugCSELoss: the dataset needs a 'label' column"):
        AugCSELoss(model, num_labels=3)(features(model, ANCHORS, OTHERS, NEGATIVES), None)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        FocalInfoNCELoss(model, temperature=-1.0)


def losses_and_data(model):
    from datasets import Dataset

    from cselab.st import AugCSELoss, FocalInfoNCELoss, NTXentLoss, UNALoss

    pairs = {"anchor": ANCHORS, "positive": ANCHORS}  # SimCSE's unsupervised pairs: dropout makes them differ
    triplets = {**pairs, "negative": NEGATIVES}
    return [
        (FocalInfoNCELoss(model), Dataset.from_dict(triplets)),
        (NTXentLoss(model), Dataset.from_dict(pairs)),
        (UNALoss(model), Dataset.from_dict(triplets)),
        (AugCSELoss(model, num_labels=4), Dataset.from_dict({**pairs, "augmented": OTHERS,
                                                             "label": [0, 1, 2, 3, 1, 2, 3, 0]})),
    ]


@pytest.mark.parametrize("index", range(4), ids=["focal", "ntxent", "una", "augcse"])
def test_a_few_trainer_steps_with_each_loss(model, tmp_path, index):
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    loss, dataset = losses_and_data(model)[index]
    before = {name: p.detach().clone() for name, p in loss.named_parameters()}
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=4,
                                               learning_rate=1e-3, report_to=[], save_strategy="no", logging_steps=1,
                                               use_cpu=True, disable_tqdm=True, seed=0)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=loss)
    # The model card collects each loss's citation under the loss's class name.
    assert trainer.model.model_card_data.citations[type(loss).__name__] == loss.citation
    result = trainer.train()
    assert result.global_step == 3 and torch.isfinite(torch.tensor(result.training_loss))
    changed = {name for name, p in loss.named_parameters() if not torch.equal(p.detach(), before[name])}
    assert any(name.startswith("model.") for name in changed)
    if index == 3:  # the discriminator is the loss's own module, trained beside the model
        assert any(name.startswith("discriminator.") for name in changed)


def test_config_dict_and_citation_follow_the_contract(model):
    from cselab.st import AugCSELoss, FocalInfoNCELoss, NTXentLoss, UNALoss

    assert FocalInfoNCELoss(model, margin=0.2).get_config_dict() == {"temperature": 0.07, "margin": 0.2,
                                                                     "modulated": True}
    assert NTXentLoss(model, temperature=0.1).get_config_dict() == {"temperature": 0.1, "reduction": "sum"}
    assert UNALoss(model).get_config_dict() == {"temperature": 0.05, "reduction": "mean"}
    assert AugCSELoss(model, num_labels=13).get_config_dict()["num_labels"] == 13
    cited = {cls.__name__: cls(model, num_labels=3) if cls is AugCSELoss else cls(model)
             for cls in (FocalInfoNCELoss, NTXentLoss, UNALoss, AugCSELoss)}
    for name, loss in cited.items():
        assert loss.citation.lstrip().startswith("@"), name
    assert "Focal" in cited["FocalInfoNCELoss"].citation
    assert "CLEAR" in cited["NTXentLoss"].citation
    assert "AugCSE" in cited["AugCSELoss"].citation


def test_augmented_columns_from_cselab_augment(tmp_path, tiny_corpus):
    """`cselab augment`'s file as columns: one drawn augmentation per sentence, labelled by its --aug place."""
    from cselab.cli import main
    from cselab.st import ColumnsError, augmented_columns

    out = tmp_path / "aug.jsonl"
    names = ["contraction", "random_swap", "clear_word_deletion"]
    assert main(["augment", "--aug", ",".join(names), "--in", str(tiny_corpus), "--out", str(out)]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    by_name = {(r["original"], r["augmentation"]): r["augmented"] for r in written}
    columns = augmented_columns(out, seed=3)
    assert columns == augmented_columns(out, seed=3) and columns != augmented_columns(out, seed=4)
    assert columns["anchor"] == columns["positive"] == list(dict.fromkeys(r["original"] for r in written))
    for sentence, augmented, label in zip(columns["anchor"], columns["augmented"], columns["label"], strict=True):
        if label == 0:
            assert augmented == sentence
        else:
            assert augmented == by_name[(sentence, names[label - 1])] != sentence
    assert {0, 2, 3} <= set(columns["label"])  # contraction finds nothing to contract here: 0 = unchanged
    assert set(augmented_columns(out, column="negative")) == {"anchor", "positive", "negative", "label"}

    out.write_text("\n".join(out.read_text().splitlines()[:-1]) + "\n")  # the last sentence lost its last line
    with pytest.raises(ColumnsError, match=r"has 2 of 3 augmentations \(an interrupted `cselab augment`"):
        augmented_columns(out)
    (tmp_path / "aug.jsonl.settings.json").unlink()
    with pytest.raises(ColumnsError, match=r"aug\.jsonl\.settings\.json: the augmenters of aug\.jsonl cannot be read"):
        augmented_columns(out)


@pytest.mark.slow
def test_the_docs_examples_run(model_dir, tmp_path, tiny_corpus, monkeypatch):
    """docs/sentence-transformers.md's section, run as written on a tiny model and corpus (2 steps a trainer)."""
    import re
    import shlex
    from pathlib import Path

    from cselab.cli import main

    text = (Path(__file__).resolve().parents[2] / "docs" / "sentence-transformers.md").read_text()
    section = text.split("## cselab's objectives as sentence-transformers losses")[1].split("\n## ")[0]
    monkeypatch.chdir(tmp_path)
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.splitlines():
            argv = [str(tiny_corpus) if a == "wiki1m.txt" else a for a in shlex.split(line, comments=True)]
            assert argv[0] == "cselab" and main(argv[1:]) == 0
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))
    for doc, test in {'"bert-base-uncased"': repr(str(model_dir)), '"wiki1m.txt"': repr(str(tiny_corpus)),
                      "num_train_epochs=1": "max_steps=2, report_to=[], use_cpu=True"}.items():
        assert doc in code
        code = code.replace(doc, test)
    namespace: dict = {}
    exec(compile(code + "\ntrainer.train()\n", "docs/sentence-transformers.md", "exec"), namespace)
    assert namespace["trainer"].state.global_step == 2 and isinstance(namespace["trainer"].loss,
                                                                       namespace["AugCSELoss"])
