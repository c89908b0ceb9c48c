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
and repaired on resume (:meth:`Tracked.reconcile`).

``train.select_on``'s further metrics (AugCSE's: ``transfer_dev``, the transfer tasks' dev
accuracy) each keep their own best model, in ``OUTPUT_DIR/best-KEY/`` with a marker of its own
(:class:`Tracked`, like the primary one), written and reconciled the same way; the final model stays the
first metric's.
"""
from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from cselab.config import Config
from cselab.evaluate.dev import (
    DEV_METRICS,
    DevMetric,
    ValidationLoss,
    build_metric,
    find_senteval_dir,
    metric_class,
    metric_key,
)
from cselab.model.encoder import SentenceEncoder
from cselab.model.files import CSELAB_CONFIG
from cselab.run_files import BEST_MODEL, KEPT_DIR
from cselab.train.checkpoint import write_json_atomic
from cselab.train.distributed import from_main
from cselab.train.metrics import bars_allowed
from cselab.train.rank import RankContext, on_main
from cselab.train.setup import TrainingSetup
from cselab.train.validation import ValidationMlm

log = logging.getLogger(__name__)


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


class Tracked:
    """One metric of model selection and the best model it keeps: the primary one's in the output
    directory, a further one's in ``best-KEY/``, each with its marker. ``source`` scores the encoder
    (None: the metric could not be evaluated; ``note`` says why)."""

    def __init__(self, entry: str, directory: Path, source: DevMetric | None, note: str | None = None):
        self.entry, self.metric, self.source, self.note = entry, metric_key(entry), source, note
        self.directory = directory
        self.higher_is_better = (source if source is not None else metric_class(entry)).higher_is_better
        self.primary = False  # set by ModelSelection for the first: its marker and summary keys differ
        self.best: float | None = None
        self.step: int | None = None
        self.written_step: int | None = None  # the step whose weights this process wrote to ``directory``

    @property
    def label(self) -> str:
        if self.source is not None:
            return self.source.label
        return metric_class(self.entry).label if self.primary else self.entry

    def offer(self, step: int, value: float, write_model) -> None:
        """Keep the encoder (``write_model(directory)``) if ``value`` is the best so far."""
        if better(self.higher_is_better, value, self.best):
            self.best, self.step = value, step
            self.save(write_model)

    def task_names(self) -> list[str] | None:
        return None if self.source is None else self.source.task_names()

    def save(self, write_model) -> None:
        marker = {"step": self.step, self.metric: self.best}
        if not self.primary:  # a further metric's folder says which tasks chose it
            marker["tasks"] = self.task_names() or []
        save_marked(self.directory, write_model, marker)
        self.written_step = self.step

    def reconcile(self, resumed_step: int, write_model) -> None:
        """Make this record and the model on disk agree after resuming from ``resumed_step``: a model
        saved after the checkpoint (and completely written) is adopted; one whose save was cut short
        is rewritten from the checkpoint's weights when they are that model."""
        action, marker = reconcile_action(self.directory / BEST_MODEL, self.step, resumed_step)
        if action == "adopt":
            self.best, self.step = marker[self.metric], marker["step"]
        elif action == "rewrite":
            self.save(write_model)
        elif action == "replay":
            warn_replay(self.directory)

    def summary(self) -> dict:
        """A further metric's account for summary.json: best_KEY, best_KEY_step, KEY_model, KEY_tasks,
        KEY_label, KEY_note."""
        return {f"best_{self.metric}": self.best, f"best_{self.metric}_step": self.step,
                f"{self.metric}_model": str(self.directory) if self.step is not None else None,
                f"{self.metric}_tasks": self.task_names(), f"{self.metric}_label": self.label,
                f"{self.metric}_note": self.note}


@dataclass
class SelectionSettings:
    """How a run's model selection works, known when it is built."""

    every: int  # train.eval_steps (0: never evaluated)
    precision: str  # the encoder is scored in the training precision
    agreed: tuple[bool, bool]  # (evaluates, selects) as the main process found them
    base_metric: DevMetric | None = None  # the first of train.select_on, scored before step 1
    raw_encoder: bool = False  # an MLM-only run: the model is saved as a raw encoder (write_model)


class ModelSelection:
    """Evaluates the encoder every ``every`` steps and keeps each tracked metric's best model.

    ``tracked[0]`` is the primary metric: its best model is the run's final model (in the output
    directory); each further one keeps its own. ``sources``: every metric scored at each evaluation,
    in the order of their columns in ``metrics.jsonl`` (the tracked ones' and any that keep no model:
    the first of ``train.select_on`` when the held-out MLM loss picks a raw encoder). ``base``: the
    first of ``train.select_on`` before training (``base_metric`` scores it). Its state is every
    tracked metric's best value and step, and the base.

    Only the main process scores (the others have no sources): whether evaluations happen and whether
    they select is the main process's answer (``agreed``), so every process evaluates at the same steps.
    """

    def __init__(self, tracked: list[Tracked], sources: list[DevMetric], encoder: SentenceEncoder,
                 settings: SelectionSettings):
        self.tracked, self.encoder = tracked, encoder
        self.precision, self.every = settings.precision, settings.every
        self.sources = [metric for metric in sources if metric is not None]
        self.primary = tracked[0]
        self.primary.primary = True
        self.base_metric = settings.base_metric
        self.base: float | None = None
        self.raw_encoder = settings.raw_encoder
        self.agreed = settings.agreed

    @property
    def selects(self) -> bool:
        """Whether evaluations pick the final model (else it is the last step's)."""
        return self.every > 0 and self.agreed[1]

    def due(self, step: int, last: bool) -> bool:
        return self.every > 0 and self.agreed[0] and (step % self.every == 0 or last)

    def saved_at(self, step: int, last: bool) -> bool:
        """Whether the final model in the output directory holds this step's weights (written by this run:
        a best model adopted from a run that was stopped is that run's weights)."""
        return self.primary.written_step == step or (not self.selects and last)

    def encode(self, sentences: list[str], progress: bool = False):
        """The encoder's embeddings now, in the training precision (``progress``: an encoding bar)."""
        return self.encoder.encode(sentences, batch_size=128, precision=self.precision, show_progress=progress)

    def score_base(self, progress: bool = False) -> float:
        """The first metric of ``train.select_on`` on the encoder now (STS-B dev Spearman x 100 by default),
        in the training precision; ``progress``: the encoding shows a bar."""
        self.base = self.base_metric.score(functools.partial(self.encode, progress=progress))
        return self.base

    def evaluate(self, step: int) -> dict[str, float]:
        """Every metric's scores of the encoder now, by name; the encoder saved where it is a tracked
        metric's best."""
        scores = {}
        for source in self.sources:
            scores.update(source.scores(self.encode))
        for tracked in self.tracked:
            if tracked.metric in scores:
                tracked.offer(step, scores[tracked.metric], self.write_model)
        return scores

    def write_model(self, directory: Path | None = None) -> None:
        """The encoder as the run's final model (or into ``directory``). A raw encoder's settings leave
        out the MLP choice, so a run started from it gets SimCSE's default, as from any raw BERT (cls
        pooler: with the MLP)."""
        directory = self.primary.directory if directory is None else directory
        self.encoder.save(directory)
        if self.raw_encoder:
            settings_file = directory / CSELAB_CONFIG
            settings = json.loads(settings_file.read_text())
            settings = {k: v for k, v in settings.items() if k not in ("mlp", "mlp_only_train")}
            settings_file.write_text(json.dumps({**settings, "raw_encoder": True}, indent=2))

    def reconcile(self, resumed_step: int) -> None:
        """Every tracked model and its record agree after resuming from ``resumed_step``."""
        for tracked in self.tracked:
            tracked.reconcile(resumed_step, self.write_model)

    def state_dict(self) -> dict:
        return {"best": {t.metric: [t.best, t.step] for t in self.tracked}, "base": self.base}

    def load_state_dict(self, state: dict) -> None:
        for tracked in self.tracked:
            tracked.best, tracked.step = state["best"].get(tracked.metric, [None, None])
        self.base = state["base"]

    def summary(self, base_key: str) -> dict:
        """The run summary's account of the selection: best_KEY of every registered metric (None where it
        did not decide), the primary one's value and step, each further one's own keys;
        ``base_KEY``: the first of ``train.select_on`` before training (``base_key``: its key)."""
        primary = self.primary
        summary = {"selected_by": primary.metric if self.selects else "last_step", "selection_label": primary.label,
                   **{f"best_{name}": None for name in DEV_METRICS.names() if not DEV_METRICS.get(name).takes_argument},
                   f"best_{base_key}": None, f"best_{primary.metric}": primary.best, "best_step": primary.step,
                   f"base_{base_key}": self.base}
        for tracked in self.tracked[1:]:
            summary.update(tracked.summary())
        return summary


# -- model selection as the run configures it ----------------------------------------------------------

def model_selection(process: RankContext, config: Config, setup: TrainingSetup, precision: str,
                    validation: ValidationMlm | None = None) -> ModelSelection:
    """The metrics of ``train.select_on`` (the first picks the final model), scored on the main process
    when their data is found; for an objective of MLM alone with held-out lines, the validation MLM loss
    picks the model instead (the first of ``train.select_on`` is still scored at each evaluation)."""
    dev_dir, dev = on_main(process, lambda: primary_metric(config), (None, None))
    first = Tracked(config.train.select_on[0], process.out_dir, dev)
    further = on_main(process, lambda: further_metrics(process, config, dev_dir), [])
    validation_loss = None if validation is None else ValidationLoss(validation)
    if not setup.objective.encodes_views and validation_loss is not None:
        first = Tracked(validation_loss.key, process.out_dir, validation_loss)
    sources = [dev, validation_loss, *(kept.source for kept in further)]  # metrics.jsonl's column order
    # Only the main process has the metrics: the others evaluate and select as it does.
    agreed = from_main((any(source is not None for source in sources), first.source is not None)
                       if process.main else None)
    selection = ModelSelection([first, *further], sources, setup.encoder,
                               SelectionSettings(config.train.eval_steps, precision, agreed, base_metric=dev,
                                                 raw_encoder=not setup.objective.encodes_views))
    if process.main and config.train.eval_steps > 0 and not selection.selects:
        process.say(f"no {selection.primary.label} data found: the final model is the last step "
                    "(`cselab data download` fetches it; or set data.dev_dir or $CSELAB_DATA)")
    return selection


def score_base(process: RankContext, selection: ModelSelection, known: dict[str, float] | None) -> None:
    """The starting point, so a run shows what training changed (SimCSE's own tables compare so):
    the first metric of ``train.select_on`` before step 1, or ``known[key]``, its value already
    measured in these settings (by a sweep, for another run)."""
    metric = selection.base_metric
    if metric is None:
        return
    if known and metric.key in known:
        selection.base = known[metric.key]
        process.say(f"{metric.label} before training: {selection.base:.2f} (measured for an earlier run)")
        return
    process.say("evaluating the starting model before training...")
    selection.score_base(progress=process.main and bars_allowed())
    process.say(f"{metric.label} before training: {selection.base:.2f}")


def caller_stops(process: RankContext, on_evaluation, step: int, record: dict) -> bool:
    """``on_evaluation(step, record)`` on the main process (whose record holds the dev scores); its answer
    is shared, so every process stops at the same step."""
    stop = bool(on_evaluation(step, record)) if process.main else None
    return bool(from_main(stop))


def primary_metric(config: Config) -> tuple[Path | None, DevMetric | None]:
    """The SentEval directory and the metric that picks the final model (``train.select_on``'s first;
    STS-B dev by default), when evaluations are on and the data is found."""
    if config.train.eval_steps == 0:
        return None, None
    dev_dir = find_senteval_dir(config.data.dev_dir)
    entry = config.train.select_on[0]
    if dev_dir is None and metric_class(entry).needs_senteval:
        return None, None
    return dev_dir, build_metric(entry, dev_dir)


def further_metrics(process: RankContext, config: Config, dev_dir: Path | None) -> list[Tracked]:
    """Each metric of ``train.select_on`` after the first keeps its own best model. Without SentEval
    data (or evaluations) it cannot: a warning says so, and the summary's METRIC_note; SentEval data
    that lacks the metric's own files fails here, before the first step, naming the file."""
    kept = []
    for entry in config.train.select_on[1:]:
        source, note = None, None
        if config.train.eval_steps == 0:
            note = "not evaluated (train.eval_steps is 0)"
        elif dev_dir is None and metric_class(entry).needs_senteval:
            note = "not evaluated: no SentEval data found (`cselab data download`; or set data.dev_dir or $CSELAB_DATA)"
        else:
            source = build_metric(entry, dev_dir)
            note = source.note
        directory = process.out_dir / KEPT_DIR.format(metric=metric_key(entry))
        if source is not None:
            process.say(f"{source.key}: {source.describe()} at every evaluation; its best model goes to {directory}")
        if note:
            process.say(f"warning: train.select_on {entry}: {note}")
        kept.append(Tracked(entry, directory, source, note))
    return kept
