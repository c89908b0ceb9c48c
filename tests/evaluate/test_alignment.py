"""Alignment and uniformity against a direct numpy computation."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from cselab.evaluate import evaluate
from cselab.evaluate.alignment import alignment, uniformity


def test_alignment_and_uniformity_by_hand():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    yn = y / np.linalg.norm(y, axis=1, keepdims=True)
    assert alignment(x, y) == pytest.approx(np.mean(np.sum((xn - yn) ** 2, axis=1)))
    potentials = [np.exp(-2 * np.sum((xn[i] - xn[j]) ** 2)) for i, j in itertools.combinations(range(7), 2)]
    assert uniformity(x) == pytest.approx(np.log(np.mean(potentials)))
    assert alignment(x, 3 * x) == pytest.approx(0.0, abs=1e-12)  # scale does not matter after normalising


def test_collapsed_embeddings_are_least_uniform():
    same = np.ones((10, 3))
    spread = np.random.default_rng(1).normal(size=(10, 3))
    assert uniformity(same) == pytest.approx(0.0, abs=1e-12)
    assert uniformity(spread) < -0.5


def test_align_task_uses_pairs_above_4(senteval_dir):
    class Random:
        def encode(self, sentences):
            return np.random.default_rng(len(sentences)).normal(size=(len(sentences), 4))

    result = evaluate(Random(), senteval_dir, tasks="align", progress=False)["tasks"]["align"]
    from cselab.evaluate.formats import read_stsb

    gold = read_stsb(senteval_dir / "STS/STSBenchmark/sts-test.csv").gold
    assert result["n_pairs"] == int((gold > 4).sum())
    assert 0 < result["alignment"] < 4 and result["uniformity"] < 0
