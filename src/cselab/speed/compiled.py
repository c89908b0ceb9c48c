"""``train.compile``: the unpadded layers compiled, with shapes bucketed so that recompilations stay few.

What is compiled is :func:`~cselab.speed.unpadded.encode_rows`, the backbone's layers on the real
tokens (not the padded forward, whose work on padding compiling would only make faster). Its
shapes are the batch's sentences ``B``, its padded length ``L`` and its real-token rows ``R``:

* ``L`` is bucketed: the batch is padded (pad ids, mask 0) up to the next power of two, at least
  :data:`MIN_LENGTH_BUCKET`, at most the training length; the extra pad columns change no real
  token's value (their keys are masked, their rows never read) and are cut off again after the
  layers. It stays static in the compiled graph: one graph per bucket, each with kernels for its
  length (the attention's softmax runs over ``L``);
* ``B`` and ``R`` are dynamic (symbolic) from the first call: ``R`` is rounded up to a multiple of
  64 already (``unpadded.ROW_MULTIPLE``), and a new value costs no recompilation.

So a run compiles at most one graph per length bucket and gradient mode (on; off for GradCache's first
pass), each perhaps once more for a batch of one sentence (a size dynamo specialises): :func:`graph_bound`.
"""
from __future__ import annotations

import inspect

import torch
from torch import nn

from cselab.speed.unpadded import encode_rows

MIN_LENGTH_BUCKET = 8
# Dynamo's backend; tests put "aot_eager" here (the same graphs, forward and backward, without
# inductor's C++ build).
BACKEND = "inductor"
# torch.compile's modes: "default", or "reduce-overhead" (CUDA graphs: the layers' launches replayed
# as one graph each step; static shapes, so each row count of a bucket records a graph of its own).
MODES = ("default", "reduce-overhead")


def length_bucket(length: int, cap: int) -> int:
    """The padded length a batch of ``length`` runs at: the next power of two (at least
    :data:`MIN_LENGTH_BUCKET`), at most ``cap`` (the training length); a longer batch keeps its own."""
    if length >= cap:
        return length
    return min(max(MIN_LENGTH_BUCKET, 1 << (length - 1).bit_length()), cap)


def length_buckets(cap: int) -> list[int]:
    """Every bucket a batch cut at ``cap`` tokens can fall in."""
    return sorted({length_bucket(length, cap) for length in range(1, cap + 1)})


def graph_bound(cap: int) -> int:
    """The most graphs a training run compiles: each length bucket with gradients and without
    (GradCache's first pass), and once more each for a batch of one sentence (a size dynamo
    specialises)."""
    return len(length_buckets(cap)) * 2 * 2


class CompiledLayers:
    """:func:`encode_rows` under ``torch.compile``, called by ``unpadded_forward`` in training.

    It compiles to one graph without a break (tests/speed check dynamo's graph-break counter stays
    empty: a read-back of the device would break it). Not ``fullgraph=True``: with it, going past
    dynamo's recompilation limit (the process's other runs count too: a sweep of many models) is a
    hard error; without it the shapes past the limit run eager. The limit is raised by this run's
    :func:`graph_bound` where torch takes a limit per compiled function (2.13 does)."""

    def __init__(self, length_cap: int, mode: str = "default"):
        if mode not in MODES:
            raise ValueError(f"compile mode {mode!r} is not one of {', '.join(MODES)}")
        self.length_cap = length_cap
        self.mode = mode
        limit = {}
        if "recompile_limit" in inspect.signature(torch.compile).parameters:
            limit["recompile_limit"] = torch._dynamo.config.recompile_limit + graph_bound(length_cap)
        self._compiled = torch.compile(encode_rows, dynamic=None, backend=BACKEND,
                                       mode=None if mode == "default" or BACKEND != "inductor" else mode, **limit)

    def length_bucket(self, length: int) -> int:
        return length_bucket(length, self.length_cap)

    def __call__(self, layers: nn.ModuleList, embedded: torch.Tensor, attention_mask: torch.Tensor,
                 source: torch.Tensor, real: torch.Tensor, zero_from: int | None, dtype: torch.dtype,
                 all_hidden_states: bool) -> tuple[torch.Tensor, ...]:
        if zero_from is not None:
            raise ValueError("the compiled layers take rows that stop at the last position (no zero_from)")
        for tensor in (embedded, attention_mask, source, real):
            torch._dynamo.maybe_mark_dynamic(tensor, 0)  # sentences, positions, rows: symbolic
        for tensor in (embedded, attention_mask):
            torch._dynamo.mark_static(tensor, 1)  # the length bucket: one graph each
        states = self._compiled(layers, embedded, attention_mask, source, real, None, dtype, all_hidden_states)
        if self.mode == "reduce-overhead":
            # A CUDA graph's outputs live in its memory pool, overwritten by its next replay (GradCache
            # keeps every chunk's vectors until the loss): the step gets its own copies.
            states = tuple(s.clone() for s in states)
        return states
