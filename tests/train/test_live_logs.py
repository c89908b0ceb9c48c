"""train.report_to: TensorBoard, wandb and Trackio get each log window's record while training runs."""
from __future__ import annotations

import json
import sys
import types

import pytest

from cselab.config import load_config
from cselab.errors import ConfigError
from cselab.train.loop import train
from tests.conftest import TINY_BERT


def _config(tmp_path, corpus, report_to: str, steps: int = 6, **extra):
    overrides = [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={corpus}", "optim.batch_size=8",
                 "optim.lr=5e-4", "train.eval_steps=0", "train.save_steps=0", "train.log_steps=2",
                 "train.precision=fp32", f"train.output_dir={tmp_path / 'run'}", f"optim.max_steps={steps}",
                 f"train.report_to={report_to}"]
    return load_config("simcse", overrides + [f"{k}={v}" for k, v in extra.items()])


def _records(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_tensorboard_event_file_holds_every_record_of_metrics_jsonl(tmp_path, tiny_corpus):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(_config(tmp_path, tiny_corpus, "[tensorboard]"), progress=False)
    records = _records(tmp_path / "run")
    assert [r["step"] for r in records] == [2, 4, 6]
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    for key in ("loss", "grad_norm", "lr", "infonce.acc", "window_seconds"):
        logged = events.Scalars(f"train/{key}")
        assert [e.step for e in logged] == [2, 4, 6], key
        assert [e.value for e in logged] == pytest.approx([r[key] for r in records], rel=1e-6), key
    assert "train/step" not in events.Tags()["scalars"]


class FakeTracker:
    """A stand-in for wandb and trackio: records calls, and checks at each ``log`` that metrics.jsonl
    already holds that step's record (the same window, written while training runs)."""

    def __init__(self, metrics_path):
        self.metrics_path, self.calls, self.finished = metrics_path, [], 0
        self.init_kwargs: dict = {}

    def init(self, **kwargs):
        self.init_kwargs = kwargs
        return self

    def log(self, values, step=None):
        last = _records_at(self.metrics_path)[-1]
        assert last["step"] == step and values["train/loss"] == last["loss"]
        assert not (self.metrics_path.parent / "summary.json").exists()  # training has not finished
        self.calls.append((step, dict(values)))

    def finish(self):
        self.finished += 1


def _records_at(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _stand_in(monkeypatch, name: str, tracker: FakeTracker) -> None:
    import accelerate  # noqa: F401  (first: it probes for wandb on import and must see the real absence)

    module = types.ModuleType(name)
    module.init, module.log, module.finish = tracker.init, tracker.log, tracker.finish
    monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("name", ["wandb", "trackio"])
def test_wandb_and_trackio_get_each_window_during_training_offline(tmp_path, tiny_corpus, monkeypatch, name):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("TRACKIO_SPACE_ID", raising=False)
    tracker = FakeTracker(tmp_path / "run" / "metrics.jsonl")
    _stand_in(monkeypatch, name, tracker)
    train(_config(tmp_path, tiny_corpus, f"[{name}]"), progress=False)
    assert [step for step, _ in tracker.calls] == [2, 4, 6]
    assert tracker.finished == 1
    assert tracker.init_kwargs["config"]["train"]["report_to"] == [name]
    if name == "wandb":
        assert tracker.init_kwargs["mode"] == "offline"
        assert tracker.init_kwargs["id"] == (tmp_path / "run" / "wandb-run-id").read_text().strip()


def test_a_resumed_run_continues_the_same_wandb_run(tmp_path, tiny_corpus, monkeypatch):
    import shutil

    first = FakeTracker(tmp_path / "run" / "metrics.jsonl")
    _stand_in(monkeypatch, "wandb", first)
    config = _config(tmp_path, tiny_corpus, "[wandb]", **{"train.save_steps": 2, "train.keep_checkpoints": 2})
    train(config, progress=False)
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "step-00000006")  # as if stopped after step 4's checkpoint
    (tmp_path / "run" / "summary.json").unlink()
    resumed = FakeTracker(tmp_path / "run" / "metrics.jsonl")
    _stand_in(monkeypatch, "wandb", resumed)
    train(config, progress=False)
    assert resumed.init_kwargs["id"] == first.init_kwargs["id"] and resumed.init_kwargs["resume"] == "allow"
    assert [step for step, _ in resumed.calls] == [6]
    fresh = FakeTracker(tmp_path / "run" / "metrics.jsonl")
    _stand_in(monkeypatch, "wandb", fresh)
    (tmp_path / "run" / "summary.json").unlink()
    train(config, resume=False, progress=False)
    assert fresh.init_kwargs["id"] != first.init_kwargs["id"]  # --no-resume starts a new run
    assert [step for step, _ in fresh.calls] == [2, 4, 6]


def test_unknown_or_missing_logger_is_a_one_line_config_error(monkeypatch):
    with pytest.raises(ConfigError, match=r"train\.report_to\[1\]: unknown logger 'tb' \(known: tensorboard, wandb, "
                                          r"trackio\)"):
        load_config("simcse", ["train.report_to=[tensorboard, tb]"])
    with pytest.raises(ConfigError, match=r"train\.report_to: names each logger once"):
        load_config("simcse", ["train.report_to=[tensorboard, tensorboard]"])
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.delitem(sys.modules, "wandb", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else find_spec(name, *a))
    with pytest.raises(ConfigError) as error:
        load_config("simcse", ["train.report_to=[wandb]"])
    assert str(error.value) == ("train.report_to[0]: wandb needs the wandb package; install it with "
                                "`pip install wandb`")


def test_a_tracker_that_cannot_start_stops_the_run_in_one_line(tmp_path, tiny_corpus, monkeypatch):
    from cselab.errors import TrainingError

    tracker = FakeTracker(tmp_path / "run" / "metrics.jsonl")

    def refuse(**kwargs):
        raise PermissionError("api key not configured")

    tracker.init = refuse
    _stand_in(monkeypatch, "wandb", tracker)
    with pytest.raises(TrainingError) as error:
        train(_config(tmp_path, tiny_corpus, "[tensorboard, wandb]"), progress=False)
    assert str(error.value) == ("train.report_to: wandb could not start (PermissionError: api key not configured); "
                                "remove it from train.report_to to train without it")
    metrics = tmp_path / "run" / "metrics.jsonl"
    assert not metrics.exists() or not metrics.read_text()  # stopped before any step
