"""The data loader's size and the time training waits for it (loader_wait), and how a process joins
the others (torch.distributed with train.dist_timeout_minutes, no accelerate)."""
from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

import pytest
import torch

from cselab.config import ConfigError, load_config
from cselab.train import distributed
from cselab.train.metrics import SLOW_LOADER, MetricsLog, RunClock
from cselab.train.setup import MAX_AUTO_WORKERS, loader_workers
from cselab.train.state import LoaderPosition
from cselab.train.steps import StepResult
from tests.conftest import TINY_BERT


def _config(**train):
    return load_config("simcse", [f"train.{key}={value}" for key, value in train.items()])


@pytest.mark.parametrize(("cores", "local", "expected"), [
    (16, "1", MAX_AUTO_WORKERS),  # capped
    (16, "4", 3),  # 4 cores a process, one for the training loop
    (8, "8", 1),  # one core a process: still one worker, the loop must not build batches itself
    (6, "1", 5),
])
def test_auto_workers_are_the_cores_per_process_on_a_gpu(monkeypatch, cores, local, expected):
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: set(range(cores)), raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    assert loader_workers(_config().train, torch.device("cuda")) == expected
    assert loader_workers(_config().train, torch.device("cpu")) == 0  # workers would take the matmuls' cores
    assert loader_workers(_config(num_workers=3).train, torch.device("cuda")) == 3  # a number is kept as it is


class _Throughput:
    """Throughput's interface, without a model."""

    def add(self, real_tokens, padded_tokens):
        pass

    def record(self, seconds):
        return {}


class _Batch:
    real_tokens = padded_tokens = 1


def _slow(count: int, seconds: float):
    for i in range(count):
        time.sleep(seconds)
        yield i


def _window(log: MetricsLog, position: LoaderPosition, batches) -> dict:
    for _ in log.timed(batches):
        time.sleep(0.02)  # the "step"
        position.step += 1
        log.add(StepResult(torch.tensor(1.0), {}), torch.tensor(1.0), _Batch())
    return log.close_window(1e-5, "advice")


def test_loader_wait_is_the_share_of_the_window_spent_waiting_for_batches(caplog):
    state, clock = LoaderPosition(), RunClock()
    log = MetricsLog(3, state, clock, _Throughput())
    with log, caplog.at_level(logging.WARNING, logger="cselab.train"):
        log.restart_window()
        fast = _window(log, state, range(3))
        assert fast["loader_wait"] < 0.1
        slow = _window(log, state, _slow(3, 0.06))  # 3/4 of the window waits
        assert 0.5 < slow["loader_wait"] <= 1.0
        assert clock.loader_wait_seconds >= 0.18
        again = _window(log, state, _slow(3, 0.06))
    hints = [r.getMessage() for r in caplog.records if "loader_wait" in r.getMessage()]
    assert again["loader_wait"] > SLOW_LOADER
    assert len(hints) == 1 and "cselab augment" in hints[0] and "train.num_workers" in hints[0]  # said once


def test_the_first_window_holds_the_start_up_and_gets_no_hint(caplog):
    state = LoaderPosition()
    log = MetricsLog(3, state, RunClock(), _Throughput())
    with log, caplog.at_level(logging.WARNING, logger="cselab.train"):
        log.restart_window()
        first = _window(log, state, _slow(3, 0.06))
    assert first["loader_wait"] > SLOW_LOADER
    assert not [r for r in caplog.records if "loader_wait" in r.getMessage()]


def test_every_window_and_the_summary_report_loader_wait(tmp_path, tiny_corpus):
    from cselab.train.loop import train

    config = load_config("simcse", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}",
                                    "optim.batch_size=4", "optim.max_steps=4", "train.log_steps=2",
                                    "train.eval_steps=0", "train.save_steps=0", "train.precision=fp32",
                                    "train.num_workers=0", f"train.output_dir={tmp_path / 'run'}"])
    summary = train(config, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(0 < r["loader_wait"] < 1 for r in records)  # no workers: the loop builds them
    assert 0 < summary["loader_wait"] < 1


def test_processes_join_with_torch_distributed_and_the_configured_timeout(monkeypatch):
    calls = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: bool(calls))
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda backend, **kw: calls.append((backend, kw)))
    monkeypatch.setattr(distributed.dist, "get_rank", lambda: 1)
    monkeypatch.setattr(distributed.dist, "get_world_size", lambda: 2)
    device, rank, processes = distributed.join(torch.device("cpu"), 7.5)
    assert (device, rank, processes) == (torch.device("cpu"), 1, 2)
    assert calls == [("gloo", {"timeout": timedelta(minutes=7.5), "device_id": None})]


def test_one_process_started_alone_joins_nothing(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda *a, **k: pytest.fail("joined"))
    assert distributed.join(torch.device("cpu"), 30) == (torch.device("cpu"), 0, 1)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_no_positive_number_is_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match="train.dist_timeout_minutes"):
        _config(dist_timeout_minutes=value)
