"""Semantic textual similarity the way SimCSE reports it (Gao et al., 2021, on SentEval's data).

Cosine similarity of the two sentence embeddings, Spearman correlation with the gold scores, x100.
For STS12-16 a year has several subsets: "all" pools every subset's pairs into one correlation
(SimCSE's headline setting), "mean" averages the per-subset correlations and "wmean" weights them by
the number of scored pairs (SentEval's two original aggregates).
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from scipy.stats import spearmanr


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two equally shaped matrices."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a = a / np.linalg.norm(a, axis=1, keepdims=True).clip(min=1e-12)
    b = b / np.linalg.norm(b, axis=1, keepdims=True).clip(min=1e-12)
    return (a * b).sum(axis=1)


def spearman100(predicted: np.ndarray, gold: np.ndarray) -> float:
    """Spearman rank correlation x100 (nan when either side is constant)."""
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return math.nan
    return float(spearmanr(predicted, gold).statistic * 100)


def pooled_scores(subsets: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> dict:
    """Per-subset Spearman plus the "all", "mean" and "wmean" aggregates of one STS year.

    ``subsets`` maps a subset name to (predicted similarities, gold scores).
    """
    per_subset = {name: {"spearman": spearman100(pred, gold), "n": int(len(gold))}
                  for name, (pred, gold) in subsets.items()}
    predicted = np.concatenate([pred for pred, _ in subsets.values()])
    gold = np.concatenate([g for _, g in subsets.values()])
    values = np.array([s["spearman"] for s in per_subset.values()])
    sizes = np.array([s["n"] for s in per_subset.values()], dtype=np.float64)
    return {"all": spearman100(predicted, gold), "mean": float(values.mean()),
            "wmean": float((values * sizes).sum() / sizes.sum()), "n": int(sizes.sum()), "subsets": per_subset}
