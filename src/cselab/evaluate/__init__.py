"""Evaluation the way the SimCSE line of papers reports it: STS, SentEval transfer tasks, alignment/uniformity.

>>> from cselab.evaluate import evaluate, load_model
>>> results = evaluate(load_model("minilm"), "path/to/senteval", tasks="sts")
>>> results["avg"]          # mean Spearman x100 over STS12-16, STS-B, SICK-R

Anything with ``encode(list[str]) -> ndarray`` (the :class:`Encoder` protocol) can be evaluated.
"""
from __future__ import annotations

import importlib

# Loaded on first use, so `cselab.evaluate.dev` (imported by training) does not pull in scikit-learn.
_EXPORTS = {"Encoder": "cselab.evaluate.embeddings", "evaluate": "cselab.evaluate.runner",
            "load_model": "cselab.evaluate.models"}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'cselab.evaluate' has no attribute {name!r}")
