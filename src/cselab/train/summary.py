"""The run's summary: summary.json, the lines printed at the end, and the model cards refreshed."""
from __future__ import annotations

import json
from pathlib import Path

from cselab.config import Config
from cselab.evaluate.dev import metric_class, metric_key
from cselab.hardware import PrecisionChoice
from cselab.model.card import write_run_cards
from cselab.run_files import SUMMARY
from cselab.train.checkpoint import write_json_atomic
from cselab.train.metrics import SLOW_LOADER, loader_hint
from cselab.train.rank import RankContext
from cselab.train.selection import better
from cselab.train.setup import TrainingSetup
from cselab.train.state import RunState


def summarize(process: RankContext, config: Config, setup: TrainingSetup, run: RunState,
              precision: PrecisionChoice) -> dict:
    """The run summary (written to summary.json by the main process). Re-running a finished run
    changes nothing: its summary is read back as it was written when it finished."""
    position, clock, total = run.position, run.clock, len(setup.plan)
    if position.resumed_from >= total and (finished := _finished_summary(process.out_dir / SUMMARY)):
        return finished
    seconds = clock.train_seconds
    summary = {
        "recipe": config.recipe,
        "base_model": None if config.model.from_config else config.model.name_or_path,  # None: random weights
        "output_dir": str(process.out_dir),
        "finished": position.step >= total,
        "steps": position.step,
        "total_steps": total,
        "corpus": setup.corpus_stats.to_dict(),
        "device": str(process.device),
        "precision": precision.to_dict(),
        "first_loss": run.metrics.first_loss,
        "final_loss": run.metrics.last_loss,
        "geometry": run.geometry.summary() if process.main else None,
        "select_on": list(config.train.select_on),
        # selected_by, best_stsb_dev, best_val_mlm_loss, best_step, base_stsb_dev; best_transfer_dev, ...
        **run.selection.summary(metric_key(config.train.select_on[0])),
        "train_seconds": round(seconds, 2),
        "sentences_per_second": round(position.sentences_seen / seconds, 2) if seconds else None,
        # What the loader's items are: a packed run's are blocks of max_seq_len tokens, not sentences.
        "throughput_unit": "block" if config.data.packing else "sentence",
        "wall_seconds": round(clock.wall_seconds(), 2),
        # Share of train_seconds spent waiting for batches (metrics.py); the first window holds the loader's start-up.
        "loader_wait": round(clock.loader_wait_seconds / seconds, 4) if seconds else None,
    }
    summary["worse_than_base"] = worse_than_base(summary, config.train.select_on[0])
    if summary["loader_wait"] is not None and summary["loader_wait"] > SLOW_LOADER:
        process.say(loader_hint(summary["loader_wait"]))
    if process.main:
        write_json_atomic(process.out_dir / SUMMARY, summary)
        write_run_cards(process.out_dir)  # the saved models' cards gain the training cost and the selection
    # Every process leaves together: a launcher stops the others as soon as one exits with a status
    # other than 0 (torchrun does on 3, a run stopped early), which could cut the main one's writing short.
    process.barrier()
    return summary


def worse_than_base(summary: dict, entry: str) -> bool:
    """Whether the selected model scores worse on its metric (``train.select_on``'s first ``entry``) than the
    model training started from: the printed summary and the card then say to use the start instead."""
    key = metric_key(entry)
    base, best = summary.get(f"base_{key}"), summary.get(f"best_{key}")
    if summary.get("selected_by") != key or base is None or best is None:
        return False
    return better(metric_class(entry).higher_is_better, base, best)  # the start beats the selected model


def _finished_summary(path: Path) -> dict | None:
    """The summary written when the run finished, if there is one (a kill can come before it is written)."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary if isinstance(summary, dict) and summary.get("finished") is True else None
