"""model.wordpiece_vocab_size: a BERT WordPiece vocabulary trained on the run's training lines (never
the held-out ones), cached and reused, the same whatever the trainer's hash order, and saved with
the model so that transformers and sentence-transformers load it."""
from __future__ import annotations

import json
import random

import pytest
import torch

from tests.pretrain.conftest import pretrain_config, write_lines

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture
def lines(lines_file) -> list[str]:
    return lines_file.read_text(encoding="utf-8").splitlines()


def test_the_vocabulary_has_the_size_asked_for_and_bert_special_tokens(lines):
    from cselab.data.wordpiece import wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer(lines, 120).tokenizer
    assert len(tokenizer) == 120
    assert tokenizer.convert_ids_to_tokens(list(range(5))) == SPECIALS
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id,
            tokenizer.mask_token_id) == (0, 1, 2, 3, 4)
    assert sorted(tokenizer.all_special_tokens) == sorted(SPECIALS)  # the "##" pieces are ordinary pieces
    encoded = tokenizer("The Zorblaxian MAP.", "An apple")
    assert encoded["input_ids"][0] == 2 and encoded["input_ids"].count(3) == 2 and encoded["input_ids"][-1] == 3
    pieces = tokenizer.tokenize("The Zorblaxian MAP.")
    assert pieces[0] == "the" and pieces[-1] == "." and all(p in tokenizer.get_vocab() for p in pieces)
    assert "".join(p.removeprefix("##") for p in pieces) == "thezorblaxianmap."  # lower-cased, split into pieces
    assert tokenizer.tokenize("jukebox") == ["[UNK]"]  # j and k are in no training line


def test_the_note_gives_the_size_as_trained(lines):
    from cselab.data.wordpiece import wordpiece_tokenizer

    vocabulary = wordpiece_tokenizer(lines, 120)
    vocabulary.tokenizer.add_tokens(["[DEL]"], special_tokens=True)  # as clear-pretrain's views do
    assert vocabulary.note().startswith(f"WordPiece vocabulary: 120 pieces, trained on {len(lines)} training lines in ")


def test_a_size_beyond_what_the_lines_give_stops_at_every_word_whole(lines):
    from cselab.data.wordpiece import wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer(lines, 5000).tokenizer
    assert 120 < len(tokenizer) < 5000
    assert all(tokenizer.tokenize(word) == [word.lower()] for line in lines for word in line.rstrip(".").split())


def test_the_trained_vocabulary_is_the_same_every_time_without_the_cache(lines):
    """The stock trainer (tokenizers 0.23) numbers the "##" pieces in hash-map order, which breaks ties
    between merges: on these lines ten trainings gave ten vocabularies. Fixing those pieces first
    makes one (each training below draws fresh hash-map seeds)."""
    from cselab.data.wordpiece import train_wordpiece

    assert len({train_wordpiece(lines, 120).to_str() for _ in range(6)}) == 1


def test_the_cache_is_reused_and_keyed_by_lines_and_size(lines, private_cache, monkeypatch):
    import cselab.data.wordpiece as wordpiece

    first = wordpiece.wordpiece_tokenizer(lines, 120)
    assert first.trained and first.file.parent == private_cache / "wordpiece" and first.file.is_file()
    written, mtime = first.file.read_bytes(), first.file.stat().st_mtime_ns
    assert not list(first.file.parent.glob(".*part"))  # written to a part file, then moved into place

    def no_training(*args, **kwargs):
        raise AssertionError("trained again instead of reading the cache")

    with monkeypatch.context() as patch:
        patch.setattr(wordpiece, "train_wordpiece", no_training)
        again = wordpiece.wordpiece_tokenizer(lines, 120)
    assert not again.trained and again.file == first.file and "earlier" in again.note()
    assert first.file.read_bytes() == written and first.file.stat().st_mtime_ns == mtime
    assert again.tokenizer.backend_tokenizer.to_str() == first.tokenizer.backend_tokenizer.to_str()
    assert wordpiece.wordpiece_tokenizer(lines, 130).file != first.file
    assert wordpiece.wordpiece_tokenizer(lines[:-1], 120).file != first.file
    assert len(list((private_cache / "wordpiece").iterdir())) == 3


def test_only_training_lines_make_the_vocabulary(tmp_path):
    """A word in held-out lines alone is no piece; a word as frequent in training lines is one."""
    from cselab.data.split import hold_out
    from cselab.train.setup import build_setup

    path = tmp_path / "split.txt"
    lines = write_lines(path, count=80)
    held = set(hold_out(len(lines), 0.1).validation.tolist())
    trained = [i for i in range(len(lines)) if i not in held][:len(held)]
    lines = [line + (" marble marble marble jukebox" if i in held else " tundra tundra tundra" if i in trained else "")
             for i, line in enumerate(lines)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    parts = build_setup(pretrain_config(path, tmp_path / "out", **{"model.wordpiece_vocab_size": 160}),
                        torch.device("cpu"))
    vocab = parts.encoder.tokenizer.get_vocab()
    assert len(vocab) == 160 and parts.encoder.input_embeddings().shape[0] == 160
    assert "tundra" in vocab and "marble" not in vocab and "j" not in vocab and "k" not in vocab
    assert parts.notes and parts.notes[0].startswith("WordPiece vocabulary: 160 pieces, trained on ")
    assert f"on {len(lines) - len(held)} training lines" in parts.notes[0]


def test_a_pretrain_run_saves_a_model_with_the_trained_vocabulary(tmp_path, lines_file, capsys):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from cselab.train.loop import train

    out = tmp_path / "out"
    config = pretrain_config(lines_file, out, **{"model.wordpiece_vocab_size": 120, "optim.max_steps": 2,
                                                 "train.save_steps": 0, "train.eval_steps": 2,
                                                 "objective": "[{name: mlm, whole_word: true}]"})
    assert train(config, progress=False)["finished"]
    assert "WordPiece vocabulary: 120 pieces, trained on" in capsys.readouterr().out
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert len(tokenizer) == 120 and tokenizer.convert_ids_to_tokens(list(range(5))) == SPECIALS
    assert AutoModel.from_pretrained(out).config.vocab_size == 120
    assert json.loads((out / "train_config.json").read_text())["model"]["wordpiece_vocab_size"] == 120
    assert SentenceTransformer(str(out), device="cpu").encode(["A child paints the quiet river."]).shape == (1, 32)


def test_a_resumed_run_ends_bit_identical_even_with_the_cache_gone(tmp_path, lines_file, private_cache, capsys):
    """Resumed from its step-3 checkpoint after the cache was deleted: the vocabulary is trained again,
    the same, and the run ends with the uninterrupted run's weights."""
    import shutil

    from safetensors.torch import load_file

    from cselab.train.loop import train

    out = tmp_path / "out"
    config = pretrain_config(lines_file, out, **{"model.wordpiece_vocab_size": 120, "optim.max_steps": 6,
                                                 "train.eval_steps": 0, "train.keep_checkpoints": 2})
    train(config, progress=False)
    expected = load_file(str(out / "model.safetensors"))
    checkpoints = sorted((out / "checkpoints").glob("step-*"))
    assert [c.name for c in checkpoints] == ["step-00000003", "step-00000006"]
    shutil.rmtree(checkpoints[-1])
    shutil.rmtree(private_cache / "wordpiece")
    capsys.readouterr()
    assert train(config, progress=False)["finished"]
    printed = capsys.readouterr().out
    assert "WordPiece vocabulary: 120 pieces, trained on" in printed and "earlier" not in printed
    assert "resuming from" in printed and "step-00000003" in printed
    weights = load_file(str(out / "model.safetensors"))
    assert weights.keys() == expected.keys() and all(torch.equal(weights[k], expected[k]) for k in weights)


def test_a_resume_with_another_vocabulary_of_the_same_size_is_refused(tmp_path, lines_file, private_cache):
    """The checkpoint records the trained vocabulary's fingerprint; a vocabulary trained again differently
    (another `tokenizers` version, simulated by tampering the record) is refused in one line."""
    import shutil

    from cselab.config import ConfigError
    from cselab.train import checkpoint as ckpt
    from cselab.train.loop import train
    from cselab.train.setup import build_setup
    from tests.reliability.conftest import edit_checkpoint_state

    out = tmp_path / "out"
    config = pretrain_config(lines_file, out, **{"model.wordpiece_vocab_size": 120, "optim.max_steps": 6,
                                                 "train.eval_steps": 0, "train.keep_checkpoints": 2})
    train(config, progress=False)
    first, last = ckpt.list_checkpoints(out / "checkpoints")
    recorded = ckpt.read_state(first)["components"]["position"]["vocabulary_sha256"]
    assert recorded == ckpt.read_state(last)["components"]["position"]["vocabulary_sha256"]
    assert recorded == build_setup(config, torch.device("cpu")).vocabulary_sha256  # the vocabulary as trained
    shutil.rmtree(last)
    edit_checkpoint_state(first, lambda state: state["components"]["position"].update(vocabulary_sha256="0" * 64))
    with pytest.raises(ConfigError) as error:
        train(config, progress=False)
    message = str(error.value)
    assert message.startswith(f"{first}: was trained with another WordPiece vocabulary") and "\n" not in message
    assert "--no-resume" in message
    edit_checkpoint_state(first, lambda state: state["components"]["position"].update(vocabulary_sha256=recorded))
    assert train(config, progress=False)["finished"]


@pytest.mark.parametrize(("overrides", "message"), [
    (["model.wordpiece_vocab_size=8000"], "model.wordpiece_vocab_size: trains the vocabulary of a new encoder; "
                                          "set model.from_config too"),
    (["model.wordpiece_vocab_size=10"], "model.wordpiece_vocab_size: must be >= 64 or null"),
    (["model.wordpiece_vocab_size=8000.5"], "model.wordpiece_vocab_size: expected an integer"),
    (["model.wordpiece_vocab_size=8000",
      "model.from_config={model_type: bert, vocab_size: 100}"], "model.from_config.vocab_size: set by"),
])
def test_config_errors_are_one_line(overrides, message):
    from cselab.config import ConfigError, load_config

    recipe = "simcse" if overrides == ["model.wordpiece_vocab_size=8000"] else "mlm-pretrain"
    with pytest.raises(ConfigError) as error:
        load_config(recipe, overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_the_command_line_refuses_in_one_line(capsys):
    from cselab.cli import main

    assert main(["pretrain", "--set", "model.wordpiece_vocab_size=3", "--print-config"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cselab pretrain: error: model.wordpiece_vocab_size: must be >= 64") and "\n" not in err
    assert main(["pretrain", "--set", "model.wordpiece_vocab_size=8000", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["model"]["wordpiece_vocab_size"] == 8000


def test_a_size_below_the_lines_characters_is_refused_with_the_floor():
    from cselab.config import ConfigError
    from cselab.data.wordpiece import wordpiece_tokenizer

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz" + "αβγδεζηθικλμνξοπρστυφχψω" + "абвгдежзийклмнопрстуфхцчшщ"
    lines = ["".join(rng.choice(letters) for _ in range(8)) + " " + letters for _ in range(30)]
    with pytest.raises(ConfigError) as error:
        wordpiece_tokenizer(lines, 100)
    message = str(error.value)
    assert message.startswith("model.wordpiece_vocab_size: 100 is fewer than the ") and "set at least" in message
    floor = int(message.rsplit(" ", 1)[-1])
    assert floor > 100 and len(wordpiece_tokenizer(lines, floor).tokenizer) == floor
