"""Fixtures for the evaluation tests: a generated SentEval directory."""
from __future__ import annotations

from pathlib import Path

import pytest
from senteval_files import make_senteval


@pytest.fixture
def senteval_dir(tmp_path) -> Path:
    return make_senteval(tmp_path / "senteval")
