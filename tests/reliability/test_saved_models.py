"""Saved models load complete (no pooler "newly initialized" by Hugging Face or sentence-transformers),
and a model directory that is damaged, or a model config that builds nothing, is one line, exit 2."""
from __future__ import annotations

import contextlib
import json
import logging
import warnings

import pytest
import torch

from cselab.cli import main
from cselab.model.encoder import SentenceEncoder
from tests.conftest import TINY_BERT


@contextlib.contextmanager
def transformers_messages():
    """Everything transformers logs or warns while the block runs (its loading report included)."""
    from transformers.utils import logging as hf_logging

    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("transformers")
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield records
        records.extend(str(w.message) for w in caught)
    finally:
        logger.removeHandler(handler)
        hf_logging.set_verbosity(level)


def assert_no_new_weights(messages: list[str], captured: str) -> None:
    text = "\n".join(messages) + captured
    for phrase in ("newly initialized", "MISSING", "not initialized", "LOAD REPORT"):
        assert phrase not in text, text


def tiny(pooler: str, mlp: bool | None = None) -> SentenceEncoder:
    torch.manual_seed(0)
    return SentenceEncoder.from_config(TINY_BERT, "minilm", pooler=pooler, mlp=mlp, max_seq_len=32)


def test_sentence_transformers_loads_a_saved_model_without_initialising_a_pooler(tmp_path, capfd):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    encoder = tiny("cls")  # SimCSE: [CLS] with its MLP in training
    out = encoder.save(tmp_path / "model")
    capfd.readouterr()
    with transformers_messages() as messages:
        model = SentenceTransformer(str(out), device="cpu")
        backbone, info = AutoModel.from_pretrained(str(out), output_loading_info=True)
    assert_no_new_weights(messages, capfd.readouterr().err)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    sentences = ["a small test sentence", "and another, rather longer, sentence to encode"]
    assert torch.allclose(torch.from_numpy(model.encode(sentences)), torch.from_numpy(encoder.encode(sentences)),
                          atol=1e-5)
    # The Hugging Face pooler is SimCSE's MLP over [CLS] (as the SimCSE authors convert their models).
    encoder.eval()
    features = encoder.tokenize(sentences)
    with torch.no_grad():
        pooled = backbone.eval()(**features).pooler_output
        assert torch.allclose(pooled, encoder(features, use_mlp=True), atol=1e-5)


def test_without_an_mlp_the_pooler_is_the_base_models_or_an_identity(tmp_path, capfd):
    from transformers import AutoModel

    out = tiny("avg").save(tmp_path / "random-init")  # no base pooler to keep: identity
    with transformers_messages() as messages:
        backbone, info = AutoModel.from_pretrained(str(out), output_loading_info=True)
    assert_no_new_weights(messages, capfd.readouterr().err)
    assert torch.equal(backbone.pooler.dense.weight, torch.eye(TINY_BERT["hidden_size"]))

    base, _ = AutoModel.from_pretrained(SentenceEncoder.from_pretrained("minilm").tokenizer.name_or_path,
                                        output_loading_info=True)
    minilm = SentenceEncoder.from_pretrained("minilm", pooler="avg")
    again = SentenceEncoder.from_pretrained(str(minilm.save(tmp_path / "minilm")))  # its pooler survives a round
    saved = AutoModel.from_pretrained(str(again.save(tmp_path / "minilm-again")))
    assert torch.equal(saved.pooler.dense.weight, base.pooler.dense.weight)
    assert again.backbone.pooler is None  # not part of training


def test_max_seq_len_beyond_the_position_embeddings_is_cut_to_them(caplog):
    encoder = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="cls", max_seq_len=1000)
    assert encoder.max_seq_len == TINY_BERT["max_position_embeddings"]
    assert "more than the model's 64 positions" in caplog.text
    assert encoder.encode(["word " * 500]).shape == (1, TINY_BERT["hidden_size"])  # would index past 64


@pytest.fixture
def saved_tiny(tmp_path):
    return tiny("cls").save(tmp_path / "model")


# (file, its new bytes, what the message says). A sentence-transformers directory without cselab's
# own settings (cselab_config.json removed) is read through modules.json and its modules' configs.
DAMAGE = [
    ("cselab_config.json", b"{not json", "cselab_config.json: not valid JSON"),
    ("cselab_config.json", b'{"pooler": "cls", "max_seq_len": "long"}', "max_seq_len has an invalid value"),
    ("cselab_config.json", b'{"pooler": "telepathy"}', "unknown pooler 'telepathy'"),
    ("cselab_config.json", b"[1, 2]", "expected a JSON object, got list"),
    ("cselab_config.json", b"\xff\xfe", "cselab_config.json: not valid JSON"),
    ("modules.json", b'{"a": 1}', "modules.json: expected a JSON list"),
    ("modules.json", b'[{"type": 5}]', "modules.json: each module must be an object"),
    ("1_Pooling/config.json", b"", "config.json: not valid JSON"),
    ("sentence_bert_config.json", b'{"max_seq_length": "x"}', "max_seq_length has an invalid value"),
    ("mlp.safetensors", b"\x08\x00\x00\x00\x00\x00\x00\x00{garbage", "cannot load the MLP weights"),
    ("tokenizer.json", b"{}", "cannot load a model"),
    ("config.json", b'{"model_type": "bert", "hidden_size": "wide"}', "cannot load a model"),
]


@pytest.mark.parametrize(("name", "content", "fragment"), DAMAGE, ids=[f"{n}-{i}" for i, (n, _, _) in
                                                                       enumerate(DAMAGE)])
def test_a_damaged_model_directory_is_one_line(saved_tiny, tmp_path, capsys, name, content, fragment):
    if name in ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json"):
        (saved_tiny / "cselab_config.json").unlink()  # a plain sentence-transformers directory
    (saved_tiny / name).write_bytes(content)
    sentences = tmp_path / "in.txt"
    sentences.write_text("a sentence\n")
    out = tmp_path / "e.npy"
    assert main(["encode", str(saved_tiny), "--in", str(sentences), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("cselab encode: error: ") and fragment in err, err
    assert not out.exists()


@pytest.mark.parametrize("model_config", [{"model_type": "no-such-model"}, {**TINY_BERT, "hidden_size": -4},
                                          {**TINY_BERT, "num_attention_heads": 5}, {**TINY_BERT, "hidden_act": "nope"},
                                          {**TINY_BERT, "max_position_embeddings": 2}])
def test_a_model_config_that_builds_no_model_is_one_line(tmp_path, capsys, monkeypatch, model_config):
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"sentence {i} of a corpus\n" for i in range(8)))
    out_dir = tmp_path / "run"
    argv = ["train", "--corpus", str(corpus), "--output-dir", str(out_dir), "--max-steps", "1",
            "--set", f"model.from_config={json.dumps(model_config)}", "--set", "train.eval_steps=0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "model" in err and "Traceback" not in err, err
    assert not out_dir.exists()
