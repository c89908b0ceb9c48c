"""A model pre-trained from scratch is a Hugging Face encoder directory and a sentence-transformers
model, and any recipe starts from it with the raw-encoder defaults (cls pooler with SimCSE's MLP)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.pretrain.conftest import pretrain_config

SENTENCES = ["In 1850 the old man finds a small house.", "A child paints the quiet river.", "Hello."]


@pytest.fixture
def pretrained(tmp_path, lines_file):
    from cselab.train.loop import train

    out = tmp_path / "pretrained"
    summary = train(pretrain_config(lines_file, out, **{"optim.max_steps": 3, "train.save_steps": 0}), progress=False)
    assert summary["finished"]
    return out


def test_output_loads_in_transformers_and_sentence_transformers_alike(pretrained):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    import cselab

    assert (pretrained / "model.safetensors").is_file() and not list(pretrained.glob("*.bin"))
    backbone = AutoModel.from_pretrained(pretrained).eval()
    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    assert backbone.config.hidden_size == 32 and backbone.config.num_hidden_layers == 2
    features = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        cls_states = backbone(**features).last_hidden_state[:, 0].numpy()
    st_vectors = SentenceTransformer(str(pretrained), device="cpu").encode(SENTENCES)
    cselab_vectors = cselab.load(str(pretrained)).encode(SENTENCES)
    np.testing.assert_allclose(st_vectors, cls_states, atol=1e-5)
    np.testing.assert_allclose(cselab_vectors, cls_states, atol=1e-5)


def test_a_recipe_started_from_it_gets_the_raw_encoder_defaults(pretrained, tmp_path, lines_file):
    from cselab.config import load_config
    from cselab.model.encoder import SentenceEncoder
    from cselab.train.loop import train

    encoder = SentenceEncoder.from_pretrained(str(pretrained))
    assert encoder.pooler == "cls" and encoder.mlp is not None and encoder.mlp_only_train  # as for bert-base
    out = tmp_path / "simcse"
    config = load_config("simcse", [f"model.name_or_path={pretrained}", f"data.corpus={lines_file}",
                                    "optim.batch_size=4", "optim.max_steps=2", "train.eval_steps=0",
                                    "train.save_steps=0", "train.precision=fp32", f"train.output_dir={out}"])
    assert train(config, progress=False)["finished"]
    settings = json.loads((out / "cselab_config.json").read_text())
    assert settings["pooler"] == "cls" and settings["mlp"] and (out / "mlp.safetensors").is_file()


def test_pretrain_command_runs_the_mlm_pretrain_recipe(capsys):
    from cselab.cli import main

    assert main(["pretrain", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["recipe"] == "mlm-pretrain" and printed["data"]["packing"] and printed["model"]["from_config"]
    assert main(["pretrain", "--recipe", "clear-pretrain", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["recipe"] == "clear-pretrain" and {t["name"] for t in printed["objective"]} == {"ntxent", "mlm"}
