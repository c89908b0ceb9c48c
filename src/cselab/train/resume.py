"""The start of a run: a fresh state or the one its last complete checkpoint holds, and the precision
it trains in (kept in the state, so a resumed run trains as it began)."""
from __future__ import annotations

from pathlib import Path

from cselab.config import Config
from cselab.data.corpus import corpus_fingerprint
from cselab.hardware import PrecisionChoice, choose_precision
from cselab.train.distributed import from_main
from cselab.train.geometry import base_geometry
from cselab.train.parts import RunParts
from cselab.train.process import Process
from cselab.train.run_dir import RunState, resume_state


def start_or_resume(process: Process, latest: Path | None, parts: RunParts, optimizer, scheduler,
                    config: Config) -> RunState:
    """A fresh run's state, or the state of the checkpoint ``latest`` with everything restored."""
    fingerprint = corpus_fingerprint(parts.corpus)
    if latest is None:
        state = RunState(corpus_sha256=fingerprint, vocabulary_sha256=parts.vocabulary_sha256)
        if process.main:  # the starting model, measured before it trains
            state.base_geometry = base_geometry(config, parts.encoder, parts.corpus)
        return state
    state = resume_state(latest, parts.trainable, optimizer, scheduler, fingerprint, config.data.corpus, process.rank,
                         parts.vocabulary_sha256)
    process.first_step, process.wall_before = state.step, state.wall_seconds
    process.say(f"resuming from {latest} (step {state.step} of {len(parts.plan)})")
    return state


def run_precision(process: Process, config: Config, hidden_size: int, state: RunState) -> PrecisionChoice:
    """The run's precision: what ``auto`` chose when the run started (kept on resume), decided by the
    main process for all of them (a timing probe could differ between processes)."""
    if config.train.precision == "auto" and state.precision:
        choice = PrecisionChoice(state.precision, "auto", "chosen when the run started (resumed)")
    else:
        choice = from_main(choose_precision(config.train.precision, process.device, hidden_size)
                           if process.main else None)
    state.precision = choice.precision
    return choice
