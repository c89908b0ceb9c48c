"""This training process among its peers: its device and rank, and the work only the main one does
(printing, model selection, checkpoints, the summary)."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cselab.config import Config
from cselab.data.corpus import corpus_fingerprint
from cselab.errors import TrainingError
from cselab.evaluate.dev import DevMetric, build_metric, find_senteval_dir, metric_class, metric_key
from cselab.hardware import PrecisionChoice, choose_precision, resolve_device
from cselab.model.card import write_run_cards
from cselab.model.encoder import SentenceEncoder
from cselab.train import checkpoint as ckpt
from cselab.train.distributed import gather_objects, join
from cselab.train.geometry import base_geometry, geometry_summary
from cselab.train.metrics import SLOW_LOADER, bars_allowed, loader_hint
from cselab.train.optimizer import OptimizerStep
from cselab.train.parts import RunParts
from cselab.train.run_dir import RunState, resume_state
from cselab.train.selection import KEPT_DIR, BestModel, KeptModel
from cselab.train.validation import ValidationMlm


@dataclass
class Process:
    device: torch.device
    out_dir: Path
    rank: int = 0
    processes: int = 1
    main: bool = True
    started: float = field(default_factory=time.time)
    first_step: int = 0  # the step this invocation started from (a resumed run's checkpoint step)
    wall_before: float = 0.0  # wall time of earlier invocations, up to their last checkpoint

    def wall_seconds(self) -> float:
        """Wall time of the whole run: earlier invocations (to their last checkpoint) plus this one."""
        return self.wall_before + time.time() - self.started

    @classmethod
    def start(cls, config: Config) -> Process:
        """Pick the device, join the other processes (torchrun, or any launcher that sets torch's
        environment variables: ``accelerate launch`` too) and seed."""
        from transformers import set_seed

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        device = resolve_device(config.train.device, "train.device")
        if device.type == "cuda":
            if device.index is not None:
                torch.cuda.set_device(device.index)
            # TF32 tensor cores for what runs in fp32 (the loss, fp32 runs): ~8x the fp32 rate, 10-bit mantissa.
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        device, rank, processes = join(device, config.train.dist_timeout_minutes)
        set_seed(config.train.seed)
        return cls(device, Path(config.train.output_dir), rank, processes, rank == 0)

    def seed_per_rank(self, seed: int) -> None:
        """After the model is built (the same initial weights everywhere), each process draws its own
        dropout masks: seed + rank. A single process keeps the run's seed as it is."""
        if self.rank:
            from transformers import set_seed

            set_seed(seed + self.rank)

    def say(self, message: str) -> None:
        if self.main:
            print(message, flush=True)

    def barrier(self) -> None:
        if self.processes > 1:
            torch.distributed.barrier()

    def progress_bar(self, recipe: str, total: int, initial: int):
        if not self.main or not bars_allowed():
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=f"train {recipe}", unit="step")

    def advice(self, precision: str) -> str:
        """What to do after a non-finite loss (a resume must keep the settings: a new run is the remedy)."""
        remedy = "lower optim.lr" + ("" if precision == "fp32" else " or use train.precision=fp32")
        return f"checkpoints and the best model so far stay in {self.out_dir}; {remedy} and run with --no-resume"


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


def on_main(process: Process, build, default):
    """``build()`` on the main process (``default`` on the others). What it raises (dev data missing
    or malformed) is raised on every process alike: none is left waiting in a collective for a main
    process that has stopped."""
    result, error = default, None
    if process.main:
        try:
            result = build()
        except (OSError, ValueError) as exc:
            error = exc
    if process.processes > 1:
        error = gather_objects(error)[0]
    if error is not None:
        raise error
    return result


def caller_stops(process: Process, on_evaluation, step: int, record: dict) -> bool:
    """``on_evaluation(step, record)`` on the main process (whose record holds the dev scores); its answer
    is shared, so every process stops at the same step."""
    stop = bool(on_evaluation(step, record)) if process.main else None
    return bool(gather_objects(stop)[0]) if process.processes > 1 else stop


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


def start_or_resume(process: Process, latest: Path | None, parts: RunParts, optimizer, scheduler,
                    config: Config) -> RunState:
    """A fresh run's state, or the state of the checkpoint ``latest`` with everything restored."""
    fingerprint = corpus_fingerprint(parts.corpus)
    if latest is None:
        state = RunState(corpus_sha256=fingerprint, vocabulary_sha256=parts.vocabulary_sha256)
        if process.main:  # the starting model, measured before it trains
            state.base_geometry = base_geometry(config, parts.encoder, parts.corpus)
        return state
    state = resume_state(latest, parts.trainable, optimizer, scheduler, fingerprint, config.data.corpus, process.rank,
                         parts.vocabulary_sha256)
    process.first_step, process.wall_before = state.step, state.wall_seconds
    process.say(f"resuming from {latest} (step {state.step} of {len(parts.plan)})")
    return state


def run_precision(process: Process, config: Config, hidden_size: int, state: RunState) -> PrecisionChoice:
    """The run's precision: what ``auto`` chose when the run started (kept on resume), decided by the
    main process for all of them (a timing probe could differ between processes)."""
    if config.train.precision == "auto" and state.precision:
        choice = PrecisionChoice(state.precision, "auto", "chosen when the run started (resumed)")
    else:
        choice = gather_objects(choose_precision(config.train.precision, process.device, hidden_size)
                                if process.main else None)[0]
    state.precision = choice.precision
    return choice


class SaveSchedule:
    """When a checkpoint is due: every ``train.save_steps`` steps and every ``train.save_minutes``
    minutes, whichever comes first (0 turns either off), and after the last step when one is on.

    The clock is read only where a log window closes, by the main process, and its answer is shared
    with the others (one small collective per window), so every process saves at the same step."""

    def __init__(self, config: Config, process: Process):
        self.steps, self.seconds = config.train.save_steps, config.train.save_minutes * 60
        self.process = process
        self.last_save = time.monotonic()

    def due(self, step: int, last: bool, window: bool) -> bool:
        if self.steps and (step % self.steps == 0 or last):
            return True
        if not self.seconds or not (last or window):
            return False
        if last:
            return True
        late = time.monotonic() - self.last_save >= self.seconds if self.process.main else None
        return bool(gather_objects(late)[0]) if self.process.processes > 1 else late

    def saved(self) -> None:
        self.last_save = time.monotonic()


def save_checkpoint(process: Process, parts: RunParts, update: OptimizerStep, state: RunState, selector: BestModel,
                    config: Config, writer: ckpt.CheckpointWriter) -> None:
    """Hand this step's checkpoint to ``writer`` (after the one it may still be writing): the loop
    waits for the host copy, not for the disk. What must be collective happens here, on every process."""
    parameters = list(parts.trainable.parameters())
    if not bool(torch.stack([torch.isfinite(p).all() for p in parameters]).all()):
        raise TrainingError(f"step {state.step}: the weights are no longer finite; no checkpoint written. Resume "
                            f"from the last good checkpoint in {process.out_dir / 'checkpoints'} with a lower optim.lr")
    rank_rng = gather_objects(ckpt.rng_state()) if process.processes > 1 else None  # every process's dropout RNG
    if process.main:
        state.best_dev, state.best_step = selector.best_dev, selector.best_step
        state.kept_best = selector.kept_record()
        state.grad_scaler = None if update.scaler is None else update.scaler.state_dict()
        state.wall_seconds = process.wall_seconds()
        # The final model saved at this step (best so far, or the last step's) already holds the encoder.
        final_now = selector.best_step == state.step or (not selector.selects and state.step == len(parts.plan))
        writer.wait()  # one host copy at a time: memory stays at one checkpoint's
        writer.save(ckpt.snapshot(process.out_dir / "checkpoints", state.step, parts.trainable, update.optimizer,
                                  update.scheduler, state.trainer_dict(), config.to_dict(), rank_rng,
                                  backbone=parts.encoder.backbone, keep=config.train.keep_checkpoints,
                                  saved_backbone=process.out_dir / "model.safetensors" if final_now else None))
    process.barrier()


def summarize(process: Process, config: Config, parts: RunParts, state: RunState, selector: BestModel,
              precision: PrecisionChoice) -> dict:
    """The run summary (written to summary.json by the main process). Re-running a finished run
    changes nothing: its summary is read back as it was written when it finished."""
    total = len(parts.plan)
    if process.first_step >= total and (finished := _finished_summary(process.out_dir / "summary.json")):
        return finished
    summary = {
        "recipe": config.recipe,
        "output_dir": str(process.out_dir),
        "finished": state.step >= total,
        "steps": state.step,
        "total_steps": total,
        "corpus": parts.corpus_stats.to_dict(),
        "device": str(process.device),
        "precision": precision.to_dict(),
        "first_loss": state.first_loss,
        "final_loss": state.last_loss,
        "geometry": geometry_summary(config, parts.encoder, parts.corpus, state.base_geometry if process.main else {}),
        f"base_{selector.dev_key}": state.base_dev,  # the first metric before training (base_stsb_dev)
        "select_on": list(config.train.select_on),
        **selector.summary(),  # selected_by, best_stsb_dev, best_val_mlm_loss, best_step; best_transfer_dev, ...
        "train_seconds": round(state.train_seconds, 2),
        "sentences_per_second": round(state.sentences_seen / state.train_seconds, 2) if state.train_seconds else None,
        "wall_seconds": round(process.wall_seconds(), 2),
        # Share of train_seconds spent waiting for batches (metrics.py); the first window holds the loader's start-up.
        "loader_wait": round(state.loader_wait_seconds / state.train_seconds, 4) if state.train_seconds else None,
    }
    if summary["loader_wait"] is not None and summary["loader_wait"] > SLOW_LOADER:
        process.say(loader_hint(summary["loader_wait"]))
    if process.main:
        ckpt.write_json_atomic(process.out_dir / "summary.json", summary)
        write_run_cards(process.out_dir)  # the saved models' cards gain the training cost and the selection
    # Every process leaves together: a launcher stops the others as soon as one exits with a status
    # other than 0 (torchrun does on 3, a run stopped early), which could cut the main one's writing short.
    process.barrier()
    return summary


def _finished_summary(path: Path) -> dict | None:
    """The summary written when the run finished, if there is one (a kill can come before it is written)."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and summary.get("finished") is True else None
