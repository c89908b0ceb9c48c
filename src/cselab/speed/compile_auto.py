"""``train.compile: auto``: compile only once the run is long enough to repay the compile.

A compile costs a fixed time once (dynamo's trace and inductor's kernels: about two minutes for
BERT-base on an H100, docs/scaling.md) and saves a share of every later step. ``auto`` therefore
starts eager and times the steps on the host clock, at each update of the encoder's optimizer
(torch's optimizer step hook: the training loop needs no change), leaving out the first
:data:`WARMUP_STEPS` (cuBLAS handles, the allocator, the loader's start) and every step during which
the model was evaluated. After :data:`TIMED_STEPS` timed steps it compiles when the rest of the run
repays it:

* the run's remaining steps known (:meth:`CompileWhenRepaid.expect_steps`): when those steps x the
  eager step time x the share a compile saves reach the compile time; if they cannot, never (said
  once);
* not known: once the eager steps have cost as much more than compiled steps would as one compile
  costs (the rent-or-buy rule: whatever the run's length, at most twice the time of the better
  choice in hindsight).

The compile time and the speed-up are this machine's own, measured the last time it compiled this
model (``$CSELAB_CACHE/compile-warmup.json``); before any such measurement, the project's one
measurement (:data:`DEFAULT_COMPILE_SECONDS`, :data:`DEFAULT_SPEEDUP`). Once compiled, the warm-up is
measured (the first compiled step's time less a compiled step's), logged and kept for the next run;
``train.compile: true`` measures and keeps it the same way.

With several processes each decides on its own clock; they compute the same function either way.
The decisions and the warm-up are logged as warnings: the command line shows warnings only, and a run
that compiles mid-way (or will not) should say so.
"""
from __future__ import annotations

import logging
import statistics
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from cselab.hardware import read_measurements, write_measurement

log = logging.getLogger(__name__)

WARMUP_STEPS = 3
TIMED_STEPS = 5
# docs/scaling.md (H100, BERT-base at batch 512, torch.compile of the padded forward): a one-time
# compilation of about two minutes, then 60.4 ms/step against 89.4 eager. Used until this machine has
# measured its own.
DEFAULT_COMPILE_SECONDS = 120.0
DEFAULT_SPEEDUP = 89.4 / 60.4
CACHE = "compile-warmup.json"
_KEPT_INTERVALS = 64  # the median of the latest eager steps (the rent-or-buy rule keeps timing)


@dataclass
class CompileCost:
    """What a compile of one model costs and gains on one machine: measured there, else the defaults."""

    seconds: float  # the warm-up: the first compiled step less a compiled step
    speedup: float  # eager step time / compiled step time
    measured: bool  # the warm-up was measured on this machine

    @classmethod
    def load(cls, key: str) -> CompileCost:
        entry = read_measurements(CACHE).get(key)
        entry = entry if isinstance(entry, dict) else {}
        seconds, speedup = entry.get("seconds"), entry.get("speedup")
        measured = _positive(seconds)
        return cls(float(seconds) if measured else DEFAULT_COMPILE_SECONDS,
                   float(speedup) if _positive(speedup) else DEFAULT_SPEEDUP, measured)

    @staticmethod
    def store(key: str, seconds: float, speedup: float | None) -> None:
        """The warm-up measured, and the speed-up where eager steps were timed too (else the one kept)."""
        entry = read_measurements(CACHE).get(key)
        entry = dict(entry) if isinstance(entry, dict) else {}
        entry["seconds"] = round(seconds, 2)
        if speedup is not None:
            entry["speedup"] = round(speedup, 3)
        write_measurement(CACHE, key, entry)

    @property
    def source(self) -> str:
        return ("measured on this machine" if self.measured
                else "the default: no compile measured on this machine yet")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def cost_key(device_name: str, backbone: nn.Module, what: str, mode: str) -> str:
    """The machine, torch and the model shape a compile's cost belongs to."""
    config = getattr(backbone, "config", None)
    shape = "x".join(str(getattr(config, name, "?")) for name in
                     ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size"))
    return f"{device_name}|torch {torch.__version__}|{type(backbone).__name__} {shape}|{what}|{mode}"


class CompileWhenRepaid:
    """Times the training steps and calls ``compile_now`` when the run repays it (``compiled``: it was
    called already, ``train.compile: true``: only the warm-up is measured). Lives as long as the
    encoder (a forward pre-hook of it holds it); once it has nothing more to do, its hooks are removed
    at the encoder's next forward (torch iterates the optimizer hooks while calling them: one cannot
    go while they run), and the optimizer hook of an encoder that is gone does nothing.
    """

    def __init__(self, encoder: nn.Module, compile_now: Callable[[], None], key: str, *, compiled: bool = False,
                 remaining_steps: int | None = None, clock: Callable[[], float] = time.perf_counter):
        self.compile_now, self.key, self.clock = compile_now, key, clock
        self.cost = CompileCost.load(key)
        self.state = "compiling" if compiled else "eager"
        self.steps = 0  # updates seen
        self.remaining: int | None = None
        self._planned_at = 0
        self.eager: list[float] = []  # seconds of timed eager steps (the latest)
        self.compiled: list[float] = []
        self.first_compiled: float | None = None
        self._last: float | None = None
        self._evaluated = False
        self._finished = False
        self._parameter = next(encoder.parameters())
        self._optimizers: dict[int, bool] = {}
        self._forward_hook = encoder.register_forward_pre_hook(self._before_forward, with_kwargs=True)
        self_ref = weakref.ref(self)

        def after_update(optimizer, args, kwargs):
            policy = self_ref()
            if policy is not None and not policy._finished:
                policy._after_update(optimizer)

        self._update_hook = register_optimizer_step_post_hook(after_update)
        if remaining_steps is not None:
            self.expect_steps(remaining_steps)

    def expect_steps(self, remaining: int) -> None:
        """The run has ``remaining`` optimizer steps left from now."""
        self.remaining, self._planned_at = remaining, self.steps

    # -- the hooks ---------------------------------------------------------------------------
    def _before_forward(self, module: nn.Module, args, kwargs) -> None:
        if self._finished:
            self._update_hook.remove()
            self._forward_hook.remove()
            return
        # A training step's forward comes in training mode with its batch's token count (steps.py).
        if not (module.training and kwargs.get("real_tokens") is not None):
            self._evaluated = True  # an evaluation or a probe: this step's time is its too, not timed
        elif self._last is None:
            self._last, self._evaluated = self.clock(), False  # the first training step starts

    def _after_update(self, optimizer: torch.optim.Optimizer) -> None:
        mine = self._optimizers.get(id(optimizer))
        if mine is None:
            mine = self._optimizers[id(optimizer)] = any(
                p is self._parameter for group in optimizer.param_groups for p in group["params"])
        if not mine or self._last is None:
            return
        now = self.clock()
        seconds = None if self._evaluated else now - self._last
        self._last, self._evaluated = now, False
        self.steps += 1
        if seconds is not None:
            self._step_took(seconds)

    def _step_took(self, seconds: float) -> None:
        if self.state == "eager":
            if self.steps > WARMUP_STEPS:
                self.eager = [*self.eager, seconds][-_KEPT_INTERVALS:]
                if len(self.eager) >= TIMED_STEPS:
                    self._decide()
        elif self.first_compiled is None:
            self.first_compiled = seconds  # the step that compiled
        else:
            self.compiled.append(seconds)
            if len(self.compiled) >= TIMED_STEPS:
                self._measured()

    # -- the decision ------------------------------------------------------------------------
    def _decide(self) -> None:
        period = statistics.median(self.eager)
        saved_share = 1 - 1 / self.cost.speedup if self.cost.speedup > 1 else 0.0
        cost = f"a compile of ~{self.cost.seconds:.0f} s ({self.cost.source})"
        if self.remaining is not None:
            left = max(self.remaining - (self.steps - self._planned_at), 0)
            saving = left * period * saved_share
            if saving < self.cost.seconds:
                log.warning("train.compile auto: not compiling: the run's %d remaining steps at %.3f s/step eager "
                            "would save ~%.0f s at a %.2fx speed-up, less than %s", left, period, saving,
                            self.cost.speedup, cost)
                self._done()
                return
            reason = (f"the run's {left} remaining steps at {period:.3f} s/step eager save ~{saving:.0f} s at a "
                      f"{self.cost.speedup:.2f}x speed-up, more than {cost}")
        else:
            extra = self.steps * period * saved_share
            if extra < self.cost.seconds:
                return  # keep renting
            reason = (f"{self.steps} steps at {period:.3f} s/step eager have cost ~{extra:.0f} s more than compiled "
                      f"steps would at a {self.cost.speedup:.2f}x speed-up, as much as {cost}")
        log.warning("train.compile auto: compiling after step %d: %s", self.steps, reason)
        self.compile_now()
        self.state = "compiling"

    def _measured(self) -> None:
        compiled = statistics.median(self.compiled)
        warmup = max(self.first_compiled - compiled, 0.0)
        eager = statistics.median(self.eager) if self.eager else None
        speedup = eager / compiled if eager and compiled > 0 else None
        against = f", eager {eager:.3f} s/step: {speedup:.2f}x" if speedup else ""
        log.warning("train.compile: warm-up %.1f s measured (the compiling step took %.1f s, then %.3f s/step "
                    "compiled%s); kept for the next runs on this machine", warmup, self.first_compiled, compiled,
                    against)
        CompileCost.store(self.key, warmup, speedup)
        self._done()

    def _done(self) -> None:
        self.state = "compiled" if self.state == "compiling" else "eager for good"
        self._finished = True
