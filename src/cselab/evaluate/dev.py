"""Model selection during training: the dev metrics ``train.select_on`` can name, one class each.

A metric is a :class:`DevMetric` registered in ``DEV_METRICS`` under its name; it carries its own
metadata (``label``, ``higher_is_better``, whether it reads the SentEval directory, whether it takes an
argument as ``NAME:ARG``) and scores the encoder now with ``scores(encode)``. The recipe check, the
training loop's selection, the summary and the command line's lines all read these, so a new
metric is one class in one file. Shipped: ``stsb_dev`` (STS-B dev Spearman, as the papers select),
``transfer_dev`` (AugCSE's second metric), ``sts:PATH`` (your own scored pairs).

The scoring reuses the evaluation tasks (``evaluate/tasks.py``); they and their probes (scikit-learn)
are imported only when a metric is built, so the recipe check stays light.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cselab.errors import UnknownNameError
from cselab.evaluate import formats
from cselab.evaluate.download import senteval_dir
from cselab.registry import Registry

STSB_DEV = Path("STS/STSBenchmark/sts-dev.csv")
# The dev split's transfer tasks (``cselab eval --split dev``): SST-2 is required, MRPC used when present.
TRANSFER_DEV_TASKS = ("SST2", "MRPC")
Encode = Callable[[list[str]], np.ndarray]

__all__ = ["DEV_METRICS", "STSB_DEV", "TRANSFER_DEV_TASKS", "DevMetric", "StsFileDev", "StsbDev", "TransferDev",
           "build_metric", "check_select_on", "find_senteval_dir", "metric_class", "metric_key"]


def find_senteval_dir(explicit: str | None = None) -> Path | None:
    """The SentEval directory model selection reads, where ``cselab eval`` looks (``download.senteval_dir``:
    explicit ``data.dev_dir``/``--data-dir``, else ``$CSELAB_DATA``, else ``~/.cache/cselab/senteval``)
    when it holds STS-B dev; None when it does not (an explicit one without it is an error)."""
    folder = senteval_dir(explicit)
    if _has_stsb_dev(folder):
        return folder
    if explicit:
        raise FileNotFoundError(f"{folder / STSB_DEV}: STS-B dev not found "
                                f"(run `cselab data download --dest {explicit}`)")
    return None


def _has_stsb_dev(folder: Path) -> bool:
    try:
        return (folder / STSB_DEV).is_file()
    except (OSError, ValueError):  # a name the system cannot look up (too long, a NUL byte)
        return False


DEV_METRICS: Registry[type[DevMetric]] = Registry("selection metric")


class DevMetric:
    """One selection metric. ``key`` names its value in ``metrics.jsonl``, the best-model marker and the
    summary (``best_KEY``), and a further metric's directory (``best-KEY``)."""

    name = ""
    label = ""  # how the messages and the summary's lines name it
    higher_is_better = True
    needs_senteval = True  # reads the SentEval directory (else it works without one)
    takes_argument = False  # named NAME:ARG in train.select_on
    selectable = True  # train.select_on may name it (val_mlm_loss is picked by the loop itself)
    note: str | None = None  # why part of it is left out (the summary's KEY_note)

    def __init__(self, data_dir: Path | None, argument: str | None = None):
        self.data_dir, self.argument = data_dir, argument

    @property
    def key(self) -> str:
        return self.name

    def task_names(self) -> list[str]:
        return []

    def describe(self) -> str:
        """What it evaluates, for the message at the start of training."""
        return self.label

    def score(self, encode: Encode) -> float:
        return self.scores(encode)[self.key]

    def scores(self, encode: Encode) -> dict[str, float]:
        """The metric (under ``key``) and any parts it logs too, of the encoder ``encode`` embeds with."""
        raise NotImplementedError


def _lookup(sentences: list[str], encode: Encode):
    from cselab.evaluate.embeddings import SentenceLookup

    return SentenceLookup(sentences, encode(sentences))


class _TaskMetric(DevMetric):
    """A metric that is one evaluation task's score (``task``: built in ``__init__``)."""

    task = None

    def scores(self, encode: Encode) -> dict[str, float]:
        return {self.key: float(self.task.score(_lookup(self.task.sentences(), encode))["score"])}


@DEV_METRICS.register("stsb_dev", "STS-B dev Spearman x100 (the papers' selection; the default)")
class StsbDev(_TaskMetric):
    """STS-B dev pairs loaded once; ``score(encode)`` returns Spearman x 100 (``cselab eval --split dev``'s)."""

    name, label = "stsb_dev", "STS-B dev"

    def __init__(self, data_dir: Path, argument: str | None = None):
        from cselab.evaluate.tasks import STSBenchmark

        super().__init__(Path(data_dir), argument)
        self.task = STSBenchmark(self.data_dir, split="dev")
        self.task.data()  # read (and checked) once, before the first step

    def task_names(self) -> list[str]:
        return ["STSBenchmark"]


@DEV_METRICS.register("sts", "sts:PATH: Spearman x100 on your own scored pairs (CSV/TSV/JSONL: sentence1, "
                             "sentence2, score)")
class StsFileDev(_TaskMetric):
    """Your own dev set: ``sts:PATH`` scores it as ``cselab eval --sts-file PATH`` does."""

    name, needs_senteval, takes_argument = "sts", False, True

    def __init__(self, data_dir: Path | None, argument: str | None = None):
        from cselab.evaluate.tasks import StsFile

        super().__init__(data_dir, argument)
        self.task = StsFile(argument)
        if self.task.missing_files():
            raise formats.MissingDataError(f"{self.task.path}: {formats.why_absent(self.task.path)} "
                                           f"(train.select_on sts:PATH)")
        self.task.data()
        self.label = f"STS file {self.task.path.name}"

    @property
    def key(self) -> str:
        return metric_key(f"sts:{self.argument}")

    def task_names(self) -> list[str]:
        return [self.task.name]


@DEV_METRICS.register("val_mlm_loss", "validation MLM loss on held-out lines: picks an MLM-only run's model itself")
class ValidationLoss(DevMetric):
    """The MLM loss on the run's held-out lines (``train/validation.py``), lower is better; the loop picks
    it for an MLM-only objective (STS-B dev says little about a raw encoder), so recipes do not name it.
    ``validation()``: the scores of the MLM head now, ``val_mlm_loss`` and ``val_mlm_acc``."""

    name, label, higher_is_better = "val_mlm_loss", "validation MLM loss", False
    needs_senteval, selectable = False, False

    def __init__(self, validation: Callable[[], dict[str, float]]):
        super().__init__(None)
        self.validation = validation

    def scores(self, encode: Encode) -> dict[str, float]:
        return self.validation()  # the MLM head's, not the sentence encoder's


@DEV_METRICS.register("transfer_dev", "SST-2 dev + MRPC train-CV accuracy, fast probes (AugCSE's second metric)")
class TransferDev(DevMetric):
    """The transfer tasks' dev scores, as ``cselab eval --split dev --tasks transfer --transfer-mode
    fast`` computes them: SST-2 dev accuracy (a logistic-regression probe trained on a seeded,
    class-stratified 10,000-phrase sample of SST-2 train, C picked on dev) and MRPC's 5-fold CV
    accuracy on its training file, when that file is present. The files are read once;
    ``scores(encode)`` returns ``transfer_dev`` (the mean accuracy x 100) and each task's
    (``sst2_dev``, ``mrpc_dev``).

    A missing SST-2 file fails at once (``MissingDataError`` naming it); a missing MRPC file leaves
    MRPC out, and ``note`` says so.
    """

    name, label = "transfer_dev", "transfer dev"

    def __init__(self, data_dir: Path, argument: str | None = None):
        from cselab.evaluate import tasks as registry
        from cselab.evaluate.transfer import ProbeSettings

        super().__init__(Path(data_dir), argument)
        settings = ProbeSettings(mode="fast")
        built = [registry.TASKS.get(name)(data_dir=Path(data_dir), split="dev", settings=settings)
                 for name in TRANSFER_DEV_TASKS]
        missing = {task.name: task.missing_files() for task in built}
        if missing[TRANSFER_DEV_TASKS[0]]:
            raise formats.MissingDataError(
                f"{missing[TRANSFER_DEV_TASKS[0]][0]}: not found; train.select_on asks for transfer_dev, which needs "
                f"SST-2 train and dev (run `cselab data download`, or --set 'train.select_on=[stsb_dev]')")
        self.tasks = [task for task in built if not missing[task.name]]
        left_out = [str(files[0]) for files in missing.values() if files]
        self.note = f"{', '.join(left_out)} not found: transfer_dev averages {self.names()} only" if left_out else None
        self.sentences = sorted(set().union(*(task.sentences() for task in self.tasks)))

    def names(self) -> str:
        return " + ".join(task.title for task in self.tasks)

    def task_names(self) -> list[str]:
        return [task.name for task in self.tasks]

    def describe(self) -> str:
        return f"{self.names()} dev accuracy (fast probes)"

    def scores(self, encode: Encode) -> dict[str, float]:
        lookup = _lookup(self.sentences, encode)
        scores = {f"{task.name.lower()}_dev": float(task.score(lookup)["score"]) for task in self.tasks}
        return {"transfer_dev": float(np.mean(list(scores.values()))), **scores}


def metric_class(entry: str) -> type[DevMetric]:
    """The class of a ``train.select_on`` entry (``NAME`` or ``NAME:ARG``); UnknownNameError names the known."""
    name, sep, argument = entry.partition(":")
    cls = DEV_METRICS.get(name) if name in DEV_METRICS else None
    if cls is None or not cls.selectable or cls.takes_argument != bool(sep) or (sep and not argument.strip()):
        known = ", ".join(f"{n}:PATH" if DEV_METRICS.get(n).takes_argument else n
                          for n in DEV_METRICS.names() if DEV_METRICS.get(n).selectable)
        raise UnknownNameError(f"unknown metric {entry!r} (known: {known})")
    return cls


def metric_key(entry: str) -> str:
    """The key of an entry's values: its name, or for ``NAME:PATH`` the name and the file's stem
    (``sts:data/my dev.tsv`` -> ``sts_my_dev``), usable as a directory name."""
    name, sep, argument = entry.partition(":")
    return f"{name}_{re.sub(r'[^A-Za-z0-9]+', '_', Path(argument).stem).strip('_') or 'file'}" if sep else name


def check_select_on(entries: list) -> str | None:
    """What is wrong with ``train.select_on`` (None: nothing): known metrics, each key once; the first
    picks the final model."""
    if not isinstance(entries, list) or not entries:
        return "train.select_on: expected a non-empty list of metrics"
    for i, entry in enumerate(entries):
        if not isinstance(entry, str):
            return f"train.select_on[{i}]: expected a metric name, got {entry!r}"
        try:
            metric_class(entry.strip())
        except UnknownNameError as error:
            return f"train.select_on[{i}]: {error}"
    keys = [metric_key(entry.strip()) for entry in entries]
    if len(set(keys)) != len(keys):
        return f"train.select_on: name each metric once, got {', '.join(keys)}"
    return None


def build_metric(entry: str, data_dir: Path | None) -> DevMetric:
    """The metric of a ``train.select_on`` entry; ``data_dir`` is the SentEval directory (None: not found)."""
    _, _, argument = entry.strip().partition(":")
    return metric_class(entry.strip())(data_dir, argument or None)
