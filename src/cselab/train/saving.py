"""When the loop saves (every ``save_steps``, every ``save_minutes`` by the main process's clock, at
the end, on a signal) and what a save hands the checkpoint writer."""
from __future__ import annotations

import time

import torch

from cselab.config import Config
from cselab.errors import TrainingError
from cselab.train import checkpoint as ckpt
from cselab.train.distributed import from_main, gather_objects
from cselab.train.optimizer import OptimizerStep
from cselab.train.parts import RunParts
from cselab.train.process import Process
from cselab.train.run_dir import RunState
from cselab.train.selection import BestModel


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
        return bool(from_main(late))

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
