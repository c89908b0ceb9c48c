"""Fixtures for the experiment tests: synthetic run directories and the CLI with `sweep`/`report`."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The evaluation tests' generator of a tiny SentEval directory (generated text, never ../shared).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "evaluate"))

from fake_runs import make_sweep  # noqa: E402

LEVELS = {"simcse": 75.0, "una": 78.0, "focal": 74.0}


@pytest.fixture
def fake_sweep(tmp_path) -> Path:
    """Three recipes x three seeds of synthetic runs with dev-split evaluation results."""
    return make_sweep(tmp_path / "sweep", LEVELS)


@pytest.fixture
def cli(monkeypatch):
    """``cselab`` main() with this package's subcommands registered (until the lead adds them to EXTENSIONS)."""
    import cselab.cli

    if "cselab.experiments.cli" not in cselab.cli.EXTENSIONS:
        monkeypatch.setattr(cselab.cli, "EXTENSIONS", [*cselab.cli.EXTENSIONS, "cselab.experiments.cli"])
    return cselab.cli.main
