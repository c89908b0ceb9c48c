"""The run's state: every part of a run that changes as it trains, each saving itself with
``state_dict()`` and resuming with ``load_state_dict()`` (torchtune's stateful components). A
checkpoint (``checkpoint.py``) is ``{name: component.state_dict()}`` with each component's
``version``; ``RunState`` holds the components and ``start_or_resume`` starts a run fresh or gives
every component its saved state back.

The components: ``position`` (where the loader is in the data, with the corpus and vocabulary
fingerprints), ``encoder`` and ``heads`` (the weights, split so the encoder's file can be the final
model's), ``optimizer`` (``optimizer.py``: AdamW, its schedule, fp16's loss scale), ``rng`` (every
process's generators), ``clock`` and ``metrics`` (``metrics.py``), ``selection`` (``selection.py``) and
``geometry`` (``geometry.py``), and those a loss term or token pass adds for state of its own
(``components()``: a momentum encoder, a queue of past embeddings), checkpointed under
``TERM.NAME``. The parts that belong to no other module are here: the weights, the RNG streams and
the loader's position.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import torch

from cselab.config import Config, TrainConfig
from cselab.data.corpus import corpus_fingerprint
from cselab.errors import ConfigError, TrainingError, counted
from cselab.hardware import PrecisionChoice, choose_precision
from cselab.run_files import METRICS
from cselab.train.checkpoint import Checkpointing, SavedRun, restore, version_of
from cselab.train.distributed import from_main, gather_objects
from cselab.train.geometry import GeometryProbe
from cselab.train.live_logs import LiveLogs
from cselab.train.metrics import MetricsLog, RunClock, Sinks
from cselab.train.optimizer import OptimizerStep, gradient_scaler, make_optimizer
from cselab.train.rank import RankContext
from cselab.train.selection import ModelSelection, model_selection, score_base
from cselab.train.setup import TrainingSetup
from cselab.train.steps import StepForward
from cselab.train.throughput import Throughput
from cselab.train.validation import validation_for


class Stateful(Protocol):
    """A component of the run's state. ``version`` (1 unless the class says otherwise) is raised when
    the layout of its state changes: a checkpoint holding another version of it is refused by name."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def backbone_prefix(trainable: torch.nn.Module, backbone: torch.nn.Module) -> str:
    name = next(name for name, module in trainable.named_modules() if module is backbone)
    return f"{name}." if name else ""


class EncoderWeights:
    """The backbone's weights under its own names: the layout of the saved model's file, so the
    checkpoint can link that file instead of a copy when both hold the same step's weights."""

    def __init__(self, backbone: torch.nn.Module):
        self.backbone = backbone

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.backbone.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.backbone.load_state_dict(state, strict=True)


class HeadWeights:
    """Every trainable weight outside the backbone (training head, MLP, MLM head, a term's own
    parameters). A tensor tied to one seen before (an MLM decoder tied to the word embeddings) is
    stored once: ``aliases`` names what it is tied to."""

    def __init__(self, trainable: torch.nn.Module, backbone: torch.nn.Module):
        self.trainable = trainable
        prefix = backbone_prefix(trainable, backbone)
        self.backbone_names = {prefix + name for name in backbone.state_dict()}

    def state_dict(self) -> dict[str, Any]:
        state = self.trainable.state_dict()
        seen = {tensor.data_ptr(): name for name, tensor in state.items() if name in self.backbone_names}
        tensors, aliases = {}, {}
        for name, tensor in state.items():
            if name in self.backbone_names:
                continue
            if tensor.data_ptr() in seen:
                aliases[name] = seen[tensor.data_ptr()]
            else:
                tensors[name] = tensor
                seen[tensor.data_ptr()] = name
        return {"tensors": tensors, "aliases": aliases}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Strict for what is not the backbone's: every other tensor must come from the checkpoint."""
        missing, unexpected = self.trainable.load_state_dict(state["tensors"], strict=False)
        missing = set(missing) - self.backbone_names - set(state["aliases"])
        if missing or unexpected:
            names = sorted(missing)[:3] or sorted(unexpected)[:3]
            raise KeyError(f"{'missing' if missing else 'unexpected'} weights {', '.join(names)}")


class RngStreams:
    """torch's (CPU and CUDA: dropout), Python's and NumPy's generators, of every process: each draws
    its own dropout masks, so each resumes its own stream. ``state_dict`` is collective (every
    process calls it); ``load_state_dict`` takes this process's."""

    def __init__(self, rank: int = 0, processes: int = 1):
        self.rank, self.processes = rank, processes

    def state_dict(self) -> dict[str, Any]:
        mine = rng_state()
        return {"ranks": gather_objects(mine) if self.processes > 1 else [mine]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Refused (on every process alike) when the checkpoint was saved by another number of processes:
        the global batch is ``batch_size`` x processes, so the step plan would not be the same."""
        ranks = state["ranks"]
        if len(ranks) != self.processes:
            raise ConfigError(f"saved by {counted(len(ranks), 'process', 'processes')}, resumed by "
                              f"{self.processes}: resume with as many (a step is optim.batch_size x processes), "
                              f"or pass --no-resume (or another train.output_dir) to start over")
        set_rng_state(ranks[self.rank])


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    version, internal, gauss = random.getstate()
    kind, keys, position, has_gauss, cached = np.random.get_state()
    state["python"] = [version, list(internal), gauss]
    state["numpy"] = [kind, keys.tolist(), int(position), int(has_gauss), float(cached)]
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available():
        for i, cuda in enumerate(state.get("cuda", [])[:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda, i)
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, position, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached))


@dataclass
class LoaderPosition:
    """Where the run is in its data: the steps done (the loader's next batch is the step plan's item
    ``step``) and the sentences seen, in the corpus (and trained vocabulary) these fingerprints name:
    resuming on other data is refused."""

    corpus_sha256: str | None = None
    vocabulary_sha256: str | None = None  # model.wordpiece_vocab_size: the trained vocabulary's fingerprint
    corpus_name: str = "data.corpus"
    total: int = 0  # the plan's steps
    step: int = 0
    sentences_seen: int = 0
    resumed_from: int = 0  # the step this invocation started from

    def advance(self, batch_step: int, sentences: int) -> None:
        """Account the step just taken (``batch_step`` is 0-based; ``step`` counts the steps done)."""
        self.step = batch_step + 1
        self.sentences_seen += sentences

    @property
    def last(self) -> bool:
        return self.step == self.total

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "sentences_seen": self.sentences_seen, "corpus_sha256": self.corpus_sha256,
                "vocabulary_sha256": self.vocabulary_sha256}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["corpus_sha256"] != self.corpus_sha256:
            raise ConfigError(f"{self.corpus_name}: the corpus changed since the checkpoint; restore it, "
                              f"or pass --no-resume (or another train.output_dir) to start over")
        # A trained WordPiece vocabulary trained again (its cache deleted) by another `tokenizers` may differ.
        if state["vocabulary_sha256"] != self.vocabulary_sha256:
            raise ConfigError("was trained with another WordPiece vocabulary than this run's (trained again after its "
                              "cache was deleted, by another `tokenizers` version?); restore the cached vocabulary, "
                              "or pass --no-resume (or another train.output_dir) to start over")
        self.step = self.resumed_from = state["step"]
        self.sentences_seen = state["sentences_seen"]


@dataclass
class RunState:
    """A run's stateful components, built once: what ``train()`` drives and what a checkpoint holds.

    ``by_name()`` is the checkpoint's layout, ``{name: component}``, in the order of restoring: the
    loader position first, so a checkpoint of other data is refused before any component has changed;
    ``added``: the components of the objective's terms and token passes (``TERM.NAME``)."""

    position: LoaderPosition
    encoder: EncoderWeights
    heads: HeadWeights
    optimizer: OptimizerStep
    rng: RngStreams
    clock: RunClock
    metrics: MetricsLog
    selection: ModelSelection
    geometry: GeometryProbe
    added: dict[str, Stateful] = field(default_factory=dict)

    def by_name(self) -> dict[str, Stateful]:
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "added"}
        return {**own, **self.added}

    @property
    def step(self) -> int:
        return self.position.step

    def save(self, checkpoints: Checkpointing) -> None:
        """Every component's state to the checkpoint writer; the weights are checked first (nothing
        non-finite is ever saved). Every process takes its states (the RNG streams' is collective)."""
        parameters = list(self.heads.trainable.parameters())
        if not bool(torch.stack([torch.isfinite(p).all() for p in parameters]).all()):
            raise TrainingError(f"step {self.step}: the weights are no longer finite; no checkpoint written. Resume "
                                f"from the last good checkpoint in {checkpoints.directory.directory} with a lower "
                                f"optim.lr")
        components = self.by_name()
        states = {name: component.state_dict() for name, component in components.items()}
        if self.position.last and not checkpoints.keep_optimizer_state:
            states["optimizer"]["optimizer"] = None  # no update follows the last step: AdamW's moments go
        checkpoints.save(self.step, states, {name: version_of(component) for name, component in components.items()},
                         link_encoder=self.selection.saved_at(self.step, self.position.last))


def build_state(process: RankContext, config: Config, setup: TrainingSetup, precision: PrecisionChoice,
                forward: StepForward) -> RunState:
    """Every component in its starting state (a resumed run then loads each one's saved state)."""
    optimizer, scheduler = make_optimizer(setup.trainable, config.optim, len(setup.plan))
    update = OptimizerStep(optimizer, scheduler, list(setup.trainable.parameters()), config.optim.max_grad_norm,
                           gradient_scaler(precision.precision, process.device))
    position = LoaderPosition(corpus_fingerprint(setup.corpus), setup.vocabulary_sha256, config.data.corpus,
                              len(setup.plan))
    clock = RunClock(process.started)
    sinks = Sinks(process.out_dir / METRICS, lambda step: process.progress_bar(config.recipe, len(setup.plan), step),
                  lambda step: LiveLogs(config, process.out_dir, step)) if process.main else None
    metrics = MetricsLog(config.train.log_steps, position, clock,
                         Throughput(setup.encoder, precision.dtype, process.device.type, process.processes), sinks)
    selection = model_selection(process, config, setup, precision.precision,
                                validation_for(setup.validation, forward, process.main))
    added = {f"{name}.{key}": component for name, part in setup.objective.stateful_parts()
             for key, component in part.components().items()}
    return RunState(position, EncoderWeights(setup.encoder.backbone),
                    HeadWeights(setup.trainable, setup.encoder.backbone), update,
                    RngStreams(process.rank, process.processes), clock, metrics, selection,
                    GeometryProbe(config, setup.encoder, setup.corpus), added)


def start_or_resume(process: RankContext, run: RunState, saved: SavedRun | None,
                    known_base: dict[str, float] | None = None) -> None:
    """A fresh run measures its starting model (alignment and uniformity, the first selection metric;
    ``known_base``: {metric key: value} already measured in these settings); a resumed one restores
    every component and makes the best models on disk agree with the restored selection."""
    if saved is None:
        if process.main:
            run.geometry.measure_base()
        score_base(process, run.selection, known_base)
        return
    restore(run.by_name(), saved)
    if process.main:
        run.selection.reconcile(run.step)
    process.say(f"resuming from {saved.path} (step {run.step} of {run.position.total})")


def run_precision(process: RankContext, train: TrainConfig, hidden_size: int,
                  saved: SavedRun | None) -> PrecisionChoice:
    """The run's precision: what ``auto`` chose when the run started (kept on resume), decided by the
    main process for all of them (a timing probe could differ between processes)."""
    if train.precision == "auto" and saved is not None and saved.manifest.get("precision"):
        return PrecisionChoice(saved.manifest["precision"], "auto", "chosen when the run started (resumed)")
    return from_main(choose_precision(train.precision, process.device, hidden_size) if process.main else None)
