"""Spearman and the STS aggregates against scipy; a perfect encoder scores 100."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from cselab.evaluate import evaluate, tasks
from cselab.evaluate.sts import cosine_rows, pooled_scores, spearman100


def test_spearman_matches_scipy():
    rng = np.random.default_rng(0)
    predicted, gold = rng.normal(size=50), rng.uniform(0, 5, size=50)
    assert spearman100(predicted, gold) == pytest.approx(spearmanr(predicted, gold).statistic * 100)
    assert np.isnan(spearman100(np.ones(5), np.arange(5.0)))


def test_all_mean_wmean_match_hand_computation():
    rng = np.random.default_rng(1)
    subsets = {name: (rng.normal(size=n), rng.uniform(0, 5, size=n)) for name, n in (("a", 10), ("b", 30), ("c", 7))}
    result = pooled_scores(subsets)
    pooled_pred = np.concatenate([p for p, _ in subsets.values()])
    pooled_gold = np.concatenate([g for _, g in subsets.values()])
    assert result["all"] == pytest.approx(spearmanr(pooled_pred, pooled_gold).statistic * 100)
    per = [spearmanr(p, g).statistic * 100 for p, g in subsets.values()]
    assert result["mean"] == pytest.approx(np.mean(per))
    assert result["wmean"] == pytest.approx(np.average(per, weights=[10, 30, 7]))
    assert result["n"] == 47
    # pooling is not averaging: the two differ on this data
    assert abs(result["all"] - result["mean"]) > 1e-6


def test_cosine_rows():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    b = np.array([[0.0, 2.0], [3.0, 3.0]])
    np.testing.assert_allclose(cosine_rows(a, b), [0.0, 1.0])


class GoldEncoder:
    """Embeds so that cosine(left, right) = cos((5 - gold) / 5 * pi / 2): monotone in the gold score."""

    def __init__(self, task_list):
        self.table = {}
        self.lefts = set()
        for task in task_list:
            data = task.data()
            for pairs in (data.values() if isinstance(data, dict) else [data]):
                for left, right, gold in zip(pairs.left, pairs.right, pairs.gold, strict=True):
                    angle = (5 - gold) / 5 * np.pi / 2
                    self.table[left] = np.array([1.0, 0.0, 0.0])
                    self.lefts.add(left)
                    self.table[right] = np.array([np.cos(angle), np.sin(angle), 0.0])

    def encode(self, sentences):
        return np.stack([self.table[s] for s in sentences]).astype(np.float32)


def test_encoder_whose_similarity_is_the_gold_gets_100(senteval_dir):
    built = tasks.build(tasks.resolve("sts"), senteval_dir)
    results = evaluate(GoldEncoder(built), senteval_dir, tasks="sts", progress=False)
    assert results["avg"] == pytest.approx(100.0)
    assert results["avg_over"] == tasks.group_names("sts")
    for name in tasks.STS_YEARS:
        assert results["tasks"][name]["all"] == pytest.approx(100.0)
        assert results["tasks"][name]["mean"] == pytest.approx(100.0)


def test_reversed_encoder_gets_minus_100(senteval_dir):
    built = tasks.build(["STSBenchmark"], senteval_dir)
    encoder = GoldEncoder(built)
    for key, vector in encoder.table.items():
        if key not in encoder.lefts:
            encoder.table[key] = np.array([-vector[0], vector[1], 0.0])  # cos -> -cos: order reversed
    results = evaluate(encoder, senteval_dir, tasks="STSB", progress=False)
    assert results["avg"] == pytest.approx(-100.0)
