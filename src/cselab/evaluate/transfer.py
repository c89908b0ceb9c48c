"""SentEval's transfer-task probes (Conneau & Kiela, 2018) with scikit-learn's logistic regression.

The sentence encoder stays frozen; a logistic-regression classifier is trained on its embeddings and
its accuracy is the score. The three validation schemes follow SentEval's sklearn path:

* ``inner_kfold``  (MR, CR, SUBJ, MPQA): k-fold cross-validation; inside each outer training fold a
  second k-fold picks the L2 strength C; the test accuracy is the mean over outer folds.
* ``kfold_then_test`` (TREC, MRPC): k-fold cross-validation on the training file picks C, a model
  trained on all of it is scored on the test file.
* ``split`` (SST-2): C picked on the dev file, the model scored on the test file.

"devacc" is the validation accuracy of the chosen C (what SentEval reports as devacc).
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from threadpoolctl import threadpool_limits

from cselab.errors import UnknownNameError

SEED = 1111  # SentEval's and SimCSE's default seed

# SentEval's C grids for its sklearn classifier.
INNER_KFOLD_CS = tuple(2.0 ** t for t in range(-2, 4))
KFOLD_CS = tuple(2.0 ** t for t in range(-1, 6))
SPLIT_CS = tuple(2.0 ** t for t in range(-2, 4))
FAST_MAX_TRAIN = 10_000  # training rows of a probe in fast mode (SST-2's train file is cut to this)


@dataclass(frozen=True)
class ProbeSettings:
    """How much validation the probe does; ``test`` is SentEval's protocol, ``fast`` a cheaper approximation."""

    mode: str = "test"
    seed: int = SEED

    def __post_init__(self):
        if self.mode not in ("test", "fast"):
            raise UnknownNameError(f"unknown transfer mode {self.mode!r}; known: fast, test")

    @property
    def folds(self) -> int:
        # SentEval uses 10 folds in its test configuration; SimCSE's "fasttest" uses 5.
        return 10 if self.mode == "test" else 5

    def grid(self, cs: tuple[float, ...]) -> tuple[float, ...]:
        # fast: every other C of SentEval's grid (half the fits per scan).
        return cs if self.mode == "test" else cs[::2]

    @property
    def max_train(self) -> int | None:
        """fast: a probe's training file is cut to a seeded, class-stratified sample of this many.

        Only SST-2's 67,349 training phrases exceed it; encoding them costs minutes per model
        on a CPU, which dominates a dev-split study of dozens of models.
        """
        return None if self.mode == "test" else FAST_MAX_TRAIN

    def sample_train(self, labels: np.ndarray) -> np.ndarray | None:
        """Indices (in file order) of the rows a capped probe trains on; None when nothing is cut."""
        if self.max_train is None or len(labels) <= self.max_train:
            return None
        from sklearn.model_selection import train_test_split

        kept, _ = train_test_split(np.arange(len(labels)), train_size=self.max_train, stratify=labels,
                                   random_state=self.seed)
        return np.sort(kept)


def _single_threaded(probe):
    """One BLAS/OpenMP thread for a whole probe: the fits are small and extra threads cost more in
    synchronisation than they gain (4-15x slower measured on a busy 2-core machine)."""

    @functools.wraps(probe)
    def wrapper(*args, **kwargs):
        with threadpool_limits(1):
            return probe(*args, **kwargs)

    return wrapper


def _fit(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> LogisticRegression:
    classifier = LogisticRegression(C=c, random_state=seed, max_iter=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        classifier.fit(x, y)
    return classifier


def _cv_accuracy(x: np.ndarray, y: np.ndarray, c: float, folds: StratifiedKFold, seed: int) -> float:
    scores = [_fit(x[train], y[train], c, seed).score(x[held], y[held]) for train, held in folds.split(x, y)]
    return float(np.mean(scores) * 100)


@_single_threaded
def inner_kfold(x: np.ndarray, y: np.ndarray, settings: ProbeSettings) -> dict:
    """Nested cross-validation (SentEval's InnerKFoldClassifier) for tasks with a single file set."""
    cs = settings.grid(INNER_KFOLD_CS)
    outer = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    inner = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    dev, test, chosen = [], [], []
    for train, held in outer.split(x, y):
        scan = [_cv_accuracy(x[train], y[train], c, inner, settings.seed) for c in cs]
        best = int(np.argmax(scan))
        dev.append(scan[best])
        chosen.append(cs[best])
        test.append(_fit(x[train], y[train], cs[best], settings.seed).score(x[held], y[held]) * 100)
    return {"devacc": float(np.mean(dev)), "acc": float(np.mean(test)), "C": chosen, "n": int(len(y))}


@_single_threaded
def kfold_then_test(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray | None,
                    y_test: np.ndarray | None, settings: ProbeSettings) -> dict:
    """C by k-fold CV on train (SentEval's KFoldClassifier); test accuracy when a test set is given."""
    cs = settings.grid(KFOLD_CS)
    folds = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    scan = [_cv_accuracy(x_train, y_train, c, folds, settings.seed) for c in cs]
    best = int(np.argmax(scan))
    result = {"devacc": scan[best], "C": cs[best], "n_train": int(len(y_train))}
    if x_test is not None:
        result["acc"] = float(_fit(x_train, y_train, cs[best], settings.seed).score(x_test, y_test) * 100)
        result["n_test"] = int(len(y_test))
    return result


@_single_threaded
def split(x_train: np.ndarray, y_train: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray,
          x_test: np.ndarray | None, y_test: np.ndarray | None, settings: ProbeSettings) -> dict:
    """C picked on dev (SentEval's SplitClassifier); test accuracy when a test set is given."""
    cs = settings.grid(SPLIT_CS)
    fitted = [_fit(x_train, y_train, c, settings.seed) for c in cs]
    scan = [m.score(x_dev, y_dev) * 100 for m in fitted]
    best = int(np.argmax(scan))
    result = {"devacc": float(scan[best]), "C": cs[best], "n_train": int(len(y_train)), "n_dev": int(len(y_dev))}
    if x_test is not None:
        result["acc"] = float(fitted[best].score(x_test, y_test) * 100)
        result["n_test"] = int(len(y_test))
    return result


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[u, v, |u - v|, u * v] for sentence-pair classification (the project's MRPC features).

    SentEval's own mrpc.py uses only [|u - v|, u * v]; the papers' protocol notes give the four-part
    form, which is what the reproduction study uses.
    """
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)
