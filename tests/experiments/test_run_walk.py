"""Reading run directories while a sweep writes them: checkpoint folders are not walked, and a
folder that vanishes mid-walk (a checkpoint rotated away, a run restarted) does not stop a report."""
from __future__ import annotations

import os

import pytest

from cselab.experiments.runs import files_outside_checkpoints, run_directories
from cselab.run_files import RUN_CONFIG


def make_runs(root):
    for recipe in ("simcse", "una"):
        run = root / recipe / "seed-42"
        (run / "checkpoints" / "step-00000025").mkdir(parents=True)
        (run / RUN_CONFIG).write_text("{}")
        (run / "model.safetensors").write_text("w")
        (run / "checkpoints" / "step-00000025" / RUN_CONFIG).write_text("{}")  # a checkpoint's copy
    (root / "logs").mkdir()


def test_run_directories_are_found_without_entering_checkpoints(tmp_path, monkeypatch):
    make_runs(tmp_path)
    entered = []
    real = os.scandir

    def recording(path="."):
        entered.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", recording)
    assert run_directories(tmp_path) == [tmp_path / "simcse" / "seed-42", tmp_path / "una" / "seed-42"]
    assert not any("checkpoints" in path for path in entered)


def failing_on(monkeypatch, folder: str, error: OSError) -> None:
    """os.scandir raises ``error`` for paths ending in ``folder`` (as if it vanished, or its disk failed)."""
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith(folder):
            raise error
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_folder_vanishing_mid_walk_is_passed_over(tmp_path, monkeypatch):
    make_runs(tmp_path)
    failing_on(monkeypatch, "una", FileNotFoundError(2, "No such file or directory"))
    assert run_directories(tmp_path) == [tmp_path / "simcse" / "seed-42"]
    from cselab.experiments.sweep import model_fingerprint

    model_fingerprint(tmp_path)  # the sweep's weight fingerprint walks the same way


def test_other_errors_during_the_walk_are_raised(tmp_path, monkeypatch):
    make_runs(tmp_path)
    failing_on(monkeypatch, "una", OSError(5, "Input/output error"))
    with pytest.raises(OSError, match="Input/output"):
        list(files_outside_checkpoints(tmp_path))


def test_the_weight_fingerprint_is_the_one_stored_evaluations_were_keyed_by(tmp_path):
    """The sweep's fingerprint of a run must not change with how the folder is walked, or every
    stored evaluation would be redone: here it equals the formula before the walk was shared."""
    import hashlib
    import json

    from cselab.experiments.sweep import model_fingerprint

    make_runs(tmp_path)
    run = tmp_path / "una" / "seed-42"
    for name in ("best-transfer_dev/model.safetensors", "checkpoints/step-00000025/model.safetensors",
                 "1_Pooling/a.safetensors", ".hidden.safetensors"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(name)
    (run / "best_model.json").write_text('{"step": 25}')
    before = [[str(f.relative_to(run)), f.stat().st_size, f.stat().st_mtime_ns]
              for f in sorted(run.rglob("*.safetensors")) if "checkpoints" not in f.relative_to(run).parts]
    before.append('{"step": 25}')
    assert model_fingerprint(run) == hashlib.sha256(json.dumps(before).encode()).hexdigest()


def test_a_file_named_as_runs_is_a_one_line_error(tmp_path):
    from cselab.experiments import ExperimentError
    from cselab.experiments.runs import find_runs

    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ExperimentError, match="report.json: not a run directory"):
        find_runs([tmp_path / "report.json"])
