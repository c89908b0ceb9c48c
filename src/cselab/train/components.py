"""A run's stateful components, built once: what ``train()`` drives and what a checkpoint holds.

``by_name()`` is the checkpoint's layout, ``{name: component}``; saving takes each one's
``state_dict()`` and resuming gives each its own back (``checkpoint.restore``). The order is the
order of restoring: the loader position first, so a checkpoint of other data is refused before any
component has changed.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from cselab.config import Config
from cselab.data.corpus import corpus_fingerprint
from cselab.hardware import PrecisionChoice
from cselab.run_files import METRICS
from cselab.train.geometry import GeometryProbe
from cselab.train.live_logs import LiveLogs
from cselab.train.metrics import MetricsLog, Sinks
from cselab.train.optimizer import OptimizerStep, gradient_scaler, make_optimizer
from cselab.train.parts import RunParts
from cselab.train.process import Process
from cselab.train.run_state import EncoderWeights, HeadWeights, LoaderPosition, RngStreams, RunClock, Stateful
from cselab.train.selection import ModelSelection
from cselab.train.selection_setup import model_selection
from cselab.train.steps import StepForward
from cselab.train.throughput import Throughput
from cselab.train.validation import validation_for


@dataclass
class RunComponents:
    position: LoaderPosition
    encoder: EncoderWeights
    heads: HeadWeights
    optimizer: OptimizerStep
    rng: RngStreams
    clock: RunClock
    metrics: MetricsLog
    selection: ModelSelection
    geometry: GeometryProbe

    def by_name(self) -> dict[str, Stateful]:
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @property
    def step(self) -> int:
        return self.position.step


def build_components(process: Process, config: Config, parts: RunParts, precision: PrecisionChoice,
                     forward: StepForward) -> RunComponents:
    """Every component in its starting state (a resumed run then loads each one's saved state)."""
    optimizer, scheduler = make_optimizer(parts.trainable, config.optim, len(parts.plan))
    update = OptimizerStep(optimizer, scheduler, list(parts.trainable.parameters()), config.optim.max_grad_norm,
                           gradient_scaler(precision.precision, process.device))
    position = LoaderPosition(corpus_fingerprint(parts.corpus), parts.vocabulary_sha256, config.data.corpus,
                              len(parts.plan))
    clock = RunClock(process.started)
    sinks = Sinks(process.out_dir / METRICS, lambda step: process.progress_bar(config.recipe, len(parts.plan), step),
                  lambda step: LiveLogs(config, process.out_dir, step)) if process.main else None
    metrics = MetricsLog(config.train.log_steps, position, clock,
                         Throughput(parts.encoder, precision.dtype, process.device.type, process.processes), sinks)
    selection = model_selection(process, config, parts, precision.precision,
                                validation_for(parts.validation, forward, process.main))
    return RunComponents(position, EncoderWeights(parts.encoder.backbone),
                         HeadWeights(parts.trainable, parts.encoder.backbone), update,
                         RngStreams(process.rank, process.processes), clock, metrics, selection,
                         GeometryProbe(config, parts.encoder, parts.corpus))
