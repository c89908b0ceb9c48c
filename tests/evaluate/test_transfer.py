"""Logistic-regression probes: separable data is learnt, random labels are not; MRPC features."""
from __future__ import annotations

import numpy as np
import pytest

from cselab.evaluate import evaluate, tasks
from cselab.evaluate.transfer import ProbeSettings, inner_kfold, kfold_then_test, pair_features, split


def blobs(n: int, dim: int = 8, classes: int = 2, seed: int = 0, separation: float = 6.0):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    centres = rng.normal(size=(classes, dim)) * separation
    return centres[labels] + rng.normal(size=(n, dim)), labels


@pytest.mark.parametrize("mode", ["test", "fast"])
def test_inner_kfold_learns_separable_data(mode):
    x, y = blobs(40 if mode == "test" else 100)  # test mode: 10 x (10 x 6 + 1) fits, kept small
    result = inner_kfold(x, y, ProbeSettings(mode))
    assert result["acc"] > 95 and result["devacc"] > 95
    assert len(result["C"]) == ProbeSettings(mode).folds


def test_random_labels_stay_near_chance():
    x, _ = blobs(200, seed=1)
    y = np.random.default_rng(2).integers(0, 2, size=200)
    assert inner_kfold(x, y, ProbeSettings("fast"))["acc"] < 70


def test_kfold_then_test_and_split_multiclass():
    x, y = blobs(240, classes=6, seed=3)
    result = kfold_then_test(x[:180], y[:180], x[180:], y[180:], ProbeSettings("fast"))
    assert result["acc"] > 90 and result["n_test"] == 60
    dev_only = kfold_then_test(x[:180], y[:180], None, None, ProbeSettings("fast"))
    assert "acc" not in dev_only and dev_only["devacc"] == result["devacc"]
    result = split(x[:120], y[:120], x[120:180], y[120:180], x[180:], y[180:], ProbeSettings("test"))
    assert result["acc"] > 90 and result["devacc"] > 90


def test_fast_mode_is_cheaper():
    test, fast = ProbeSettings("test"), ProbeSettings("fast")
    assert (test.folds, fast.folds) == (10, 5)
    assert len(fast.grid((1.0, 2.0, 4.0, 8.0))) == 2
    with pytest.raises(KeyError, match="unknown transfer mode"):
        ProbeSettings("slow")


def test_pair_features_layout():
    u = np.array([[1.0, 2.0], [3.0, -1.0]])
    v = np.array([[0.5, 4.0], [3.0, 1.0]])
    features = pair_features(u, v)
    assert features.shape == (2, 8)
    np.testing.assert_allclose(features[0], [1, 2, 0.5, 4, 0.5, 2, 0.5, 8])


def test_mrpc_task_features_shape(senteval_dir):
    task = tasks.build(["MRPC"], senteval_dir)[0]
    train = task.data()[0]
    rng = np.random.default_rng(0)
    table = {s: rng.normal(size=5) for s in task.sentences()}
    features = task.features(train, lambda sentences: np.stack([table[s] for s in sentences]))
    assert features.shape == (len(train.labels), 20)


class WordEncoder:
    """Bag of two sentiment words: a perfect feature for the synthetic MR/SST files."""

    def encode(self, sentences):
        return np.array([[("wonderful" in s) + ("great" in s), ("dreadful" in s) + ("awful" in s), 1.0]
                         for s in sentences], dtype=np.float32)


def test_transfer_tasks_end_to_end(senteval_dir):
    results = evaluate(WordEncoder(), senteval_dir, tasks="MR,SST2", transfer_mode="fast", progress=False)
    assert results["tasks"]["MR"]["acc"] > 90
    assert results["tasks"]["SST2"]["acc"] == pytest.approx(100.0)
    dev = evaluate(WordEncoder(), senteval_dir, tasks="transfer", split="dev", transfer_mode="fast", progress=False)
    assert set(dev["tasks"]) == {"SST2", "MRPC"}
    assert "acc" not in dev["tasks"]["SST2"] and dev["tasks"]["SST2"]["score"] == dev["tasks"]["SST2"]["devacc"]
