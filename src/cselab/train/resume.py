"""The start of a run: fresh components (with the starting model measured), or each one's state
from the last complete checkpoint; and the precision it trains in (kept in the checkpoint's
manifest, so a resumed run trains as it began)."""
from __future__ import annotations

from cselab.config import TrainConfig
from cselab.hardware import PrecisionChoice, choose_precision
from cselab.train.checkpoint import SavedRun, restore
from cselab.train.components import RunComponents
from cselab.train.distributed import from_main
from cselab.train.process import Process
from cselab.train.selection_setup import score_base


def start_or_resume(process: Process, run: RunComponents, saved: SavedRun | None,
                    known_base: dict[str, float] | None = None) -> None:
    """A fresh run measures its starting model (alignment and uniformity, the first selection metric;
    ``known_base``: {metric key: value} already measured in these settings); a resumed one restores
    every component and makes the best models on disk agree with the restored selection."""
    if saved is None:
        if process.main:
            run.geometry.measure_base()
        score_base(process, run.selection, known_base)
        return
    restore(run.by_name(), saved)
    if process.main:
        run.selection.reconcile(run.step)
    process.say(f"resuming from {saved.path} (step {run.step} of {run.position.total})")


def run_precision(process: Process, train: TrainConfig, hidden_size: int, saved: SavedRun | None) -> PrecisionChoice:
    """The run's precision: what ``auto`` chose when the run started (kept on resume), decided by the
    main process for all of them (a timing probe could differ between processes)."""
    if train.precision == "auto" and saved is not None and saved.manifest.get("precision"):
        return PrecisionChoice(saved.manifest["precision"], "auto", "chosen when the run started (resumed)")
    return from_main(choose_precision(train.precision, process.device, hidden_size) if process.main else None)
