"""The training recipe: config -> data -> model -> objective -> optimiser -> steps -> the final model.

Every method is this same loop with a different recipe: the views say which texts form a step, the
objective's terms (and the token passes they read) say what is minimised. The loop's parts, each in its
module of ``cselab.train``: ``setup`` builds what the run trains and on what, ``state`` its stateful
components (each with ``state_dict()``) and the start or resume, ``steps`` runs one step,
``optimizer`` updates the weights, ``metrics`` logs a window, ``selection`` evaluates and keeps the best
model, ``checkpoint`` saves the state and owns the output directory, ``summary`` writes the summary,
and ``rank`` is this process among its peers.
"""
from __future__ import annotations

from collections.abc import Callable

from cselab.config import Config
from cselab.losses import check_models
from cselab.train.checkpoint import Checkpointing, CheckpointWriter, open_run, read_checkpoint
from cselab.train.rank import RankContext
from cselab.train.selection import caller_stops
from cselab.train.setup import build_setup, make_loader
from cselab.train.signals import stop_on_signals
from cselab.train.state import RunState, build_state, run_precision, start_or_resume
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
    check_models(config.objective)  # a term's own model (DiffCSE's generator): before the run's folder is touched
    process = RankContext.start(config.train, bars=progress)
    with open_run(process, config, resume) as latest:
        setup = build_setup(config, process.device, process.processes, process.rank)
        for note in setup.announcements():  # the corpus as read, a trained vocabulary
            process.say(note)
        process.seed_per_rank(config.train.seed)
        saved = None if latest is None else read_checkpoint(latest)
        precision = run_precision(process, config.train, setup.encoder.hidden_size, saved)
        forward = StepForward(setup.encoder, setup.head, setup.objective, process.device, precision.precision)
        run = build_state(process, config, setup, precision, forward)
        start_or_resume(process, run, saved, (base_dev or {}).get(precision.precision))
        if setup.compile_timer is not None:  # train.compile: auto compiles when the steps left repay it
            setup.compile_timer.expect_steps(len(setup.plan) - run.step)
        step = choose_step(forward, config.optim.grad_cache_chunk, run.optimizer.scale)
        loader = make_loader(setup, config.train, run.step, process)
        setup.trainable.train()
        # The writer is joined when the block ends (also on an error), before the run's summary and lock.
        with (stop_on_signals(process.device) as stop, run.metrics,
              CheckpointWriter(config.train.async_checkpoint) as writer):
            checkpoints = Checkpointing(process, config.train, {"config": config.to_dict(),
                                                                "precision": precision.precision}, writer)
            run.metrics.restart_window()  # the clock starts with the first batch, not with the loader's start-up
            for batch in run.metrics.timed(loader):  # the time spent waiting for each batch: loader_wait
                result = step(batch)
                grad_norm = run.optimizer()
                run.position.advance(batch.step, batch.num_sentences * process.processes)
                run.metrics.add(result, grad_norm, batch, run.optimizer.overflow_is_fault)
                window, evaluate = run.metrics.due(run.position.last), run.selection.due(run.step, run.position.last)
                stopping = stop.agreed(window or evaluate)  # with several processes, decided by all of them
                save = checkpoints.due(run.step, run.position.last, window) or stopping
                if window or evaluate or save:
                    record = close_window(process, run, precision.precision, evaluate, checkpoints if save else None)
                    if evaluate and on_evaluation is not None and caller_stops(process, on_evaluation, run.step,
                                                                               record):
                        process.say(f"stopped after step {run.step} by the caller (e.g. a pruned trial)")
                        break
                if stopping:
                    writer.wait()  # "checkpoint saved" is said once it is on disk
                    process.say(f"\n{stop.signal_name}: stopped after step {run.step}; checkpoint saved. "
                                f"Run the same command again to resume.")
                    break
        return summarize(process, config, setup, run, precision)


def close_window(process: RankContext, run: RunState, precision: str, evaluate: bool,
                 checkpoints: Checkpointing | None) -> dict:
    """The end of a log window: its record (with the evaluation's scores, when one is due) written, the
    final model written where no evaluation picks it, the checkpoint saved when one is due (``checkpoints``).
    Returns the record."""
    record = run.metrics.close_window(run.optimizer.lr(), process.advice(precision))
    run.optimizer.check_loss_scale(run.step)
    if evaluate:
        with run.metrics.evaluating(" + ".join(source.label for source in run.selection.sources)):
            record.update(run.selection.evaluate(run.step))
    run.metrics.write(record)
    if run.position.last and not run.selection.selects and process.main:  # no evaluation: the final model is the
        run.selection.write_model()  # last step's, written before its checkpoint
    if checkpoints is not None:
        run.save(checkpoints)
    run.metrics.restart_window()
    return record
