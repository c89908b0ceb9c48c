"""Model selection as the run configures it: the primary dev metric (the first of ``train.select_on``)
picks the model in the output directory, each further one keeps its own (``selection.py`` holds the
models kept); the main process evaluates, the others follow its decision."""
from __future__ import annotations

from pathlib import Path

from cselab.config import Config
from cselab.evaluate.dev import DevMetric, build_metric, find_senteval_dir, metric_class, metric_key
from cselab.model.encoder import SentenceEncoder
from cselab.train.distributed import from_main
from cselab.train.metrics import bars_allowed
from cselab.train.process import Process, on_main
from cselab.train.run_dir import RunState
from cselab.train.selection import KEPT_DIR, BestModel, KeptModel
from cselab.train.validation import ValidationMlm


def best_model_selection(process: Process, config: Config, encoder: SentenceEncoder, precision: str,
                         state: RunState, validation: ValidationMlm | None = None,
                         mlm_only: bool = False, known_base_dev: float | None = None) -> BestModel:
    """STS-B dev evaluation on the main process when dev data is found, validation MLM loss when the
    run holds lines out (it picks the best model of an MLM-only run), the further metrics of
    ``train.select_on``; the record of a resumed run. ``known_base_dev``: the starting encoder's STS-B
    dev measured already in these settings (by a sweep, for another run), used instead of scoring it."""
    dev_dir, dev = on_main(process, lambda: primary_metric(config), (None, None))
    selector = BestModel(process.out_dir, dev, encoder, precision, config.train.eval_steps, config.train.select_on[0])
    selector.attach(validation, mlm_only)  # before reconcile: it reads and writes the marker of this metric
    if process.main and config.train.eval_steps > 0 and not selector.selects:
        process.say(f"no {selector.label} data found: the final model is the last step "
                    "(`cselab data download` fetches it; or set data.dev_dir or $CSELAB_DATA)")
    selector.kept = on_main(process, lambda: further_metrics(process, config, dev_dir), [])
    selector.best_dev, selector.best_step = state.best_dev, state.best_step
    selector.restore_kept(state.kept_best)
    if process.main and state.step:
        selector.reconcile(state.step)
    if dev is not None and state.step == 0:
        # The starting point, so a run shows what training changed (SimCSE's own tables compare so).
        if known_base_dev is None or selector.dev_key != "stsb_dev":  # a sweep knows the base's STS-B dev only
            process.say("evaluating the starting model before training...")
            state.base_dev = selector.score(progress=process.main and bars_allowed())
            process.say(f"{dev.label} before training: {state.base_dev:.2f}")
        else:
            state.base_dev = known_base_dev
            process.say(f"{dev.label} before training: {state.base_dev:.2f} (measured for an earlier run)")
    return selector


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


def further_metrics(process: Process, config: Config, dev_dir: Path | None) -> list[KeptModel]:
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
        kept.append(KeptModel(entry, directory, source, note))
    return kept
