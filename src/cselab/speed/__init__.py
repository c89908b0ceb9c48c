"""Making training faster without changing what it computes, in one call: :func:`speed_up`.

* ``cpu.py``: on a CPU (``train.fast_cpu``), cheaper dropout masks, freed memory kept for reuse, and a
  persistent word-embedding gradient;
* ``unpadded.py``: the backbone's layers on real tokens only (``model.unpad``);
* ``torch.compile`` of the backbone (``train.compile``);
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

from cselab.speed import compat
from cselab.speed.cpu import reuse_freed_memory, use_fast_dropout, use_persistent_embedding_grad

log = logging.getLogger(__name__)


class Encoder(Protocol):
    """What :func:`speed_up` uses of a ``SentenceEncoder``."""

    backbone: nn.Module

    def use_unpadded(self) -> bool: ...


class TrainSettings(Protocol):
    """What :func:`speed_up` reads of the recipe's ``train`` section (``TrainConfig``)."""

    fast_cpu: bool
    compile: bool


class ModelSettings(Protocol):
    """What :func:`speed_up` reads of the recipe's ``model`` section (``ModelConfig``)."""

    unpad: str


def speed_up(encoder: Encoder, train: TrainSettings, model: ModelSettings, device: torch.device) -> None:
    """The CPU speed-ups, the unpadded forward and torch.compile, as configured, on an encoder already
    on ``device`` (in place; nothing saved changes)."""
    # Compiled, torch's dropout draws its masks inside inductor's fused kernels; fast_dropout's
    # in-place random_ would break the graph at every dropout instead.
    fast_dropout = train.fast_cpu and device.type == "cpu" and not train.compile
    unpad = model.unpad == "true" or (model.unpad == "auto" and device.type == "cpu")
    if unpad and train.compile:
        # The unpadded forward runs the backbone's layers itself, past the compiled module's forward:
        # compiled, nothing would be. torch.compile wins; what it compiles is the padded forward.
        if model.unpad == "true":
            log.warning("model.unpad=true is off with train.compile=true (torch.compile compiles the padded forward)")
        unpad = False
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
    if train.compile:
        encoder.backbone.compile(dynamic=True)  # in place: parameter names (and checkpoints) unchanged
