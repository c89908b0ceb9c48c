"""SentEval's transfer-task probes (Conneau & Kiela, 2018): logistic regression on frozen embeddings.

The sentence encoder stays frozen; a logistic-regression classifier is trained on its embeddings and
its accuracy is the score. Two protocols (``ProbeSettings.protocol``):

* ``sklearn`` (default, fast): scikit-learn's LogisticRegression and SentEval's C grids for it.
* ``senteval``: SentEval's own PyTorch path, which the papers report: a linear layer (nhid 0) trained
  by Adam with early stopping on a validation set (batch 64, tenacity 5, epoch size 4; mode ``fast``
  uses SentEval's prototyping config instead), the L2 weight decay picked from 10^-5..10^-2, and
  MRPC features [|u - v|, u * v].

The three validation schemes are SentEval's, for both protocols:

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
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

from cselab.errors import UnknownNameError

if TYPE_CHECKING:  # scikit-learn is imported where a probe runs: training's STS-B dev selection never loads it
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

SEED = 1111  # SentEval's and SimCSE's default seed

# SentEval's C grids for its sklearn classifier.
INNER_KFOLD_CS = tuple(2.0 ** t for t in range(-2, 4))
KFOLD_CS = tuple(2.0 ** t for t in range(-1, 6))
SPLIT_CS = tuple(2.0 ** t for t in range(-2, 4))
# SentEval's L2 grid for its PyTorch classifier (weight decay): 10^-5 .. 10^-2.
SENTEVAL_L2 = tuple(10.0 ** t for t in range(-5, -1))
PROTOCOLS = ("sklearn", "senteval")
FAST_MAX_TRAIN = 10_000  # training rows of a probe in fast mode (SST-2's train file is cut to this)


@dataclass(frozen=True)
class TorchProbeConfig:
    """SentEval's classifier config: {'nhid': 0, 'optim', 'batch_size', 'tenacity', 'epoch_size'}."""

    optimizer: str
    batch_size: int
    tenacity: int  # evaluations without improvement before training stops
    epoch_size: int  # passes over the training data between two evaluations
    max_epochs: int = 200


# SentEval's documented configs: "default" (its test setting, kfold 10) and "prototyping" (kfold 5).
SENTEVAL_CONFIGS = {"test": TorchProbeConfig("adam", 64, 5, 4), "fast": TorchProbeConfig("rmsprop", 128, 3, 2)}


@dataclass(frozen=True)
class ProbeSettings:
    """How much validation the probe does; ``test`` is SentEval's protocol, ``fast`` a cheaper approximation."""

    mode: str = "test"
    seed: int = SEED
    protocol: str = "sklearn"

    def __post_init__(self):
        if self.mode not in ("test", "fast"):
            raise UnknownNameError(f"unknown transfer mode {self.mode!r}; known: fast, test")
        if self.protocol not in PROTOCOLS:
            raise UnknownNameError(f"unknown transfer protocol {self.protocol!r}; known: {', '.join(PROTOCOLS)}")

    @property
    def torch_config(self) -> TorchProbeConfig:
        return SENTEVAL_CONFIGS[self.mode]

    @property
    def folds(self) -> int:
        # SentEval uses 10 folds in its test configuration; SimCSE's "fasttest" uses 5.
        return 10 if self.mode == "test" else 5

    def grid(self, cs: tuple[float, ...]) -> tuple[float, ...]:
        # senteval: SentEval's one L2 grid in both modes (its prototyping config keeps it too);
        # sklearn fast: every other C of SentEval's grid (half the fits per scan).
        if self.protocol == "senteval":
            return SENTEVAL_L2
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
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    classifier = LogisticRegression(C=c, random_state=seed, max_iter=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        classifier.fit(x, y)
    return classifier


def _fit_probe(x: np.ndarray, y: np.ndarray, reg: float, settings: ProbeSettings,
               validation: tuple[np.ndarray, np.ndarray] | None = None):
    """A fitted classifier with ``score(x, y)``. senteval stops early on ``validation`` (SentEval passes
    the scan's held-out fold or the dev set), else on a seeded 5% of the training rows (its final fits)."""
    if settings.protocol == "sklearn":
        return _fit(x, y, reg, settings.seed)
    if validation is None:
        train, held = _validation_split(len(y), settings.seed)
        x, y, validation = x[train], y[train], (x[held], y[held])
    return fit_linear_probe(x, y, validation, reg, settings.torch_config, settings.seed)


class LinearProbe:
    """SentEval's nhid=0 classifier: one linear layer, softmax cross-entropy, trained by
    :func:`fit_linear_probe`; ``score`` is accuracy in [0, 1] like scikit-learn's."""

    def __init__(self, layer, classes: np.ndarray, device):
        self.layer, self.classes, self.device = layer, classes, device

    def predict(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            logits = self.layer(torch.as_tensor(x, dtype=torch.float32, device=self.device))
        return self.classes[logits.argmax(dim=1).cpu().numpy()]

    def score(self, x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(self.predict(x) == y)) if len(y) else 0.0


def fit_linear_probe(x: np.ndarray, y: np.ndarray, validation: tuple[np.ndarray, np.ndarray], l2: float,
                     config: TorchProbeConfig, seed: int) -> LinearProbe:
    """Train in rounds of ``epoch_size`` epochs, score ``validation`` after each round, keep the best
    weights, stop after ``tenacity`` rounds without improvement or at ``max_epochs`` (SentEval's fit)."""
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    classes, targets = np.unique(y, return_inverse=True)
    generator = torch.Generator().manual_seed(seed)  # local: the caller's global RNG is left alone
    layer = _seeded_linear(x.shape[1], len(classes), generator).to(device)
    optimiser = _optimiser(config.optimizer, layer.parameters(), l2)
    # Summed, not averaged, over the batch, as SentEval's loss: the weight decay's strength relative to
    # the data term depends on it.
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    inputs = torch.as_tensor(x, dtype=torch.float32, device=device)
    labels = torch.as_tensor(targets, dtype=torch.long, device=device)
    probe = LinearProbe(layer, classes, device)
    best_accuracy, best_state, patience, epochs = -1.0, None, 0, 0
    while epochs < config.max_epochs and patience <= config.tenacity:
        for _ in range(config.epoch_size):
            order = torch.randperm(len(labels), generator=generator).to(device)
            for start in range(0, len(order), config.batch_size):
                rows = order[start:start + config.batch_size]
                optimiser.zero_grad()
                loss_fn(layer(inputs[rows]), labels[rows]).backward()
                optimiser.step()
        epochs += config.epoch_size
        accuracy = probe.score(*validation)
        if accuracy > best_accuracy:
            best_accuracy, patience = accuracy, 0
            best_state = {k: v.detach().clone() for k, v in layer.state_dict().items()}
        else:
            patience += 1
    layer.load_state_dict(best_state)
    return probe


def _seeded_linear(inputs: int, outputs: int, generator):
    """nn.Linear with PyTorch's default initialisation (uniform in +-1/sqrt(inputs)) drawn from ``generator``."""
    import torch

    layer = torch.nn.Linear(inputs, outputs)
    bound = 1.0 / inputs ** 0.5
    with torch.no_grad():
        for parameter in layer.parameters():
            parameter.copy_(torch.empty(parameter.shape).uniform_(-bound, bound, generator=generator))
    return layer


def _optimiser(name: str, parameters, l2: float):
    import torch

    # SentEval's L2 regulariser is the optimiser's weight decay, with the optimiser's default learning rate.
    if name == "adam":
        return torch.optim.Adam(parameters, weight_decay=l2)
    return torch.optim.RMSprop(parameters, weight_decay=l2)


def _validation_split(n: int, seed: int, share: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    cut = max(1, min(n - 1, int(n * (1 - share))))
    return order[:cut], order[cut:]


def _cv_accuracy(x: np.ndarray, y: np.ndarray, reg: float, folds: StratifiedKFold, settings: ProbeSettings) -> float:
    scores = [_fit_probe(x[train], y[train], reg, settings, (x[held], y[held])).score(x[held], y[held])
              for train, held in folds.split(x, y)]
    return float(np.mean(scores) * 100)


@_single_threaded
def inner_kfold(x: np.ndarray, y: np.ndarray, settings: ProbeSettings) -> dict:
    """Nested cross-validation (SentEval's InnerKFoldClassifier) for tasks with a single file set."""
    cs = settings.grid(INNER_KFOLD_CS)
    from sklearn.model_selection import StratifiedKFold

    outer = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    inner = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    dev, test, chosen = [], [], []
    for train, held in outer.split(x, y):
        # The grid is scanned inside the outer training fold only; the held-out fold is scored once.
        scan = [_cv_accuracy(x[train], y[train], c, inner, settings) for c in cs]
        best = int(np.argmax(scan))
        dev.append(scan[best])
        chosen.append(cs[best])
        test.append(_fit_probe(x[train], y[train], cs[best], settings).score(x[held], y[held]) * 100)
    return {"devacc": float(np.mean(dev)), "acc": float(np.mean(test)), _reg_key(settings): chosen,
            "n": int(len(y)), "protocol": settings.protocol}


def _reg_key(settings: ProbeSettings) -> str:
    # sklearn's C is an inverse strength; SentEval's PyTorch L2 is a weight decay: named apart.
    return "C" if settings.protocol == "sklearn" else "l2"


@_single_threaded
def kfold_then_test(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray | None,
                    y_test: np.ndarray | None, settings: ProbeSettings) -> dict:
    """C by k-fold CV on train (SentEval's KFoldClassifier); test accuracy when a test set is given."""
    cs = settings.grid(KFOLD_CS)
    from sklearn.model_selection import StratifiedKFold

    folds = StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed)
    scan = [_cv_accuracy(x_train, y_train, c, folds, settings) for c in cs]
    best = int(np.argmax(scan))
    result = {"devacc": scan[best], _reg_key(settings): cs[best], "n_train": int(len(y_train)),
              "protocol": settings.protocol}
    if x_test is not None:
        result["acc"] = float(_fit_probe(x_train, y_train, cs[best], settings).score(x_test, y_test) * 100)
        result["n_test"] = int(len(y_test))
    return result


@_single_threaded
def split(x_train: np.ndarray, y_train: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray,
          x_test: np.ndarray | None, y_test: np.ndarray | None, settings: ProbeSettings) -> dict:
    """C picked on dev (SentEval's SplitClassifier); test accuracy when a test set is given."""
    cs = settings.grid(SPLIT_CS)
    fitted = [_fit_probe(x_train, y_train, c, settings, (x_dev, y_dev)) for c in cs]
    scan = [m.score(x_dev, y_dev) * 100 for m in fitted]
    best = int(np.argmax(scan))
    result = {"devacc": float(scan[best]), _reg_key(settings): cs[best], "n_train": int(len(y_train)),
              "n_dev": int(len(y_dev)), "protocol": settings.protocol}
    if x_test is not None:
        result["acc"] = float(fitted[best].score(x_test, y_test) * 100)
        result["n_test"] = int(len(y_test))
    return result


def pair_features(u: np.ndarray, v: np.ndarray, protocol: str = "sklearn") -> np.ndarray:
    """Sentence-pair features for MRPC: [u, v, |u - v|, u * v] (sklearn: the project's protocol notes),
    or [|u - v|, u * v] (senteval: what SentEval's mrpc.py builds)."""
    if protocol == "senteval":
        return np.concatenate([np.abs(u - v), u * v], axis=1)
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)
