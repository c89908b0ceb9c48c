"""speed.speed_up: the fast-dropout attention and the unpadded forward only on the transformers
releases they were checked on (speed/compat.py); elsewhere one warning and the model as it is."""
import logging

import pytest
import torch
from torch import nn

from cselab.config import ModelConfig, TrainConfig
from cselab.speed import compat, speed_up
from cselab.speed.cpu import ATTENTION_NAME, FastDropout, PersistentGradEmbedding


def dropout_kinds(encoder) -> set[type]:
    return {type(m) for m in encoder.backbone.modules() if isinstance(m, (nn.Dropout, FastDropout))}


@pytest.mark.parametrize("version", ["4.57.1", "5.16.0", "6.0.0"])
def test_outside_the_tested_releases_the_model_runs_as_transformers_defines_it(version, tiny_encoder, monkeypatch,
                                                                                caplog):
    monkeypatch.setattr(compat, "transformers_version", lambda: version)
    attention = tiny_encoder.backbone.config._attn_implementation
    with caplog.at_level(logging.WARNING, logger="cselab.speed"):
        speed_up(tiny_encoder, TrainConfig(fast_cpu=True), ModelConfig(unpad="true"), torch.device("cpu"))
    assert not tiny_encoder.unpadded and not tiny_encoder.use_unpadded()
    assert dropout_kinds(tiny_encoder) == {nn.Dropout}
    assert tiny_encoder.backbone.config._attn_implementation == attention
    # Not transformers' internals: kept.
    assert type(tiny_encoder.backbone.get_input_embeddings()) is PersistentGradEmbedding
    (record,) = caplog.records
    message = record.getMessage()
    assert f"transformers {version} is outside" in message and compat.TESTED_TRANSFORMERS in message
    assert "\n" not in message
    tiny_encoder.train()
    tiny_encoder(tiny_encoder.tokenize(["a cat sat on the mat", "dogs run"])).sum().backward()


def test_on_a_tested_release_every_speed_up_applies_without_a_warning(tiny_encoder, monkeypatch, caplog):
    monkeypatch.setattr(compat, "transformers_version", lambda: "5.17.0")
    with caplog.at_level(logging.WARNING, logger="cselab.speed"):
        speed_up(tiny_encoder, TrainConfig(fast_cpu=True), ModelConfig(unpad="auto"), torch.device("cpu"))
    assert tiny_encoder.unpadded
    assert dropout_kinds(tiny_encoder) == {FastDropout}
    assert tiny_encoder.backbone.config._attn_implementation == ATTENTION_NAME
    assert not caplog.records


def test_nothing_asked_nothing_said(tiny_encoder, monkeypatch, caplog):
    """Off by configuration (no fast_cpu, no unpad), an untested release is not worth a warning."""
    monkeypatch.setattr(compat, "transformers_version", lambda: "6.0.0")
    with caplog.at_level(logging.WARNING, logger="cselab.speed"):
        speed_up(tiny_encoder, TrainConfig(fast_cpu=False), ModelConfig(unpad="false"), torch.device("cpu"))
    assert not caplog.records and not tiny_encoder.unpadded
