"""train.compile: auto (speed/compile_auto.py) compiles only when the run repays the compile, says so
with the measured warm-up, and keeps what it measured for the next run; speed_up's choices by device."""
from __future__ import annotations

import logging

import pytest
import torch

from cselab.config import ModelConfig, TrainConfig
from cselab.speed import compile_auto, compiles, speed_up
from cselab.speed.compile_auto import (
    DEFAULT_COMPILE_SECONDS,
    DEFAULT_SPEEDUP,
    TIMED_STEPS,
    WARMUP_STEPS,
    CompileCost,
    CompileWhenRepaid,
)
from cselab.train.host_syncs import HostSyncCounter


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test starts on a machine that has measured no compile."""
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Run:
    """An encoder, its optimizer and a clock: each step is one training forward (with the batch's token
    count, as train/steps.py passes it), then ``seconds`` on the clock, then the optimizer's update."""

    def __init__(self, encoder, remaining_steps=None, compiled=False):
        self.encoder, self.clock, self.compiles = encoder, Clock(), 0
        self.optimizer = torch.optim.SGD(encoder.parameters(), lr=0.0)
        self.features = encoder.tokenize(["a cat sat on the mat", "dogs run"])
        self.tokens = int(self.features["attention_mask"].sum())  # the collator's count, on the host
        self.policy = CompileWhenRepaid(encoder, self.compile_now, "test-key", compiled=compiled,
                                        remaining_steps=remaining_steps, clock=self.clock)

    def compile_now(self):
        self.compiles += 1

    def step(self, seconds: float):
        self.encoder.train()
        with torch.no_grad():
            self.encoder(self.features, real_tokens=self.tokens)
        self.clock.now += seconds
        self.optimizer.step()

    def evaluate(self, seconds: float):
        self.encoder.encode(["an evaluation"])
        self.clock.now += seconds


def test_a_short_run_is_not_compiled_and_says_so(tiny_encoder, caplog):
    run = Run(tiny_encoder, remaining_steps=100)
    with caplog.at_level(logging.INFO, logger="cselab.speed"):
        for _ in range(100):
            run.step(0.1)
    # 92 steps left at 0.1 s, a third of them saved: ~3 s, far from a 2-minute compile
    assert run.compiles == 0 and run.policy.state == "eager for good"
    (record,) = [r for r in caplog.records if "train.compile auto" in r.getMessage()]
    message = record.getMessage()
    assert message.startswith("train.compile auto: not compiling: the run's 92 remaining steps at 0.100 s/step")
    assert "the default: no compile measured on this machine yet" in message


def test_a_long_run_is_compiled_after_the_timed_steps_and_its_warm_up_measured(tiny_encoder, caplog):
    run = Run(tiny_encoder, remaining_steps=10_000)
    with caplog.at_level(logging.INFO, logger="cselab.speed"):
        for _ in range(WARMUP_STEPS + TIMED_STEPS):
            run.step(0.3)
        assert run.compiles == 1 and run.policy.state == "compiling"
        run.step(40.0)  # the step that compiles
        for _ in range(TIMED_STEPS):
            run.step(0.2)
    assert run.compiles == 1 and run.policy.state == "compiled"
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("train.compile auto: compiling after step 8: the run's 9992 remaining steps at "
                                  "0.300 s/step eager save ~")
    assert messages[1].startswith("train.compile: warm-up 39.8 s measured (the compiling step took 40.0 s, then "
                                  "0.200 s/step compiled, eager 0.300 s/step: 1.50x)")
    assert CompileCost.load("test-key") == CompileCost(39.8, 1.5, True)
    # the next run's decision uses this machine's figures
    again = Run(tiny_encoder, remaining_steps=300)
    assert again.policy.cost == CompileCost(39.8, 1.5, True)


def test_without_the_run_length_it_compiles_once_eager_steps_have_cost_a_compile(tiny_encoder):
    """Rent or buy: with the default 2-minute compile and speed-up, compiling pays once the eager steps'
    extra time over compiled steps reaches 120 s."""
    run = Run(tiny_encoder)
    period = 1.0
    extra_per_step = period * (1 - 1 / DEFAULT_SPEEDUP)
    needed = int(DEFAULT_COMPILE_SECONDS / extra_per_step) + 1
    for _ in range(needed - 1):
        run.step(period)
    assert run.compiles == 0
    run.step(period)
    assert run.compiles == 1


def test_steps_with_an_evaluation_are_not_timed(tiny_encoder):
    run = Run(tiny_encoder, remaining_steps=10_000)
    for _ in range(WARMUP_STEPS + TIMED_STEPS - 1):
        run.step(0.5)
        run.evaluate(30.0)  # every step evaluated: none is timed
    assert run.policy.eager == [] and run.compiles == 0


def test_the_hooks_go_once_the_choice_is_made(tiny_encoder):
    from torch.optim.optimizer import _global_optimizer_post_hooks

    before = len(_global_optimizer_post_hooks)
    run = Run(tiny_encoder, remaining_steps=10)
    assert len(_global_optimizer_post_hooks) == before + 1
    for _ in range(WARMUP_STEPS + TIMED_STEPS + 1):
        run.step(0.1)
    assert run.policy.state == "eager for good"
    assert len(_global_optimizer_post_hooks) == before and not tiny_encoder._forward_pre_hooks


def test_another_optimizer_is_not_timed(tiny_encoder):
    run = Run(tiny_encoder, remaining_steps=10_000)
    other = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    run.step(0.1)
    for _ in range(20):
        other.step()
    assert run.policy.steps == 1


def test_the_timing_makes_no_host_sync(tiny_encoder):
    run = Run(tiny_encoder, remaining_steps=10_000)
    with HostSyncCounter() as counter:
        for _ in range(WARMUP_STEPS + TIMED_STEPS + 2):
            run.step(0.1)
    assert counter.total == 0, dict(counter.counts)


def test_a_damaged_cache_means_the_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path))
    (tmp_path / compile_auto.CACHE).write_text('{"k": {"seconds": "soon", "speedup": -1}, "j": 5')
    assert CompileCost.load("k") == CompileCost(DEFAULT_COMPILE_SECONDS, DEFAULT_SPEEDUP, False)
    (tmp_path / compile_auto.CACHE).write_text('{"k": {"seconds": "soon", "speedup": -1}}')
    assert CompileCost.load("k") == CompileCost(DEFAULT_COMPILE_SECONDS, DEFAULT_SPEEDUP, False)
    (tmp_path / compile_auto.CACHE).write_text('{"k": {"seconds": 12.5}}')  # a warm-up without a speed-up
    assert CompileCost.load("k") == CompileCost(12.5, DEFAULT_SPEEDUP, True)


@pytest.mark.parametrize("setting, device, expected", [
    ("auto", "cpu", False), ("auto", "cuda", True), ("true", "cpu", True), ("false", "cuda", False),
    ("reduce-overhead", "cpu", True)])
def test_which_settings_compile_where(setting, device, expected):
    assert compiles(setting, torch.device(device)) is expected


def test_the_cpu_default_is_the_eager_unpadded_forward_as_before(tiny_encoder):
    """On a CPU auto compiles nothing: fast dropout, unpadded layers, eager (the pinned figures stand)."""
    assert speed_up(tiny_encoder, TrainConfig(), ModelConfig(), torch.device("cpu")) is None
    assert tiny_encoder.unpadded and tiny_encoder.compiled_layers is None


def test_on_a_gpu_auto_unpads_and_waits_to_compile(tiny_encoder, monkeypatch):
    """model.unpad auto is on for a GPU too; train.compile auto times the steps before compiling. (The
    device is only named here: nothing runs on it.)"""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a test card")
    policy = speed_up(tiny_encoder, TrainConfig(), ModelConfig(), torch.device("cuda"))
    assert tiny_encoder.unpadded and tiny_encoder.compiled_layers is None
    assert isinstance(policy, CompileWhenRepaid) and policy.state == "eager"
    assert policy.key.startswith("a test card|torch ") and policy.key.endswith("|unpadded|default")
    policy.compile_now()
    assert tiny_encoder.compiled_layers is not None and tiny_encoder.compiled_layers.mode == "default"


def test_reduce_overhead_asks_for_cuda_graphs_on_a_gpu_only(tiny_encoder, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a test card")
    speed_up(tiny_encoder, TrainConfig(compile="reduce-overhead"), ModelConfig(), torch.device("cuda"))
    assert tiny_encoder.compiled_layers.mode == "reduce-overhead"


def test_a_model_that_cannot_be_unpadded_is_compiled_whole(tiny_encoder, monkeypatch):
    compiled = []
    monkeypatch.setattr(type(tiny_encoder.backbone), "compile", lambda self, **kwargs: compiled.append(kwargs))
    speed_up(tiny_encoder, TrainConfig(compile="true"), ModelConfig(unpad="false"), torch.device("cpu"))
    assert not tiny_encoder.unpadded and compiled == [{"dynamic": True, "mode": None}]
