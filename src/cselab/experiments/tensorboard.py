"""Training metrics as TensorBoard event files, converted after the fact from each run's metrics.jsonl.

Runs trained without ``train.report_to: [tensorboard]`` (which writes the events live) have JSON lines
only; this converter lets ``tensorboard --logdir DIR`` show the same curves (one TensorBoard run per
``<recipe>/seed-<seed>``), under the same tags.
"""
from __future__ import annotations

from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.experiments.runs import Run
from cselab.train.live_logs import scalars


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
                for tag, value in scalars(record).items():  # the tags train.report_to logs live
                    writer.add_scalar(tag, value, global_step=record["step"])
                    written += 1
        finally:
            writer.close()
        counts[f"{run.recipe}/seed-{run.seed}"] = written
    return counts
