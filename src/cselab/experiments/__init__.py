"""Experiments: run recipes x seeds (``cselab sweep``) and compare them (``cselab report``).

A sweep writes one run directory per (recipe, seed) as ``OUT/<recipe>/seed-<seed>/``: the training
loop's files (model, ``metrics.jsonl``, ``summary.json``, ``train_config.json``, ``checkpoints/``),
``eval-<split>.json`` (the evaluation suite's result dict) and ``versions.json`` (the libraries the
run was trained and evaluated with). The report reads only these files.
"""
from __future__ import annotations

from cselab.errors import CselabError


class ExperimentError(CselabError, ValueError):
    """A sweep or report cannot go on; the message (one line) names the file, run or option."""

    def __init__(self, message: str):
        super().__init__(str(message).replace("\n", " "))
