"""metrics.jsonl -> TensorBoard event files."""
from __future__ import annotations

import sys

import pytest

from cselab.experiments import ExperimentError
from cselab.experiments.runs import find_runs


def test_events_hold_every_numeric_metric(fake_sweep, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard package is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from cselab.experiments.tensorboard import write_events

    runs = find_runs([fake_sweep / "una"])
    for _ in range(2):  # a second conversion replaces the first
        counts = write_events(runs, tmp_path / "tb")
    run = next(r for r in runs if r.seed == 0)
    events = EventAccumulator(str(tmp_path / "tb" / "una" / "seed-0"))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"train/loss", "train/lr", "train/stsb_dev"}
    steps, dev = run.curve("stsb_dev")
    logged = events.Scalars("train/stsb_dev")
    assert [e.step for e in logged] == steps
    assert [e.value for e in logged] == pytest.approx(dev, rel=1e-6)
    assert len(events.Scalars("train/loss")) == len(run.metrics)
    assert counts["una/seed-0"] == sum(len([k for k in r if k != "step"]) for r in run.metrics)


def test_a_clear_error_without_tensorboard(monkeypatch, fake_sweep, tmp_path):
    from cselab.experiments.tensorboard import write_events

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    with pytest.raises(ExperimentError, match="pip install tensorboard"):
        write_events(find_runs([fake_sweep]), tmp_path / "tb")
