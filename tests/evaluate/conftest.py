"""Fixtures for the evaluation tests: a generated SentEval directory."""
from __future__ import annotations

from pathlib import Path

import pytest
from senteval_files import make_senteval


@pytest.fixture
def senteval_dir(tmp_path) -> Path:
    return make_senteval(tmp_path / "senteval")


@pytest.fixture
def saved_model(tiny_encoder, tmp_path):
    """The tiny encoder saved as a model directory."""
    return tiny_encoder.save(tmp_path / "tiny-model")
