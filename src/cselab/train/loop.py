"""The training recipe: config -> data -> model -> objective -> optimiser -> steps -> the final model.

Every method is this same loop with a different recipe: the views say which texts form a step, the
objective's terms say what is minimised. Each part lives in its own module of ``cselab.train``:
``parts`` builds the run, ``steps`` runs one step, ``optimizer`` updates the weights, ``metrics``
logs a window, ``selection`` keeps the best model, ``run_dir`` and ``checkpoint`` make it resumable,
``process`` knows the device and the other processes.
"""
from __future__ import annotations

from cselab.config import Config
from cselab.data.corpus import corpus_fingerprint
from cselab.hardware import choose_precision
from cselab.train.metrics import MetricsLog
from cselab.train.optimizer import OptimizerStep, gradient_scaler, make_optimizer
from cselab.train.parts import build_parts, make_loader
from cselab.train.process import Process, best_model_selection, save_checkpoint, summarize
from cselab.train.run_dir import METRICS, RunState, open_run, resume_state
from cselab.train.signals import stop_on_signals
from cselab.train.steps import StepForward, choose_step
from cselab.train.throughput import Throughput


def train(config: Config, resume: bool = True, progress: bool = True) -> dict:
    """Train as ``config`` says; returns the run summary (also written to summary.json)."""
    process = Process.start(config)
    latest = open_run(process.out_dir, config, resume, process.main)
    process.barrier()
    parts = build_parts(config, process.device, process.processes)
    process.seed_per_rank(config.train.seed)
    optimizer, scheduler = make_optimizer(parts.trainable, config, len(parts.plan))
    state = RunState(corpus_sha256=corpus_fingerprint(parts.corpus))
    if latest is not None:
        state = resume_state(latest, parts.trainable, optimizer, scheduler, state.corpus_sha256, config.data.corpus,
                             process.rank)
        process.say(f"resuming from {latest} (step {state.step} of {len(parts.plan)})")
    precision = choose_precision(config.train.precision, process.device, parts.encoder.hidden_size)
    update = OptimizerStep(optimizer, scheduler, list(parts.trainable.parameters()), config.optim.max_grad_norm,
                           gradient_scaler(precision.precision, process.device))
    state.restore_scaler(update.scaler)
    forward = StepForward(parts.encoder, parts.head, parts.objective, process.device, precision.precision)
    step = choose_step(forward, config.optim.grad_cache_chunk, process.processes, update.scale)
    selector = best_model_selection(process, config, parts.encoder, precision.precision, state)
    metrics = MetricsLog(process.out_dir / METRICS if process.main else None, state, config.train.log_steps,
                         Throughput(parts.encoder, precision.dtype, process.device.type, process.processes),
                         process.progress_bar(config.recipe, len(parts.plan), state.step) if progress else None)
    loader = make_loader(parts, config, state.step, process.rank, process.processes, process.device)
    parts.trainable.train()
    with stop_on_signals() as stop, metrics:
        for batch in loader:
            result = step(batch)
            grad_norm = update()
            state.step, last = batch.step + 1, batch.step + 1 == len(parts.plan)
            state.sentences_seen += batch.num_sentences * process.processes
            metrics.add(result, grad_norm, batch, update.overflow_is_fault)
            evaluate, save = selector.due(state.step, last), config.train.save_steps and (
                state.step % config.train.save_steps == 0 or last)
            if metrics.due(last) or evaluate or save or stop.requested:
                record = metrics.close_window(update.lr(), process.advice(precision.precision))
                if evaluate:
                    record["stsb_dev"] = selector.evaluate(state.step)
                    parts.trainable.train()
                metrics.write(record)
                if save or stop.requested:
                    save_checkpoint(process, parts, update, state, selector, config)
                metrics.restart_window()
            if last and selector.dev is None and process.main:
                parts.encoder.save(process.out_dir)  # no dev set: the final model is the last step's
            if stop.requested:
                process.say(f"\n{stop.signal_name}: stopped after step {state.step}; checkpoint saved. "
                            f"Run the same command again to resume.")
                break
    return summarize(process, config, parts, state, selector, precision)
