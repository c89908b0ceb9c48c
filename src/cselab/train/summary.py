"""The run's summary: summary.json, the lines printed at the end, and the model cards refreshed."""
from __future__ import annotations

import json
from pathlib import Path

from cselab.config import Config
from cselab.hardware import PrecisionChoice
from cselab.model.card import write_run_cards
from cselab.train import checkpoint as ckpt
from cselab.train.geometry import geometry_summary
from cselab.train.metrics import SLOW_LOADER, loader_hint
from cselab.train.parts import RunParts
from cselab.train.process import Process
from cselab.train.run_dir import RunState
from cselab.train.selection import BestModel


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
