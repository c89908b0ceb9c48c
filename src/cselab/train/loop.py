"""The training recipe: config -> data -> model -> objective -> optimiser -> steps -> the final model.

Every method is this same loop with a different recipe: the views say which texts form a step, the
objective's terms say what is minimised. Each part lives in its own module of ``cselab.train``:
``parts`` builds the run, ``components`` its stateful parts (each with ``state_dict()``), ``steps``
runs one step, ``optimizer`` updates the weights, ``metrics`` logs a window, ``selection`` keeps the
best model (by STS-B dev, or by ``validation`` MLM loss on held-out lines when pre-training;
``train.select_on``'s further metrics, e.g. ``transfer_dev``, each keep their own in
``best-METRIC/``; ``selection_setup`` builds them from the config), ``resume`` starts the run or
restores every component, ``saving`` says when to save and hands ``checkpoint``'s writer every
component's state, ``run_dir`` finds the last complete checkpoint, ``summary`` writes the summary,
and ``process`` knows the device and the other processes.
"""
from __future__ import annotations

from collections.abc import Callable

from cselab.config import Config
from cselab.train.checkpoint import CheckpointWriter, read_checkpoint
from cselab.train.components import build_components
from cselab.train.parts import build_parts, make_loader
from cselab.train.process import Process
from cselab.train.resume import run_precision, start_or_resume
from cselab.train.run_dir import open_run
from cselab.train.saving import Checkpointing
from cselab.train.selection_setup import caller_stops
from cselab.train.signals import stop_on_signals
from cselab.train.steps import StepForward, choose_step
from cselab.train.summary import summarize


def train(config: Config, resume: bool = True, progress: bool = True,
          base_dev: dict[str, dict[str, float]] | None = None,
          on_evaluation: Callable[[int, dict], bool] | None = None) -> dict:
    """Train as ``config`` says; returns the run summary (also written to summary.json).

    ``base_dev``: {training precision: {metric key: value}}, the starting encoder's dev scores in these
    settings, when a caller (``cselab sweep``) already measured them for another run; they replace
    the evaluation before step 1.
    ``on_evaluation(step, record)``: called after each evaluation; True ends the run there (a pruned trial).
    """
    process = Process.start(config.train, bars=progress)
    with open_run(process, config, resume) as latest:
        parts = build_parts(config, process.device, process.processes, process.rank)
        for note in [*parts.corpus_stats.notes(), *parts.notes]:
            if note:
                process.say(note)
        process.seed_per_rank(config.train.seed)
        saved = None if latest is None else read_checkpoint(latest)
        precision = run_precision(process, config.train, parts.encoder.hidden_size, saved)
        forward = StepForward(parts.encoder, parts.head, parts.objective, process.device, precision.precision)
        run = build_components(process, config, parts, precision, forward)
        start_or_resume(process, run, saved, (base_dev or {}).get(precision.precision))
        update, metrics, selection = run.optimizer, run.metrics, run.selection
        step = choose_step(forward, config.optim.grad_cache_chunk, update.scale)
        loader = make_loader(parts, config.train, run.step, process)
        parts.trainable.train()
        # The writer is joined when the block ends (also on an error), before the run's summary and lock.
        with (stop_on_signals(process.device) as stop, metrics,
              CheckpointWriter(config.train.async_checkpoint) as writer):
            checkpoints = Checkpointing(process, config.train, {"config": config.to_dict(),
                                                                 "precision": precision.precision}, writer)
            metrics.restart_window()  # the clock starts with the first batch, not with the loader's start-up
            for batch in metrics.timed(loader):  # the time spent waiting for each batch: loader_wait
                result = step(batch)
                grad_norm = update()
                run.position.advance(batch.step, batch.num_sentences * process.processes)
                last = run.position.last
                metrics.add(result, grad_norm, batch, update.overflow_is_fault)
                window = metrics.due(last)
                evaluate = selection.due(run.step, last)
                stopping = stop.agreed(window or evaluate)  # with several processes, decided by all of them
                save = checkpoints.due(run.step, last, window) or stopping
                if window or evaluate or save:
                    record = metrics.close_window(update.lr(), process.advice(precision.precision))
                    update.check_loss_scale(run.step)
                    if evaluate:
                        with metrics.evaluating(selection.primary.label):
                            record.update(selection.evaluate(run.step))
                    metrics.write(record)
                    if last and not selection.selects and process.main:  # no evaluation: the final model is the
                        selection.write_model()  # last step's, written before its checkpoint
                    if save:
                        checkpoints.save(run)
                    metrics.restart_window()
                    if evaluate and on_evaluation is not None and caller_stops(process, on_evaluation, run.step,
                                                                               record):
                        process.say(f"stopped after step {run.step} by the caller (e.g. a pruned trial)")
                        break
                if stopping:
                    writer.wait()  # "checkpoint saved" is said once it is on disk
                    process.say(f"\n{stop.signal_name}: stopped after step {run.step}; checkpoint saved. "
                                f"Run the same command again to resume.")
                    break
        return summarize(process, config, parts, run, precision)
