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


def test_fast_mode_trains_on_a_stratified_sample_of_a_large_training_file():
    labels = np.array([0] * 21_000 + [1] * 9_000)
    kept = ProbeSettings("fast").sample_train(labels)
    assert len(kept) == 10_000 and np.all(np.diff(kept) > 0)  # file order, no repeats
    assert np.mean(labels[kept]) == pytest.approx(0.3, abs=1e-3)
    assert np.array_equal(kept, ProbeSettings("fast").sample_train(labels))
    assert not np.array_equal(kept, ProbeSettings("fast", seed=2).sample_train(labels))
    assert ProbeSettings("test").sample_train(labels) is None
    assert ProbeSettings("fast").sample_train(labels[:10_000]) is None


def test_sst2_in_fast_mode_encodes_only_its_sample(senteval_dir, monkeypatch):
    from cselab.evaluate import transfer

    full = tasks.build(["SST2"], senteval_dir, "dev", ProbeSettings("fast"))[0]
    full.data()  # loaded before the cap is lowered: the fixture's file is below the real cap
    monkeypatch.setattr(transfer, "FAST_MAX_TRAIN", 10)
    capped = tasks.build(["SST2"], senteval_dir, "dev", ProbeSettings("fast"))[0]
    train, dev = capped.data()
    assert len(train.labels) == 10 and sorted(np.bincount(train.labels)) == [5, 5]
    assert set(train.sentences) <= set(full.data()[0].sentences)
    assert set(capped.sentences()) == set(train.sentences) | set(dev.sentences)
    assert capped.cache_name == "SST2-train10-seed1111" and full.cache_name == "SST2"
    result = evaluate(WordEncoder(), senteval_dir, tasks="SST2", split="dev", transfer_mode="fast", progress=False)
    assert result["tasks"]["SST2"]["n_train"] == 10
    assert result["tasks"]["SST2"]["train_file_rows"] == len(full.data()[0].labels)
