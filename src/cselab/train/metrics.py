"""The training log: per-step values add up on the device and are read back once per log window.

Reading a GPU tensor makes the host wait for every queued kernel; doing it for each loss, accuracy
and finite check of every step leaves a small model launch-bound. Here a step only adds its
(detached) loss, term logs and gradient norm into device tensors, and marks the first step whose
loss or gradient norm was not finite. ``close_window`` reads it all back in one transfer, raises
:class:`~cselab.errors.TrainingError` naming the first non-finite step, and returns the window's
record (means over its steps) for ``metrics.jsonl``. The loop closes the window before every
evaluation and checkpoint, so no checkpoint or best model is written from a non-finite state.

``loader_wait`` is the share of a window's wall time the loop spent waiting for its next batch (the
loader's workers, or with none the main process, building views, tokens and masks). On a GPU it is
host time: while the GPU still runs queued steps, a wait costs nothing, so it reads high only when
the batches cannot keep up with the GPU.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from cselab.data.collate import Batch
from cselab.errors import TrainingError
from cselab.train.steps import StepResult
from cselab.train.throughput import Throughput

log = logging.getLogger("cselab.train")

SLOW_LOADER = 0.2  # a loader_wait above this share gets a hint


def loader_hint(share: float) -> str:
    return (f"loader_wait {share:.0%}: training waits that long for its batches; cache the augmentations with "
            f"`cselab augment` (read back by the `cached` augmenter) or raise train.num_workers")


class StepCount(Protocol):
    """Where the run is: its steps done (``state.LoaderPosition``)."""

    step: int


class RunClock:
    """Training time (the log windows' wall time, evaluations and checkpoints left out), of it the
    time spent waiting for batches, and the run's wall time over every invocation (each up to its
    last checkpoint). A component of the run's state (``state.RunState``)."""

    def __init__(self, started: float | None = None):
        self.train_seconds = self.loader_wait_seconds = self.wall_before = 0.0
        self.started = time.time() if started is None else started  # this invocation's start (RankContext.start)

    def trained(self, seconds: float, waited: float) -> None:
        self.train_seconds += seconds
        self.loader_wait_seconds += waited

    def wall_seconds(self) -> float:
        return self.wall_before + time.time() - self.started

    def state_dict(self) -> dict[str, float]:
        return {"train_seconds": self.train_seconds, "loader_wait_seconds": self.loader_wait_seconds,
                "wall_seconds": self.wall_seconds()}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.train_seconds, self.loader_wait_seconds = state["train_seconds"], state["loader_wait_seconds"]
        self.wall_before = state["wall_seconds"]


@dataclass
class Sinks:
    """Where a window's record goes: ``metrics.jsonl`` (None: nowhere, on processes other than the main
    one), a progress bar and ``train.report_to``'s live loggers, each made when the log opens, at the
    step the run starts from (None: none)."""

    path: Path | None = None
    bar: Callable[[int], Any] | None = None  # step -> a tqdm bar
    live: Callable[[int], Any] | None = None  # step -> live_logs.LiveLogs


class MetricsLog:
    """The log windows of ``metrics.jsonl``; its state is the run's first and latest logged loss (the
    summary's first and final loss)."""

    def __init__(self, log_steps: int, position: StepCount, clock: RunClock, throughput: Throughput,
                 sinks: Sinks | None = None):
        self.log_steps, self.position, self.clock, self.throughput = log_steps, position, clock, throughput
        self.sinks = sinks or Sinks()
        self.file = self.bar = self.live = None
        self.first_loss: float | None = None
        self.last_loss: float | None = None
        self.windows = 0  # windows closed by this invocation (its first one holds the loader's start-up)
        self.hinted = False
        self._reset()

    def state_dict(self) -> dict:
        return {"first_loss": self.first_loss, "last_loss": self.last_loss}

    def load_state_dict(self, state: dict) -> None:
        self.first_loss, self.last_loss = state["first_loss"], state["last_loss"]

    def __enter__(self) -> MetricsLog:
        step = self.position.step
        self.file = open(self.sinks.path if self.sinks.path is not None else os.devnull, "a", encoding="utf-8")
        self.bar = None if self.sinks.bar is None else self.sinks.bar(step)
        self.live = None if self.sinks.live is None else self.sinks.live(step)
        if self.live is not None:
            self.live.open()
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()
        if self.live is not None:
            self.live.close()
        if self.bar is not None:
            self.bar.close()

    def _reset(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.steps = 0
        self.bad: torch.Tensor | None = None  # [first non-finite step, 1 = loss / 2 = gradient norm]
        self.waited = 0.0  # seconds spent waiting for batches in this window
        self.started = time.perf_counter()

    def timed(self, batches: Iterable) -> Iterator:
        """``batches`` as they come, the time spent waiting for each added to the window's ``loader_wait``."""
        iterator = iter(batches)
        while True:
            began = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self.waited += time.perf_counter() - began
            yield batch

    def add(self, result: StepResult, grad_norm: torch.Tensor, batch: Batch, overflow_is_fault: bool = True) -> None:
        """Account the step just finished (``position.step``); no host synchronisation. Without
        ``overflow_is_fault`` (fp16's scaler skips such updates) a non-finite gradient is no fault."""
        for name, value in {"loss": result.loss, **result.logs, "grad_norm": grad_norm}.items():
            value = value.detach().float()
            self.sums[name] = value if name not in self.sums else self.sums[name] + value
        grad_ok = torch.isfinite(grad_norm) | (not overflow_is_fault)
        kind = torch.where(torch.isfinite(result.loss), torch.where(grad_ok, 0, 2), 1)
        marked = torch.stack([torch.full_like(kind, self.position.step), kind])
        if self.bad is None:
            self.bad = torch.where(kind > 0, marked, torch.zeros_like(marked))
        else:
            self.bad = torch.where((self.bad[0] == 0) & (kind > 0), marked, self.bad)
        self.throughput.add(batch.real_tokens, batch.padded_tokens)
        self.steps += 1
        if self.bar is not None:
            self.bar.update(1)

    def due(self, last: bool) -> bool:
        return self.position.step % self.log_steps == 0 or last

    def close_window(self, lr: float, advice: str) -> dict:
        """Read the window back (one transfer), check it was finite, and return its record."""
        record: dict = {"step": self.position.step, "lr": lr}
        names = list(self.sums)
        values = torch.cat([torch.stack([self.sums[n] for n in names]), self.bad.float()]).tolist()
        *sums, bad_step, bad_kind = values
        if bad_step:
            what, at = "loss" if bad_kind == 1 else "gradient norm", self.position.step
            raise TrainingError(f"step {int(bad_step)}: {what} is not finite (found at step {at}, the end of its "
                                f"log window); no checkpoint or best model was written after it ({advice})")
        seconds = time.perf_counter() - self.started
        self.clock.trained(seconds, self.waited)
        record.update({n: v / self.steps for n, v in zip(names, sums, strict=True)})
        # The summary's first and final loss are the first and last logged windows: metrics.jsonl's lines.
        if self.first_loss is None:
            self.first_loss = record["loss"]
        self.last_loss = record["loss"]
        record["window_steps"], record["window_seconds"] = self.steps, round(seconds, 4)
        record["loader_wait"] = round(min(self.waited / seconds, 1.0), 4) if seconds > 0 else 0.0
        self.windows += 1
        if self.windows > 1 and record["loader_wait"] > SLOW_LOADER and not self.hinted:
            log.warning("step %d: %s", self.position.step, loader_hint(record["loader_wait"]))
            self.hinted = True
        record.update(self.throughput.record(seconds))
        self._reset()
        return record

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        if self.live is not None:  # the same record, as it is written (not converted afterwards)
            self.live.log(record)
        if self.bar is not None and "loss" in record:
            shown = {"loss": f"{record['loss']:.4g}"}
            if "stsb_dev" in record:
                shown["dev"] = f"{record['stsb_dev']:.2f}"
            self.bar.set_postfix(**shown)

    def restart_window(self) -> None:
        """Start the clock again after work that is not training (evaluation, checkpoints)."""
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def evaluating(self, label: str) -> Iterator[None]:
        """The bar says what runs while the model is evaluated (a frozen bar looks like a hang), and its
        s/step estimate leaves the evaluation's time out."""
        if self.bar is None:
            yield
            return
        self.bar.set_postfix_str(f"evaluating {label}...", refresh=True)
        try:
            yield
        finally:
            self.bar.unpause()  # tqdm's clock goes on from now: the evaluation is no step's time


def bars_allowed() -> bool:
    """Whether a progress bar may be drawn: a bar beside another one (a sweep's) moves the cursor with
    escape codes that a log file shows raw, so where stderr is no terminal only the outermost is drawn.
    (tqdm keeps its open bars in ``tqdm._instances``; it has no public way to ask.)"""
    from tqdm import tqdm

    return sys.stderr.isatty() or not getattr(tqdm, "_instances", None)
