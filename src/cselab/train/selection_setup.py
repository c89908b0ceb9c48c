"""Model selection as the run configures it: the primary dev metric (the first of ``train.select_on``)
picks the model in the output directory, each further one keeps its own (``selection.py`` keeps
them); the main process evaluates, the others follow its decision."""
from __future__ import annotations

from pathlib import Path

from cselab.config import Config
from cselab.evaluate.dev import DevMetric, ValidationLoss, build_metric, find_senteval_dir, metric_class, metric_key
from cselab.run_files import KEPT_DIR
from cselab.train.distributed import from_main
from cselab.train.metrics import bars_allowed
from cselab.train.parts import RunParts
from cselab.train.process import Process, on_main
from cselab.train.selection import ModelSelection, Tracked
from cselab.train.validation import ValidationMlm


def model_selection(process: Process, config: Config, parts: RunParts, precision: str,
                    validation: ValidationMlm | None = None) -> ModelSelection:
    """The metrics of ``train.select_on`` (the first picks the final model), scored on the main process
    when their data is found; for an objective of MLM alone with held-out lines, the validation MLM loss
    picks the model instead (the first of ``train.select_on`` is still scored at each evaluation)."""
    dev_dir, dev = on_main(process, lambda: primary_metric(config), (None, None))
    first = Tracked(config.train.select_on[0], process.out_dir, dev)
    further = on_main(process, lambda: further_metrics(process, config, dev_dir), [])
    validation_loss = None if validation is None else ValidationLoss(validation)
    if not parts.objective.encodes_views and validation_loss is not None:
        first = Tracked(validation_loss.key, process.out_dir, validation_loss)
    sources = [dev, validation_loss, *(kept.source for kept in further)]  # metrics.jsonl's column order
    selection = ModelSelection([first, *further], sources, parts.encoder, precision, config.train.eval_steps)
    selection.raw_encoder = not parts.objective.encodes_views
    selection.base_metric = dev
    # Only the main process has the metrics: the others evaluate and select as it does.
    selection.agreed = from_main((bool(selection.sources), selection.primary.source is not None)
                                 if process.main else None)
    if process.main and config.train.eval_steps > 0 and not selection.selects:
        process.say(f"no {selection.primary.label} data found: the final model is the last step "
                    "(`cselab data download` fetches it; or set data.dev_dir or $CSELAB_DATA)")
    return selection


def score_base(process: Process, selection: ModelSelection, known: dict[str, float] | None) -> None:
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


def caller_stops(process: Process, on_evaluation, step: int, record: dict) -> bool:
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


def further_metrics(process: Process, config: Config, dev_dir: Path | None) -> list[Tracked]:
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
