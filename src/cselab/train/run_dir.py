"""A run's output directory: its lock, its resolved config and its resume point."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from cselab.config import Config
from cselab.errors import ConfigError, CselabError
from cselab.file_writes import write_text_atomically
from cselab.run_files import BEST_MODEL, CHECKPOINTS, KEPT_DIR, LOCK, METRICS, RUN_CONFIG
from cselab.sources import holder_is_gone, lock_holder
from cselab.train import checkpoint as ckpt
from cselab.train.distributed import from_main, gather_objects


@contextlib.contextmanager
def open_run(process, config: Config, resume: bool) -> Iterator[Path | None]:
    """The output directory, locked while the run lasts; yields the checkpoint to resume from
    (None = start over), after checking it belongs to this config.

    Starting over clears the directory's old checkpoints, metrics and ``best-METRIC/`` models, so a
    later resume (or ``cselab eval``) can never pick up what an earlier, different run left;
    resuming cuts the metrics back to the checkpoint's step. Only the main process looks (and writes,
    and sets broken checkpoints aside); it tells the others which checkpoint it resumes from
    (:func:`shared_resume_point`), so all of them start at its step or none does.
    A run that fails before its first checkpoint removes the directory if it created it.
    """
    out_dir = process.out_dir
    created = _first_missing(out_dir) if process.main else None
    try:
        with output_lock(out_dir) if process.main else contextlib.nullcontext():
            latest, error = None, None
            if process.main:
                try:
                    latest = _open_run(out_dir, config, resume)
                except (CselabError, OSError, ValueError) as exc:  # raised on every process below
                    error = exc
            yield shared_resume_point(process, latest, error)
    except BaseException:
        if created is not None and not ckpt.list_checkpoints(out_dir / CHECKPOINTS):
            shutil.rmtree(created, ignore_errors=True)
        raise


def shared_resume_point(process, latest: Path | None, error: BaseException | None = None) -> Path | None:
    """The main process's resume point (or its error) on every process. Each process reads the
    checkpoint's files itself (its own RNG state is in there), under its own ``train.output_dir``: on
    machines that do not share that directory a process cannot, and every process fails with one
    line naming the path, instead of one process starting over at step 0 beside the others."""
    if process.processes == 1:
        if error is not None:
            raise error
        return latest
    error, name = from_main((error, None if latest is None else latest.name))
    if error is not None:
        raise error
    if name is None:
        return None
    path = process.out_dir / CHECKPOINTS / name
    missing = None if process.main else _missing_files(path)
    problems = [(rank, what) for rank, what in enumerate(gather_objects(missing)) if what]
    if problems:
        rank, what = problems[0]
        raise ckpt.CheckpointError(f"{path}: process {rank} of {process.processes} cannot read {what} of the "
                                   f"checkpoint the main process resumes from; every machine needs the same "
                                   f"train.output_dir (a shared file system), or a copy of that checkpoint in it")
    return path


def _missing_files(path: Path) -> str | None:
    """What of checkpoint ``path`` this process cannot find (None: every file is there). Existence
    only: the main process has checked the digests."""
    try:
        names = list(json.loads((path / ckpt.MANIFEST).read_text()))
    except (OSError, ValueError):
        return ckpt.MANIFEST
    absent = [name for name in names if not (path / name).is_file()]
    return ", ".join(absent) or None


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet (what a failed run must remove)."""
    missing = None
    for candidate in (path.absolute(), *path.absolute().parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


@contextlib.contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """``OUT_DIR/.cselab-train.lock`` (pid, host, start time) while the block runs: a second run on
    the same directory is refused, naming the holder; a lock whose process has died is taken over."""
    _refuse_file_in_path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK
    mine = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    while True:
        try:
            with open(path, "x", encoding="utf-8") as handle:
                json.dump(mine, handle)
            break
        except FileExistsError:
            holder = lock_holder(path)
            if holder is not None and not holder_is_gone(holder):
                who = f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"
                raise ConfigError(f"{out_dir}: another training run is using this directory ({who}); wait for it, "
                                  f"use another train.output_dir, or delete {path} if that run is gone") from None
            path.unlink(missing_ok=True)  # a dead run's lock (or an unreadable one): taken over
    try:
        yield
    finally:
        if lock_holder(path) == mine:
            path.unlink(missing_ok=True)


def _refuse_file_in_path(out_dir: Path) -> None:
    """An existing file where the output folder (or a folder above it) would be: say so, and what goes there."""
    for candidate in (out_dir, *out_dir.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise ConfigError(f"train.output_dir: {candidate} is an existing file, not a folder; the output "
                                  f"directory is a folder for the model, metrics.jsonl, summary.json and checkpoints "
                                  f"(pass a new folder, or a run's to resume it)")
            return


def _open_run(out_dir: Path, config: Config, resume: bool) -> Path | None:
    checkpoint_dir = out_dir / CHECKPOINTS
    out_dir.mkdir(parents=True, exist_ok=True)
    latest = ckpt.latest_valid_checkpoint(checkpoint_dir) if resume else None
    if latest is None:
        for old in [*checkpoint_dir.glob("step-*"), *checkpoint_dir.glob(".step-*.tmp")]:
            shutil.rmtree(old, ignore_errors=True)
        (out_dir / METRICS).unlink(missing_ok=True)
        (out_dir / BEST_MODEL).unlink(missing_ok=True)
        for kept in out_dir.glob(KEPT_DIR.format(metric="*")):
            if kept.is_dir():  # an earlier run's further best models (derived) are never adopted nor left to load
                shutil.rmtree(kept, ignore_errors=True)
    else:
        state = ckpt.read_state(latest)
        ckpt.check_layout(latest, state)  # before its settings are compared (an older layout keeps them elsewhere)
        differing = ckpt.config_differences(state.get("config"), config.to_dict())
        if differing:
            changed = ckpt.describe_differences(state.get("config"), config.to_dict(), differing)
            raise ConfigError(f"{out_dir}: its checkpoint {latest.name} was made with a different "
                              f"{changed}; run with the same settings to resume, or pass --no-resume "
                              f"(or another train.output_dir) to start over")
        trim_metrics(out_dir / METRICS, ckpt.checkpoint_step(latest))
    ckpt.write_json_atomic(out_dir / RUN_CONFIG, config.to_dict())
    return latest


def trim_metrics(path: Path, last_step: int) -> None:
    """Keep the records up to ``last_step`` (the resume point), so a resumed run adds no duplicates."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            if json.loads(line)["step"] <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            pass  # a record cut short by the crash
    write_text_atomically(path, "".join(line + "\n" for line in kept))
