"""The training recipe: config -> data -> model -> objective -> optimiser -> steps -> the final model.

Every method is this same loop with a different recipe: the views say which texts form a step, the
objective's terms say what is minimised. Each part lives in its own module of ``cselab.train``:
``parts`` builds the run, ``steps`` runs one step, ``optimizer`` updates the weights, ``metrics``
logs a window, ``selection`` keeps the best model (by STS-B dev, or by ``validation`` MLM loss on
held-out lines when pre-training; ``train.select_on``'s further metrics, e.g. ``transfer_dev``, each
keep their own in ``best-METRIC/``; ``selection_setup`` builds them from the config), ``resume``
starts or resumes the run, ``saving`` says when to save and hands ``checkpoint``'s writer the state,
``run_dir`` finds the last complete checkpoint, ``summary`` writes the summary, and ``process``
knows the device and the other processes.
"""
from __future__ import annotations

from collections.abc import Callable

from cselab.config import Config
from cselab.train.checkpoint import CheckpointWriter
from cselab.train.live_logs import LiveLogs
from cselab.train.metrics import MetricsLog
from cselab.train.optimizer import OptimizerStep, gradient_scaler, make_optimizer
from cselab.train.parts import build_parts, make_loader
from cselab.train.process import Process
from cselab.train.resume import run_precision, start_or_resume
from cselab.train.run_dir import METRICS, open_run
from cselab.train.saving import SaveSchedule, save_checkpoint
from cselab.train.selection_setup import best_model_selection, caller_stops
from cselab.train.signals import stop_on_signals
from cselab.train.steps import StepForward, choose_step
from cselab.train.summary import summarize
from cselab.train.throughput import Throughput
from cselab.train.validation import validation_for


def train(config: Config, resume: bool = True, progress: bool = True, base_dev: dict[str, float] | None = None,
          on_evaluation: Callable[[int, dict], bool] | None = None) -> dict:
    """Train as ``config`` says; returns the run summary (also written to summary.json).

    ``base_dev``: the starting encoder's STS-B dev in these settings, by training precision, when a caller
    (``cselab sweep``) already measured it for another run; it replaces the evaluation before step 1.
    ``on_evaluation(step, record)``: called after each evaluation; True ends the run there (a pruned trial).
    """
    process = Process.start(config)
    with open_run(process, config, resume) as latest:
        parts = build_parts(config, process.device, process.processes, process.rank)
        for note in [*parts.corpus_stats.notes(), *parts.notes]:
            if note:
                process.say(note)
        process.seed_per_rank(config.train.seed)
        optimizer, scheduler = make_optimizer(parts.trainable, config.optim, len(parts.plan))
        state = start_or_resume(process, latest, parts, optimizer, scheduler, config)
        precision = run_precision(process, config, parts.encoder.hidden_size, state)
        update = OptimizerStep(optimizer, scheduler, list(parts.trainable.parameters()), config.optim.max_grad_norm,
                               gradient_scaler(precision.precision, process.device))
        state.restore_scaler(update.scaler)
        forward = StepForward(parts.encoder, parts.head, parts.objective, process.device, precision.precision)
        step = choose_step(forward, config.optim.grad_cache_chunk, update.scale)
        selector = best_model_selection(process, config, parts.encoder, precision.precision, state,
                                        validation_for(parts.validation, forward, process.main),
                                        mlm_only=not parts.objective.encodes_views,
                                        known_base_dev=(base_dev or {}).get(precision.precision))
        metrics = MetricsLog(process.out_dir / METRICS if process.main else None, state, config.train.log_steps,
                             Throughput(parts.encoder, precision.dtype, process.device.type, process.processes),
                             process.progress_bar(config.recipe, len(parts.plan), state.step) if progress else None,
                             live=LiveLogs(config, process.out_dir, state.step) if process.main else None)
        loader = make_loader(parts, config, state.step, process.rank, process.processes, process.device)
        parts.trainable.train()
        schedule = SaveSchedule(config, process)
        # The writer is joined when the block ends (also on an error), before the run's summary and lock.
        with (stop_on_signals(process.device) as stop, metrics,
              CheckpointWriter(config.train.async_checkpoint) as writer):
            metrics.restart_window()  # the clock starts with the first batch, not with the loader's start-up
            for batch in metrics.timed(loader):  # the time spent waiting for each batch: loader_wait
                result = step(batch)
                grad_norm = update()
                state.advance(batch.step, batch.num_sentences * process.processes)
                last = state.step == len(parts.plan)
                metrics.add(result, grad_norm, batch, update.overflow_is_fault)
                window = metrics.due(last)
                evaluate = selector.due(state.step, last)
                stopping = stop.agreed(window or evaluate)  # with several processes, decided by all of them
                save = schedule.due(state.step, last, window) or stopping
                if window or evaluate or save:
                    record = metrics.close_window(update.lr(), process.advice(precision.precision))
                    update.check_loss_scale(state.step)
                    if evaluate:
                        with metrics.evaluating(selector.label):
                            record.update(selector.evaluate(state.step))
                    metrics.write(record)
                    if last and not selector.selects and process.main:  # no evaluation: the final model is the
                        selector.write_model()  # last step's, written before its checkpoint
                    if save:
                        save_checkpoint(process, parts, update, state, selector, config, writer)
                        schedule.saved()
                    metrics.restart_window()
                    if evaluate and on_evaluation is not None and caller_stops(process, on_evaluation, state.step,
                                                                               record):
                        process.say(f"stopped after step {state.step} by the caller (e.g. a pruned trial)")
                        break
                if stopping:
                    writer.wait()  # "checkpoint saved" is said once it is on disk
                    process.say(f"\n{stop.signal_name}: stopped after step {state.step}; checkpoint saved. "
                                f"Run the same command again to resume.")
                    break
        return summarize(process, config, parts, state, selector, precision)
