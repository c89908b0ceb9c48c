"""A pooler added by a plug-in has no sentence-transformers Pooling mode: saving says so instead of
silently writing a [CLS] pooling that sentence-transformers would then use."""
from __future__ import annotations

import json
import logging

import pytest
import torch

from cselab.model.encoder import SentenceEncoder
from cselab.model.poolers import POOLERS
from tests.conftest import TINY_BERT


@pytest.fixture
def max_pooler():
    saved = POOLERS.snapshot()

    @POOLERS.register("max", "max over tokens")
    def max_pool(hidden_states, mask):
        return hidden_states[-1].masked_fill(~mask.bool().unsqueeze(-1), -1e4).max(1).values

    yield max_pool
    POOLERS.restore(saved)


def test_saving_a_plugin_pooler_warns_that_sentence_transformers_pools_otherwise(max_pooler, tmp_path, caplog):
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="max", mlp=False)
    with caplog.at_level(logging.WARNING, logger="cselab.model.files"):
        encoder.save(tmp_path / "model")
    assert "pooler 'max' has no sentence-transformers Pooling mode" in caplog.text
    assert json.loads((tmp_path / "model" / "cselab_config.json").read_text())["pooler"] == "max"


def test_the_shipped_poolers_save_without_a_warning(tmp_path, caplog):
    for pooler in POOLERS.names():
        encoder = SentenceEncoder.from_config(TINY_BERT, "minilm", pooler=pooler, mlp=False)
        with caplog.at_level(logging.WARNING, logger="cselab.model.files"):
            encoder.save(tmp_path / pooler)
    assert "has no sentence-transformers Pooling mode" not in caplog.text
