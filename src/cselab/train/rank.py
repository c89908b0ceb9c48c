"""This training process among its peers (its rank context): its device, its rank and the work only
the main one does (printing, progress bars). Every part of the loop that acts differently on the main
process, or waits for the others, takes it (``process``)."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cselab.config import TrainConfig
from cselab.hardware import resolve_device
from cselab.train.distributed import from_main, join
from cselab.train.metrics import bars_allowed


@dataclass
class RankContext:
    """The device, rank and output directory of this process of the run, and its clock's start."""

    device: torch.device
    out_dir: Path
    rank: int = 0
    processes: int = 1
    main: bool = True
    bars: bool = True  # progress bars wanted (the main process draws them)
    started: float = field(default_factory=time.time)  # the run clock's start for this invocation

    @classmethod
    def start(cls, train: TrainConfig, bars: bool = True) -> RankContext:
        """Pick the device, join the other processes (torchrun, or any launcher that sets torch's
        environment variables: ``accelerate launch`` too) and seed."""
        from transformers import set_seed

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        device = resolve_device(train.device, "train.device")
        if device.type == "cuda":
            if device.index is not None:
                torch.cuda.set_device(device.index)
            # TF32 tensor cores for what runs in fp32 (the loss, fp32 runs): ~8x the fp32 rate, 10-bit mantissa.
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        device, rank, processes = join(device, train.dist_timeout_minutes)
        set_seed(train.seed)
        return cls(device, Path(train.output_dir), rank, processes, rank == 0, bars)

    def seed_per_rank(self, seed: int) -> None:
        """After the model is built (the same initial weights everywhere), each process draws its own
        dropout masks: seed + rank. A single process keeps the run's seed as it is."""
        if self.rank:
            from transformers import set_seed

            set_seed(seed + self.rank)

    def say(self, message: str) -> None:
        """A line for the user, on a line of its own: an open bar (a sweep's) is cleared and drawn again below."""
        if self.main:
            from tqdm.auto import tqdm

            tqdm.write(message)
            sys.stdout.flush()

    def barrier(self) -> None:
        if self.processes > 1:
            torch.distributed.barrier()

    def progress_bar(self, recipe: str, total: int, initial: int):
        if not (self.main and self.bars) or not bars_allowed():
            return None
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=f"train {recipe}", unit="step")

    def advice(self, precision: str) -> str:
        """What to do after a non-finite loss (a resume must keep the settings: a new run is the remedy)."""
        remedy = "lower optim.lr" + ("" if precision == "fp32" else " or use train.precision=fp32")
        return f"checkpoints and the best model so far stay in {self.out_dir}; {remedy} and run with --no-resume"


def on_main(process: RankContext, build, default):
    """``build()`` on the main process (``default`` on the others). What it raises (dev data missing
    or malformed) is raised on every process alike: none is left waiting in a collective for a main
    process that has stopped."""
    result, error = default, None
    if process.main:
        try:
            result = build()
        except (OSError, ValueError) as exc:
            error = exc
    error = from_main(error)
    if error is not None:
        raise error
    return result
