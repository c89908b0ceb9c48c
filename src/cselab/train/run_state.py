"""The stateful parts of a run, each saving itself with ``state_dict()`` and resuming with
``load_state_dict()``: a checkpoint is ``{name: component.state_dict()}`` (``checkpoint.py``).

Here the parts that belong to no other module: the weights (split so the encoder's file can be the
final model's), the RNG streams, where the loader is in the data, and the run's clock. The optimiser
step (``optimizer.py``), the metrics log (``metrics.py``), model selection (``selection.py``) and
the starting model's geometry (``geometry.py``) keep their own state beside their code.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from cselab.errors import ConfigError, counted
from cselab.train.distributed import gather_objects


class Stateful(Protocol):
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


class RunClock:
    """Training time (the log windows' wall time, evaluations and checkpoints left out), of it the
    time spent waiting for batches, and the run's wall time over every invocation (each up to its
    last checkpoint)."""

    def __init__(self, started: float | None = None):
        self.train_seconds = self.loader_wait_seconds = self.wall_before = 0.0
        self.started = time.time() if started is None else started  # this invocation's start (Process.start)

    def trained(self, seconds: float, waited: float) -> None:
        self.train_seconds += seconds
        self.loader_wait_seconds += waited

    def wall_seconds(self) -> float:
        return self.wall_before + time.time() - self.started

    def state_dict(self) -> dict[str, float]:
        return {"train_seconds": self.train_seconds, "loader_wait_seconds": self.loader_wait_seconds,
                "wall_seconds": self.wall_seconds()}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.train_seconds, self.loader_wait_seconds = state["train_seconds"], state["loader_wait_seconds"]
        self.wall_before = state["wall_seconds"]
