"""Making training faster without changing what it computes, in one call: :func:`speed_up`.

* ``cpu.py``: on a CPU (``train.fast_cpu``), cheaper dropout masks, freed memory kept for reuse, and a
  persistent word-embedding gradient;
* ``unpadded.py``: the backbone's layers on real tokens only (``model.unpad``);
* ``compiled.py``: ``torch.compile`` of those layers, the batch's length bucketed so that
  recompilations stay few (``train.compile``; a backbone that cannot be unpadded is compiled whole);
  ``compile_auto.py``: ``train.compile: auto``, compiled once the run is long enough to repay it;
* ``compat.py``: the transformers releases the fast-dropout attention and the unpadded forward were
  checked on (:data:`~cselab.speed.compat.TESTED_TRANSFORMERS`); on another release they are not
  applied and the model runs as transformers defines it.

``train.precision`` (bf16 only where it is native and faster) is chosen with the device, in
``hardware.py``.
"""
from __future__ import annotations

import logging
from typing import Protocol

import torch
from torch import nn

from cselab.hardware import device_name
from cselab.speed import compat
from cselab.speed.compile_auto import CompileWhenRepaid, cost_key
from cselab.speed.compiled import CompiledLayers
from cselab.speed.cpu import reuse_freed_memory, use_fast_dropout, use_persistent_embedding_grad

log = logging.getLogger(__name__)


class Encoder(Protocol):
    """What :func:`speed_up` uses of a ``SentenceEncoder``."""

    backbone: nn.Module
    unpadded: bool
    compiled_layers: CompiledLayers | None
    max_seq_len: int

    def use_unpadded(self) -> bool: ...

    def parameters(self): ...

    def register_forward_pre_hook(self, hook, *, with_kwargs: bool = False): ...


class TrainSettings(Protocol):
    """What :func:`speed_up` reads of the recipe's ``train`` section (``TrainConfig``)."""

    fast_cpu: bool
    compile: str


class ModelSettings(Protocol):
    """What :func:`speed_up` reads of the recipe's ``model`` section (``ModelConfig``)."""

    unpad: str


def compiles(setting: str, device: torch.device) -> bool:
    """Whether ``train.compile`` may compile on ``device``: auto does on a GPU only (on a CPU it was
    measured no faster, docs/scaling.md), true and reduce-overhead everywhere."""
    return setting in ("true", "reduce-overhead") or (setting == "auto" and device.type == "cuda")


def speed_up(encoder: Encoder, train: TrainSettings, model: ModelSettings,
             device: torch.device) -> CompileWhenRepaid | None:
    """The CPU speed-ups, the unpadded forward and torch.compile, as configured, on an encoder already
    on ``device`` (in place; nothing saved changes). Returns what times the steps for ``train.compile``
    (auto: when to compile, once told the steps left, ``expect_steps``; true: the warm-up), or None."""
    compiling = compiles(train.compile, device)
    # Compiled, torch's dropout draws its masks inside inductor's fused kernels; fast_dropout's
    # in-place random_ would break the graph at every dropout instead.
    fast_dropout = train.fast_cpu and device.type == "cpu" and not compiling
    unpad = model.unpad != "false"
    tested = compat.transformers_tested()
    if not tested and (fast_dropout or unpad):
        log.warning("transformers %s is outside the releases cselab's fast dropout and unpadded forward were "
                    "checked on (%s): both are off, the model runs as transformers defines it",
                    compat.transformers_version(), compat.TESTED_TRANSFORMERS)
    if fast_dropout:
        use_fast_dropout(encoder.backbone)  # nothing outside the tested releases
    if train.fast_cpu and device.type == "cpu":
        reuse_freed_memory()
        use_persistent_embedding_grad(encoder.backbone)
    if unpad and tested and not encoder.use_unpadded() and model.unpad == "true":
        log.warning("model.unpad: %s has no BERT-style layers; it runs padded", type(encoder.backbone).__name__)
    if not compiling:
        return None
    mode = "reduce-overhead" if train.compile == "reduce-overhead" and device.type == "cuda" else "default"
    if encoder.unpadded:
        def compile_now() -> None:  # the layers on real tokens, in training (evaluation runs them eager)
            encoder.compiled_layers = CompiledLayers(encoder.max_seq_len, mode)
    else:
        def compile_now() -> None:  # in place: parameter names (and checkpoints) unchanged
            encoder.backbone.compile(dynamic=True, mode=None if mode == "default" else mode)
    key = cost_key(device_name(device), encoder.backbone, "unpadded" if encoder.unpadded else "padded", mode)
    if train.compile != "auto":
        compile_now()
    return CompileWhenRepaid(encoder, compile_now, key, compiled=train.compile != "auto")
