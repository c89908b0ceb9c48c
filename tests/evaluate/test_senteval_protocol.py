"""`--transfer-protocol senteval`: SentEval's PyTorch logistic regression, its L2 grid searched on
validation data only, MRPC's [|u-v|, u*v] features, and results that name the protocol."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.model_selection import StratifiedKFold

from cselab import cli
from cselab.evaluate import transfer
from cselab.evaluate.transfer import SENTEVAL_L2, ProbeSettings, inner_kfold, kfold_then_test, pair_features, split

SENTEVAL_FAST = ProbeSettings("fast", protocol="senteval")


def blobs(n: int, dim: int = 6, classes: int = 2, seed: int = 0, separation: float = 6.0):
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % classes
    centres = rng.normal(size=(classes, dim)) * separation
    return centres[labels] + rng.normal(size=(n, dim)), labels


def with_row_ids(x: np.ndarray) -> np.ndarray:
    """A last column holding each row's index (scaled down so it barely affects the fit): a spy on the
    classifier can then tell which rows it was given."""
    return np.concatenate([x, np.arange(len(x))[:, None] * 1e-6], axis=1)


def row_ids(x: np.ndarray) -> set[int]:
    return set(np.rint(x[:, -1] * 1e6).astype(int).tolist())


@pytest.fixture
def recorded_fits(monkeypatch):
    """Every call of the PyTorch probe: (rows trained on, rows early stopping looked at)."""
    calls = []
    real = transfer.fit_linear_probe

    def spy(x, y, validation, l2, config, seed):
        calls.append((row_ids(x), row_ids(validation[0]), l2))
        return real(x, y, validation, l2, config, seed)

    monkeypatch.setattr(transfer, "fit_linear_probe", spy)
    return calls


def test_separable_data_is_learnt_and_random_labels_are_not():
    x, y = blobs(60)
    result = inner_kfold(x, y, SENTEVAL_FAST)
    assert result["acc"] > 95 and result["devacc"] > 95
    assert result["protocol"] == "senteval" and set(result["l2"]) <= set(SENTEVAL_L2) and "C" not in result
    noise = np.random.default_rng(2).integers(0, 2, size=60)
    assert inner_kfold(x, noise, SENTEVAL_FAST)["acc"] < 75


def test_multiclass_kfold_then_test_and_split():
    # SentEval's early stopping checks validation every few epochs: with a few dozen rows it stops before
    # a linear layer has moved from its initialisation, so these data sets are larger than sklearn's tests.
    x, y = blobs(1200, classes=6, seed=3)
    result = kfold_then_test(x[:900], y[:900], x[900:], y[900:], SENTEVAL_FAST)
    assert result["acc"] > 90 and result["l2"] in SENTEVAL_L2
    x, y = blobs(600, seed=3)
    default = ProbeSettings("test", protocol="senteval")
    result = split(x[:400], y[:400], x[400:500], y[400:500], x[500:], y[500:], default)
    assert result["acc"] > 90 and result["devacc"] > 90


def test_split_never_fits_or_stops_on_test_rows(recorded_fits):
    x, y = blobs(90, seed=4)
    x = with_row_ids(x)
    train, dev, test = np.arange(0, 50), np.arange(50, 70), np.arange(70, 90)
    split(x[train], y[train], x[dev], y[dev], x[test], y[test], SENTEVAL_FAST)
    assert [l2 for _, _, l2 in recorded_fits] == list(SENTEVAL_L2)  # one fit per L2, none refitted on test
    for fitted, stopped_on, _ in recorded_fits:
        assert fitted == set(train.tolist()) and stopped_on == set(dev.tolist())


def test_inner_kfold_scans_the_grid_inside_the_outer_training_fold(recorded_fits):
    x, y = blobs(50, seed=5)
    x = with_row_ids(x)
    inner_kfold(x, y, SENTEVAL_FAST)
    folds = SENTEVAL_FAST.folds
    per_outer_fold = len(SENTEVAL_L2) * folds + 1  # the scan, then the final fit
    assert len(recorded_fits) == folds * per_outer_fold
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=SENTEVAL_FAST.seed).split(x, y)
    for index, (outer_train, outer_test) in enumerate(outer):
        allowed, held_out = set(outer_train.tolist()), set(outer_test.tolist())
        for fitted, stopped_on, _ in recorded_fits[index * per_outer_fold:(index + 1) * per_outer_fold]:
            assert (fitted | stopped_on) <= allowed and not (fitted | stopped_on) & held_out


def test_senteval_settings_follow_its_configs():
    default, prototyping = ProbeSettings("test", protocol="senteval"), SENTEVAL_FAST
    assert (default.folds, default.torch_config.batch_size, default.torch_config.tenacity,
            default.torch_config.epoch_size, default.torch_config.optimizer) == (10, 64, 5, 4, "adam")
    assert (prototyping.folds, prototyping.torch_config.batch_size) == (5, 128)
    assert default.grid((1.0, 2.0)) == SENTEVAL_L2 == (1e-5, 1e-4, 1e-3, 1e-2)
    with pytest.raises(KeyError, match="unknown transfer protocol"):
        ProbeSettings(protocol="senteval-gpu")


def test_mrpc_features_per_protocol():
    u = np.array([[1.0, 2.0]])
    v = np.array([[0.5, 4.0]])
    np.testing.assert_allclose(pair_features(u, v, "senteval")[0], [0.5, 2, 0.5, 8])
    assert pair_features(u, v).shape == (1, 8)


def test_eval_names_the_protocol_in_json_and_table(saved_model, senteval_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["eval", str(saved_model), "--tasks", "SST2,MRPC", "--data-dir", str(senteval_dir), "--json", str(out),
            "--transfer-mode", "fast", "--transfer-protocol", "senteval", "--quiet", "--no-cache"]
    assert cli.main(argv) == 0
    assert "protocol senteval (SentEval's PyTorch classifier)" in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["transfer_protocol"] == "senteval"
    assert {result["tasks"][t]["protocol"] for t in ("SST2", "MRPC")} == {"senteval"}
