"""Model selection: an evaluation every ``eval_steps`` (and at the last step), and the best model
kept in the output directory.

SimCSE's rule: evaluate during training, keep only the best checkpoint's weights as the final
model; the evaluation is the first metric of ``train.select_on``: STS-B dev Spearman by default, or
any registered dev metric (``evaluate/dev.py``: ``transfer_dev``, ``sts:PATH`` for your own dev set),
each of which says whether higher is better. A run with a validation split
(``data.validation_fraction``) also measures the MLM loss and accuracy on the held-out lines
(``train/validation.py``); for an objective of MLM alone (pre-training) that loss picks the best
model (lower is better), since STS-B dev says little about a raw encoder. The best model's marker
file (``best_model.json``) is written after its files, so a save cut short by a crash is recognised
and repaired on resume (:meth:`BestModel.reconcile`).

``train.select_on``'s further metrics (AugCSE's: ``transfer_dev``, the transfer tasks' dev
accuracy) each keep their own best model, in ``OUTPUT_DIR/best-KEY/`` with a marker of its own
(:class:`KeptModel`), written and reconciled the same way; the final model stays the first metric's.
"""
from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from cselab.evaluate.dev import DEV_METRICS, DevMetric, metric_class, metric_key
from cselab.model.encoder import CSELAB_CONFIG, SentenceEncoder
from cselab.train.checkpoint import write_json_atomic
from cselab.train.validation import ValidationMlm

log = logging.getLogger(__name__)

BEST_MODEL = "best_model.json"  # written after the best model's files: absent = that save was cut short
KEPT_DIR = "best-{metric}"  # a further metric's best model: OUTPUT_DIR/best-transfer_dev/


@DEV_METRICS.register("val_mlm_loss", "validation MLM loss on held-out lines: picks an MLM-only run's model itself")
class ValidationLoss(DevMetric):
    """The MLM loss on the run's held-out lines (``train/validation.py``), lower is better; the loop picks
    it for an MLM-only objective (STS-B dev says little about a raw encoder), so recipes do not name it."""

    name, label, higher_is_better = "val_mlm_loss", "validation MLM loss", False
    needs_senteval, selectable = False, False

    def __init__(self, validation: ValidationMlm):
        super().__init__(None)
        self.validation = validation

    def scores(self, encode) -> dict[str, float]:
        return self.validation()  # val_mlm_loss and val_mlm_acc (the MLM head, not the sentence encoder)


def read_marker(path: Path) -> dict | None:
    try:
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and isinstance(marker.get("step"), int) else None


def reconcile_action(marker_file: Path, best_step: int | None, resumed_step: int) -> tuple[str, dict | None]:
    """What resuming from ``resumed_step`` does with a best model whose record (from the checkpoint)
    names ``best_step``, and its marker: ``keep`` (they agree, or there is none), ``adopt`` the
    marker (a save after the checkpoint that completed), ``rewrite`` (the checkpoint's own step was
    the best: its restored weights are that model), or ``replay`` (the replayed steps rewrite it)."""
    if best_step is None and not marker_file.is_file():
        return "keep", None
    marker = read_marker(marker_file)
    if marker is not None and best_step is not None and marker["step"] == best_step:
        return "keep", marker
    if marker is not None and marker["step"] > resumed_step:
        return "adopt", marker
    return ("rewrite" if best_step == resumed_step else "replay"), marker


def better(higher_is_better: bool, value: float, best: float | None) -> bool:
    """``value`` beats ``best`` (None: nothing yet, so anything does)."""
    return best is None or (value > best if higher_is_better else value < best)


def save_marked(directory: Path, write_model, marker: dict) -> None:
    """A best model into ``directory``: its marker removed, the model's files written
    (``write_model(directory)``), then the new marker (absent = a save cut short)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / BEST_MODEL).unlink(missing_ok=True)
    write_model(directory)
    write_json_atomic(directory / BEST_MODEL, marker)


def warn_replay(directory: Path) -> None:
    log.warning("the best model in %s was being written when the run stopped; the replayed steps rewrite "
                "it (exactly so only when training is deterministic, e.g. fp32 on CPU)", directory)


class KeptModel:
    """The best model by a further metric of ``train.select_on`` (``entry``: its name there), kept in
    ``directory`` with its own marker. ``source`` scores the encoder (None: the metric could not be
    evaluated; ``note`` says why)."""

    def __init__(self, entry: str, directory: Path, source: DevMetric | None, note: str | None = None):
        self.metric, self.directory, self.source, self.note = metric_key(entry), directory, source, note
        self.higher_is_better = metric_class(entry).higher_is_better
        self.label = source.label if source is not None else entry
        self.best: float | None = None
        self.step: int | None = None

    def offer(self, step: int, value: float, write_model) -> None:
        """Keep the encoder (``write_model(directory)``) if ``value`` is the best so far."""
        if better(self.higher_is_better, value, self.best):
            self.best, self.step = value, step
            self.save(write_model)

    def task_names(self) -> list[str] | None:
        return None if self.source is None else self.source.task_names()

    def save(self, write_model) -> None:
        marker = {"step": self.step, self.metric: self.best, "tasks": self.task_names() or []}
        save_marked(self.directory, write_model, marker)

    def reconcile(self, resumed_step: int, write_model) -> None:
        action, marker = reconcile_action(self.directory / BEST_MODEL, self.step, resumed_step)
        if action == "adopt":
            self.best, self.step = marker[self.metric], marker["step"]
        elif action == "rewrite":
            self.save(write_model)
        elif action == "replay":
            warn_replay(self.directory)

    def summary(self) -> dict:
        return {f"best_{self.metric}": self.best, f"best_{self.metric}_step": self.step,
                f"{self.metric}_model": str(self.directory) if self.step is not None else None,
                f"{self.metric}_tasks": self.task_names(), f"{self.metric}_label": self.label,
                f"{self.metric}_note": self.note}


class BestModel:
    """Evaluates the encoder and saves it to ``out_dir`` when it is the best so far.

    ``dev`` is the metric ``entry`` (``train.select_on``'s first) names, None when its data is not
    found; ``metric`` is the key of the evaluation that decides (``dev``'s, or ``val_mlm_loss``);
    ``best_dev`` is its best value so far (the checkpoint keeps it under that name, whichever metric
    it is) and ``best_step`` the step of it.
    """

    def __init__(self, out_dir: Path, dev: DevMetric | None, encoder: SentenceEncoder, precision: str, every: int,
                 entry: str = "stsb_dev"):
        self.out_dir, self.dev, self.encoder = out_dir, dev, encoder
        self.precision, self.every = precision, every
        self.best_dev: float | None = None
        self.best_step: int | None = None
        self.dev_key = self.metric = metric_key(entry)
        self.decider: type[DevMetric] | DevMetric = metric_class(entry)
        self.label = dev.label if dev is not None else self.decider.label
        self.validation: ValidationLoss | None = None
        self.raw_encoder = False
        self.kept: list[KeptModel] = []  # the further metrics of train.select_on

    def attach(self, validation: ValidationMlm | None, mlm_only: bool) -> None:
        """Validation MLM loss at every evaluation. An MLM-only objective trains no pooled output: its
        validation loss picks the best model, and the model is saved as a raw encoder (below)."""
        self.validation = None if validation is None else ValidationLoss(validation)
        self.raw_encoder = mlm_only
        if mlm_only and validation is not None:
            self.metric, self.decider, self.label = self.validation.key, self.validation, self.validation.label

    @property
    def selects(self) -> bool:
        """Whether evaluations pick the final model (else it is the last step's)."""
        source = self.validation if self.decider is self.validation else self.dev
        return self.every > 0 and source is not None

    def due(self, step: int, last: bool) -> bool:
        evaluates = self.dev is not None or self.validation is not None or any(k.source is not None for k in self.kept)
        return self.every > 0 and evaluates and (step % self.every == 0 or last)

    def encode(self, sentences: list[str], progress: bool = False):
        """The encoder's embeddings now, in the training precision (``progress``: an encoding bar)."""
        return self.encoder.encode(sentences, batch_size=128, precision=self.precision, show_progress=progress)

    def score(self, progress: bool = False) -> float:
        """The first metric of the encoder now (STS-B dev Spearman x 100 by default), in the training precision;
        ``progress``: the encoding shows a bar (the evaluation before training has no training bar to tell)."""
        return self.dev.score(functools.partial(self.encode, progress=progress))

    def evaluate(self, step: int) -> dict[str, float]:
        """Every evaluation of the encoder now, by name; saved as the final model if it is the best,
        and into a further metric's directory where it is that metric's best."""
        scores = {}
        if self.dev is not None:
            scores.update(self.dev.scores(self.encode))
        if self.validation is not None:
            scores.update(self.validation.scores(self.encode))
        for kept in self.kept:
            if kept.source is not None:
                scores.update(kept.source.scores(self.encode))
        value = scores.get(self.metric)
        if value is not None and self.is_better(value):
            self.best_dev, self.best_step = value, step
            self.save(step, value)
        for kept in self.kept:
            if kept.metric in scores:
                kept.offer(step, scores[kept.metric], self.write_model)
        return scores

    def is_better(self, value: float) -> bool:
        return better(self.decider.higher_is_better, value, self.best_dev)

    def write_model(self, directory: Path | None = None) -> None:
        """The encoder as the run's final model (or into ``directory``). A raw encoder's settings leave
        out the MLP choice, so a run started from it gets SimCSE's default, as from any raw BERT (cls
        pooler: with the MLP)."""
        directory = self.out_dir if directory is None else directory
        self.encoder.save(directory)
        if self.raw_encoder:
            settings_file = directory / CSELAB_CONFIG
            settings = json.loads(settings_file.read_text())
            settings = {k: v for k, v in settings.items() if k not in ("mlp", "mlp_only_train")}
            settings_file.write_text(json.dumps({**settings, "raw_encoder": True}, indent=2))

    def save(self, step: int, score: float) -> None:
        save_marked(self.out_dir, self.write_model, {"step": step, self.metric: score})

    def summary(self) -> dict:
        """The run summary's account of the selection: best_KEY of every registered metric (None where it
        did not decide), the deciding one's value and step; a further metric's best_KEY, best_KEY_step,
        KEY_model, KEY_tasks, KEY_label, KEY_note."""
        summary = {"selected_by": self.metric if self.selects else "last_step", "selection_label": self.label,
                   **{f"best_{name}": None for name in DEV_METRICS.names() if not DEV_METRICS.get(name).takes_argument},
                   f"best_{self.dev_key}": None, f"best_{self.metric}": self.best_dev, "best_step": self.best_step}
        for kept in self.kept:
            summary.update(kept.summary())
        return summary

    def kept_record(self) -> dict[str, list]:
        """The further metrics' best values and steps, for the checkpoint."""
        return {kept.metric: [kept.best, kept.step] for kept in self.kept}

    def restore_kept(self, record: dict[str, list]) -> None:
        for kept in self.kept:
            kept.best, kept.step = record.get(kept.metric, [None, None])

    def reconcile(self, resumed_step: int) -> None:
        """Make this record and the best model on disk agree after resuming from ``resumed_step``.

        A best model saved after the checkpoint (and completely written) is kept and adopted; one
        whose save was cut short is rewritten from the checkpoint's weights when they are that model.
        """
        action, marker = reconcile_action(self.out_dir / BEST_MODEL, self.best_step, resumed_step)
        if action == "adopt":
            self.best_dev = marker[self.metric]
            self.best_step = marker["step"]
        elif action == "rewrite":
            self.save(self.best_step, self.best_dev)
        elif action == "replay":
            warn_replay(self.out_dir)
        for kept in self.kept:
            kept.reconcile(resumed_step, self.write_model)
