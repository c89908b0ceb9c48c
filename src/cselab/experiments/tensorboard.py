"""Training metrics as TensorBoard event files, converted after the fact from each run's metrics.jsonl.

The training loop writes only JSON lines; this converter lets ``tensorboard --logdir DIR`` show the
same curves (one TensorBoard run per ``<recipe>/seed-<seed>``) without touching the loop.
"""
from __future__ import annotations

import math
from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.experiments.runs import Run


def summary_writer_class():
    """torch's SummaryWriter, which needs the ``tensorboard`` package; a one-line error without it."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        raise ExperimentError(f"--tensorboard needs the tensorboard package ({exc}); install it with "
                              f"`pip install tensorboard`") from None
    return SummaryWriter


def write_events(runs: list[Run], log_dir: str | Path) -> dict[str, int]:
    """Every numeric key of every metrics record as a scalar; returns scalars written per run."""
    writer_class = summary_writer_class()
    log_dir = Path(log_dir)
    counts = {}
    for run in runs:
        target = log_dir / run.recipe / f"seed-{run.seed}"
        # A second conversion replaces the first instead of doubling every curve.
        for old in target.glob("events.out.tfevents.*"):
            old.unlink()
        writer = writer_class(log_dir=str(target))
        written = 0
        try:
            for record in run.metrics:
                for key, value in record.items():
                    if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                        continue
                    if math.isfinite(value):
                        writer.add_scalar(f"train/{key}", value, global_step=record["step"])
                        written += 1
        finally:
            writer.close()
        counts[f"{run.recipe}/seed-{run.seed}"] = written
    return counts
