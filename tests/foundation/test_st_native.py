"""Saved models are sentence-transformers-native: read at the backbone's full length everywhere (not
the training length), config_sentence_transformers.json written, no weights initialised on load, and
models saved by earlier versions read at their full length too."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from cselab.config import load_config
from cselab.model.encoder import FULL_LENGTH_CAP, SentenceEncoder
from cselab.train.loop import train
from tests.conftest import TINY_BERT
from tests.reliability.test_saved_models import assert_no_new_weights, transformers_messages

WIDE_BERT = {**TINY_BERT, "max_position_embeddings": FULL_LENGTH_CAP}  # room for 200-token sentences
TRAIN_LENGTH = 32
WORDS = ("the old man carries a small house across the river while our team reads the map slowly "
         "and a child follows the bird into the garden at night").split()


def sentences_of(tokenizer, lengths) -> list[str]:
    """Sentences of (about) the given numbers of tokens, checked with the tokenizer."""
    out = []
    for n in lengths:
        text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
        while len(tokenizer(text)["input_ids"]) > n:
            text = text.rsplit(" ", 1)[0]
        out.append(text)
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 3-step SimCSE run on the tiny BERT (512 positions), trained at max_seq_len 32."""
    tmp = tmp_path_factory.mktemp("st-native")
    corpus = tmp / "corpus.txt"
    corpus.write_text("\n".join(" ".join(WORDS[i:i + 6 + i % 5]) + "." for i in range(40)) + "\n", encoding="utf-8")
    overrides = [f"model.from_config={json.dumps(WIDE_BERT)}", f"data.corpus={corpus}", "optim.batch_size=8",
                 "train.eval_steps=0", "train.save_steps=0", "train.precision=fp32", "optim.max_steps=3",
                 f"model.max_seq_len={TRAIN_LENGTH}", f"train.output_dir={tmp / 'run'}"]
    summary = train(load_config("simcse", overrides), progress=False)
    assert summary["finished"] and summary["steps"] == 3
    return tmp / "run"


def test_sentence_transformers_and_cselab_read_long_sentences_alike_at_full_length(trained, capfd):
    from sentence_transformers import SentenceTransformer

    import cselab

    capfd.readouterr()
    with transformers_messages() as messages:
        theirs_model = SentenceTransformer(str(trained), device="cpu")
        ours_model = cselab.load(str(trained))
    assert_no_new_weights(messages, capfd.readouterr().err)
    assert theirs_model.max_seq_length == ours_model.max_seq_len == FULL_LENGTH_CAP
    sentences = sentences_of(ours_model.tokenizer, [5, 12, 31, 60, 100, 150, 200])
    counts = [len(ours_model.tokenizer(s)["input_ids"]) for s in sentences]
    assert min(counts) >= 5 and max(counts) >= 190 and max(counts) <= 200
    ours = ours_model.encode(sentences)
    theirs = theirs_model.encode(sentences, convert_to_numpy=True)
    assert np.abs(ours - theirs).max() <= 1e-5
    # Cut at the training length, the long sentences read differently: the check above would see it.
    cut = cselab.load(str(trained), max_seq_len=TRAIN_LENGTH).encode(sentences)
    long = [i for i, n in enumerate(counts) if n > TRAIN_LENGTH]
    assert all(np.abs(cut[i] - ours[i]).max() > 1e-4 for i in long)
    assert np.abs(cut[0] - ours[0]).max() <= 1e-5  # a short sentence is the same either way


def test_the_training_length_stays_in_cselab_config_and_the_card(trained):
    settings = json.loads((trained / "cselab_config.json").read_text())
    assert settings["max_seq_len"] == TRAIN_LENGTH and settings["format"] == 2
    assert json.loads((trained / "sentence_bert_config.json").read_text())["max_seq_length"] == FULL_LENGTH_CAP
    card = (trained / "README.md").read_text()
    assert f"Training sequence length: {TRAIN_LENGTH} tokens" in card
    assert f"Maximum sequence length: {FULL_LENGTH_CAP} tokens" in card


def test_config_sentence_transformers_json_is_written_as_sentence_transformers_writes_it(trained):
    import sentence_transformers
    import torch
    import transformers

    config = json.loads((trained / "config_sentence_transformers.json").read_text())
    assert config["similarity_fn_name"] == "cosine"
    assert config["__version__"] == {"sentence_transformers": sentence_transformers.__version__,
                                     "transformers": transformers.__version__, "pytorch": torch.__version__}
    assert config["prompts"] == {} and config["default_prompt_name"] is None
    assert config["model_type"] == "SentenceTransformer"


def test_the_usable_length_is_the_position_limit_at_most_512():
    from cselab.model.encoder import usable_length

    short = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="avg")
    assert usable_length(short.backbone, short.tokenizer) == TINY_BERT["max_position_embeddings"]
    long = SentenceEncoder.from_config({**TINY_BERT, "max_position_embeddings": 1024}, "minilm", pooler="avg")
    assert usable_length(long.backbone, long.tokenizer) == FULL_LENGTH_CAP
    roberta = SentenceEncoder.from_config({**TINY_BERT, "model_type": "roberta", "max_position_embeddings": 66,
                                           "pad_token_id": 1}, "minilm", pooler="avg")
    assert usable_length(roberta.backbone, roberta.tokenizer) == 64  # RoBERTa counts from padding_idx + 1


def _as_earlier_save(path, length: int) -> None:
    """Rewrite a saved model's files as cselab wrote them before save format 2."""
    settings = json.loads((path / "cselab_config.json").read_text())
    settings = {k: settings[k] for k in ("pooler", "mlp", "mlp_only_train")} | {"max_seq_len": length}
    (path / "cselab_config.json").write_text(json.dumps(settings))
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": length, "do_lower_case": False}))
    (path / "config_sentence_transformers.json").unlink()


def test_a_model_saved_by_an_earlier_version_is_read_at_full_length_with_one_line(tmp_path, caplog):
    import cselab

    encoder = SentenceEncoder.from_config(WIDE_BERT, "minilm", pooler="avg", max_seq_len=TRAIN_LENGTH)
    path = encoder.save(tmp_path / "old")
    _as_earlier_save(path, TRAIN_LENGTH)
    with caplog.at_level(logging.WARNING, logger="cselab.model.files"):
        old = cselab.load(str(path))
    lines = [r.getMessage() for r in caplog.records if "length it was trained at" in r.getMessage()]
    assert len(lines) == 1 and f"max_seq_length {TRAIN_LENGTH}" in lines[0] and "\n" not in lines[0]
    assert old.max_seq_len == FULL_LENGTH_CAP and old.train_max_seq_len == TRAIN_LENGTH
    sentence = sentences_of(old.tokenizer, [120])
    encoder.max_seq_len = FULL_LENGTH_CAP  # the same weights, read at full length
    assert np.abs(old.encode(sentence) - encoder.encode(sentence)).max() <= 1e-5
    # Re-saved, it is a current save: sentence-transformers then reads the full length too, no warning.
    resaved = old.save(tmp_path / "resaved")
    assert json.loads((resaved / "sentence_bert_config.json").read_text())["max_seq_length"] == FULL_LENGTH_CAP
    assert json.loads((resaved / "cselab_config.json").read_text())["max_seq_len"] == TRAIN_LENGTH
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cselab.model.files"):
        assert cselab.load(str(resaved)).max_seq_len == FULL_LENGTH_CAP
    assert "length it was trained at" not in caplog.text


def test_a_sentence_transformers_directory_keeps_its_declared_length(tmp_path, caplog):
    """A length a directory declares for itself (not cselab's training length) is what it is read at."""
    import cselab

    path = SentenceEncoder.from_config(WIDE_BERT, "minilm", pooler="avg").save(tmp_path / "model")
    (path / "cselab_config.json").unlink()
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    with caplog.at_level(logging.WARNING):
        assert cselab.load(str(path)).max_seq_len == 128
    assert "length it was trained at" not in caplog.text
