"""When the loop saves (every ``save_steps``, every ``save_minutes`` by the main process's clock, at
the end, on a signal) and what a save hands the checkpoint writer: every component's state (the last
step's without AdamW's moments, unless ``train.keep_optimizer_state``)."""
from __future__ import annotations

import time

import torch

from cselab.config import TrainConfig
from cselab.errors import TrainingError
from cselab.run_files import CHECKPOINTS
from cselab.train.checkpoint import CheckpointDir, CheckpointWriter
from cselab.train.components import RunComponents
from cselab.train.distributed import from_main
from cselab.train.process import Process


class Checkpointing:
    """Saves every ``train.save_steps`` steps and every ``train.save_minutes`` minutes, whichever comes
    first (0 turns either off), and after the last step when one is on.

    The clock is read only where a log window closes, by the main process, and its answer is shared
    with the others (one small collective per window), so every process saves at the same step.
    ``manifest``: what describes the run beside its components (its config, its precision)."""

    def __init__(self, process: Process, train: TrainConfig, manifest: dict, writer: CheckpointWriter):
        self.process, self.manifest, self.writer = process, manifest, writer
        self.keep_optimizer_state = train.keep_optimizer_state
        self.steps, self.seconds = train.save_steps, train.save_minutes * 60
        self.directory = CheckpointDir(process.out_dir / CHECKPOINTS, train.keep_checkpoints)
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

    def save(self, run: RunComponents) -> None:
        """Hand this step's checkpoint to the writer (after the one it may still be writing): the loop
        waits for the host copy, not for the disk. Every process takes its components' states (the
        RNG streams' is collective); the main one writes them."""
        parameters = list(run.heads.trainable.parameters())
        if not bool(torch.stack([torch.isfinite(p).all() for p in parameters]).all()):
            raise TrainingError(f"step {run.step}: the weights are no longer finite; no checkpoint written. Resume "
                                f"from the last good checkpoint in {self.directory.directory} with a lower optim.lr")
        states = {name: component.state_dict() for name, component in run.by_name().items()}
        if run.position.last and not self.keep_optimizer_state:  # no update follows the last step
            states["optimizer"] = run.optimizer.state_dict(finished=True)
        if self.process.main:
            # The final model saved at this step (best so far, or the last step's) already holds the encoder.
            saved_model = self.process.out_dir / "model.safetensors"
            link = {"encoder": saved_model} if run.selection.saved_at(run.step, run.position.last) else None
            self.writer.wait()  # one host copy at a time: memory stays at one checkpoint's
            self.writer.save(self.directory.snapshot(states, {"step": run.step, **self.manifest}, link))
        self.process.barrier()
        self.last_save = time.monotonic()
