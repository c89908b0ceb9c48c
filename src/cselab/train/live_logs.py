"""Live training logs (``train.report_to``): each log window's record goes to TensorBoard, Weights &
Biases or Trackio as it is written to ``metrics.jsonl``, on the main process only.

Every numeric, finite value of the record is logged as ``train/<key>`` at the record's step (the same
tags as ``cselab report --tensorboard``, which converts finished runs). The libraries are optional
extras; ``config.validate`` names the missing one before any work. Offline by default where the
library has a mode for it: wandb runs with ``mode="offline"`` unless ``WANDB_MODE`` says otherwise
(``wandb sync`` uploads later), Trackio writes its local database unless ``TRACKIO_SPACE_ID`` names a
Space. A resumed run continues its own curves: TensorBoard drops the events logged after the
checkpoint it resumed from, and wandb and Trackio reopen the same run.
"""
from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

from cselab.config import Config
from cselab.config.validation import REPORT_TO
from cselab.errors import TrainingError

TENSORBOARD_DIR = "tensorboard"  # <output_dir>/tensorboard: tensorboard --logdir <output_dir>
WANDB_RUN_ID = "wandb-run-id"  # the wandb run a resumed training continues


def scalars(record: dict) -> dict[str, float]:
    """The record's loggable values as ``train/<key>``: numbers (not flags), finite, the step aside."""
    return {f"train/{key}": float(value) for key, value in record.items()
            if key != "step" and not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value)}


class TensorBoardLog:
    def __init__(self, config: Config, out_dir: Path, start_step: int):
        self.log_dir, self.start_step = out_dir / TENSORBOARD_DIR, start_step
        self.writer = None

    def open(self) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # After a resume, events past the checkpoint's step (logged before the interruption) are dropped.
        purge = self.start_step + 1 if self.start_step else None
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge)

    def log(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()  # live: visible at once, not after the writer's two-minute flush

    def close(self) -> None:
        self.writer.close()


class WandbLog:
    def __init__(self, config: Config, out_dir: Path, start_step: int):
        self.config, self.out_dir, self.start_step = config, out_dir, start_step
        self.run = None

    def run_id(self) -> str:
        """The id of this output directory's run: kept for a resumed training, new for a fresh one."""
        path = self.out_dir / WANDB_RUN_ID
        if self.start_step and path.is_file():
            return path.read_text(encoding="utf-8").strip()
        run_id = uuid.uuid4().hex[:12]
        path.write_text(run_id + "\n", encoding="utf-8")
        return run_id

    def open(self) -> None:
        import wandb

        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "cselab"), name=self.config.recipe,
                              dir=str(self.out_dir), config=self.config.to_dict(), id=self.run_id(), resume="allow",
                              mode=os.environ.get("WANDB_MODE", "offline"))

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()


class TrackioLog:
    def __init__(self, config: Config, out_dir: Path, start_step: int):
        self.config, self.out_dir, self.start_step = config, out_dir, start_step

    def open(self) -> None:
        import trackio

        # The run is named by its output directory, so that a resumed training logs into the same run.
        trackio.init(project=os.environ.get("TRACKIO_PROJECT", "cselab"), name=str(self.out_dir.resolve()),
                     config=self.config.to_dict(), resume="allow" if self.start_step else "never")

    def log(self, step: int, values: dict[str, float]) -> None:
        import trackio

        trackio.log(values, step=step)

    def close(self) -> None:
        import trackio

        trackio.finish()


REPORTERS = {"tensorboard": TensorBoardLog, "wandb": WandbLog, "trackio": TrackioLog}
assert tuple(REPORTERS) == REPORT_TO  # the names validation accepts are the loggers here


class LiveLogError(TrainingError):
    """A ``train.report_to`` tracker that could not start (the message names it and says why)."""


class LiveLogs:
    """The run's ``train.report_to`` loggers: opened when the metrics log opens, fed each record."""

    def __init__(self, config: Config, out_dir: Path, start_step: int):
        self.names = list(config.train.report_to)
        self.loggers = [REPORTERS[name](config, out_dir, start_step) for name in self.names]

    def open(self) -> None:
        for i, (name, logger) in enumerate(zip(self.names, self.loggers, strict=True)):
            try:
                logger.open()
            except Exception as exc:  # any library's own failure (login, disk, version) becomes one line
                for opened in self.loggers[:i]:
                    opened.close()
                raise LiveLogError(f"train.report_to: {name} could not start ({type(exc).__name__}: {exc}); "
                                   f"remove it from train.report_to to train without it") from None

    def log(self, record: dict) -> None:
        if self.loggers:
            values = scalars(record)
            for logger in self.loggers:
                logger.log(record["step"], values)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()
