"""CLEAR's [DEL] placeholder reaches the encoder as one token of its own, and is saved with the model."""
import json

import torch

from cselab.augment import build_augmenter
from cselab.augment.base import special_tokens


def test_deletion_augmenters_declare_their_placeholder_through_compositions():
    deletion = build_augmenter("clear_word_deletion")
    assert special_tokens(deletion) == ("[DEL]",)
    assert special_tokens(build_augmenter("clear_word_deletion", placeholder=None)) == ()
    nested = build_augmenter("sequence", steps=[
        {"name": "clear_synonym_substitution"},
        {"name": "one_of", "choices": ["clear_span_deletion", "clear_reorder"]}])
    assert special_tokens(nested) == ("[DEL]",)
    assert special_tokens(build_augmenter("clear_reorder")) == ()


def test_encoder_keeps_a_new_placeholder_whole_and_grows_its_embeddings(tiny_encoder):
    rows = tiny_encoder.backbone.get_input_embeddings().weight.shape[0]
    before = tiny_encoder.tokenize(["the [DEL] cat"])["input_ids"][0].tolist()
    assert tiny_encoder.add_special_tokens(("[DEL]",)) == ["[DEL]"]
    after = tiny_encoder.tokenize(["the [DEL] cat"])["input_ids"][0].tolist()
    assert len(after) < len(before)  # "[", "del", "]" became one token
    assert tiny_encoder.tokenizer.convert_ids_to_tokens(after).count("[DEL]") == 1
    assert tiny_encoder.backbone.get_input_embeddings().weight.shape[0] == rows + 1
    assert tiny_encoder.add_special_tokens(("[DEL]",)) == []  # a second time changes nothing


def test_clear_training_saves_the_placeholder_with_the_model(tmp_path, tiny_corpus):
    import cselab
    from cselab.config import load_config
    from cselab.train.loop import train
    from tests.conftest import TINY_BERT

    overrides = [f"data.corpus={tiny_corpus}", "optim.max_steps=2", "optim.batch_size=4", "train.eval_steps=0",
                 "train.save_steps=0", f"train.output_dir={tmp_path / 'run'}", "train.precision=fp32",
                 f"model.from_config={json.dumps(TINY_BERT)}"]
    train(load_config("clear-del-word", overrides), resume=False, progress=False)
    model = cselab.load(str(tmp_path / "run"))
    ids = model.tokenize(["one [DEL] two"])["input_ids"][0].tolist()
    assert model.tokenizer.convert_ids_to_tokens(ids).count("[DEL]") == 1
    assert torch.isfinite(torch.as_tensor(model.encode(["one [DEL] two"]))).all()
