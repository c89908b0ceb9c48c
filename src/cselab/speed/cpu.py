"""Faster training on CPUs: cheaper dropout masks, memory reused instead of faulted in afresh.

Profiling a bf16 SimCSE step of MiniLM on this 2-core machine (benchmarks/results/
train_vs_sentence_transformers.md) showed costs that have nothing to do with the model's
arithmetic:

* **Dropout masks** (~17% of a step): ``torch.bernoulli_`` on the CPU draws one Mersenne-Twister
  number per element, about 7 ns each, for every hidden state and attention map. Dropout is the
  whole augmentation of SimCSE, so it cannot be switched off. :func:`fast_dropout` draws one 64-bit
  number per *four* elements and keeps an element when its 16-bit slice, shifted to 15 bits, is at
  least ``p * 32768``: the same Bernoulli masks up to a quantisation of p to 1/32768 (0.1 becomes
  0.100006), from the same seeded generator, so runs stay reproducible and resumable. The mask is a
  bit pattern (all ones or all zeros per element) ANDed with the values: torch's operations on bool
  masks (``x * mask``, ``where``, ``masked_fill``) are ~10x slower here than integer arithmetic.
* **Page faults** (~8%): glibc returns every freed block above its mmap threshold to the kernel, so
  each step's activations and gradients are faulted in afresh. :func:`reuse_freed_memory` raises
  the threshold so that freed blocks stay in the heap and are reused by the next step.
* **The word-embedding gradient** (~7%): at 47 MB it is above the largest threshold glibc allows,
  so it is still faulted in every step; :class:`PersistentGradEmbedding` keeps it in one buffer.

All three are switched on by ``train.fast_cpu`` (default on) and only when training on a CPU; a GPU's
dropout is already fast (:func:`cselab.speed.speed_up` decides). The fast dropout is applied only with a
transformers release of ``compat.TESTED_TRANSFORMERS``: its attention function is one of
transformers' attention interface. Models keep their own modules for saving and inference: only dropout
modules are swapped, the attention function chosen by name and the embedding table's class
changed, none of which is saved.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging

import torch
from torch import nn

from cselab.speed.compat import always_build, transformers_tested

log = logging.getLogger(__name__)

ATTENTION_NAME = "cselab_fast_dropout"
_GLIBC_M_TRIM_THRESHOLD, _GLIBC_M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit systems
_TRIM_THRESHOLD = 1024 * 1024 * 1024


_BITS_OF_SIZE = {2: torch.int16, 4: torch.int32, 8: torch.int64}


class _KeepBits(torch.autograd.Function):
    """``x * keep * scale`` with ``keep`` as a bit pattern per element; the backward is the same."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return (x.view(keep.dtype) & keep).view(x.dtype) * scale

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        grad = grad.contiguous()
        return (grad.view(keep.dtype) & keep).view(grad.dtype) * ctx.scale, None, None


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout with a Bernoulli(1 - p) mask made from 16-bit slices of 64-bit draws."""
    if x.element_size() not in _BITS_OF_SIZE or p >= 1:  # 8-bit floats: no integer view of that size
        return nn.functional.dropout(x, p, training=True)
    x = x.contiguous()
    words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device).random_(-2**63, None)
    slices = words.view(torch.int16)[: x.numel()]
    # In place on int16: u = slice >> 1 is uniform on [-16384, 16383]; kept iff u >= threshold.
    # u - threshold fits in int16, and its sign bit spread over the word (>> 15) is all ones exactly
    # when the element is dropped, so its complement is the keep pattern.
    threshold = round(p * 32768) - 16384
    keep = slices.bitwise_right_shift_(1).sub_(threshold).bitwise_right_shift_(15).bitwise_not_().view(x.shape)
    if x.element_size() != 2:
        keep = keep.to(_BITS_OF_SIZE[x.element_size()])  # sign extension: all ones stay all ones
    return _KeepBits.apply(x, keep, 1.0 / (1.0 - p))


class FastDropout(nn.Module):
    """Drop-in replacement for ``nn.Dropout`` that uses :func:`fast_dropout`."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return fast_dropout(x, self.p)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Scaled dot-product attention; in training, attention-probability dropout by fast_dropout."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not dropout:  # inference: the fused kernel
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=0.0,
                                      **kwargs)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    scores = torch.matmul(query * scaling, key.transpose(2, 3))
    if attention_mask is not None:
        scores = scores + attention_mask.to(scores.dtype)
    weights = fast_dropout(torch.softmax(scores, dim=-1), dropout)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(ATTENTION_NAME, _attention)
    # An additive float mask, as _attention adds it; always built (no read-back: model/masks.py).
    AttentionMaskInterface.register(ATTENTION_NAME, always_build(eager_mask))


def use_fast_dropout(backbone: nn.Module) -> int:
    """Swap every ``nn.Dropout`` of a model for :class:`FastDropout` and, where the model chooses its
    attention function by name (transformers' attention interface), use one with fast dropout.
    Returns how many dropout modules were swapped: none with a transformers release outside
    ``compat.TESTED_TRANSFORMERS`` (the model is left as it is)."""
    if not transformers_tested():
        return 0
    swapped = 0
    for parent in backbone.modules():
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                setattr(parent, name, FastDropout(child.p).train(child.training))
                swapped += 1
    set_attention = getattr(backbone, "set_attn_implementation", None)
    if set_attention is not None:
        _register_attention()
        try:
            set_attention(ATTENTION_NAME)
        except (ValueError, NotImplementedError) as error:  # models without the attention interface
            log.info("attention dropout stays torch's (%s)", error)
    return swapped


class _RowsToGradient(torch.autograd.Function):
    """Embedding lookup whose backward adds the rows it read into the weight's gradient in place."""

    @staticmethod
    def forward(ctx, ids: torch.Tensor, weight: torch.Tensor, table: PersistentGradEmbedding) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.table = table
        return nn.functional.embedding(ids, weight, table.padding_idx)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (ids,) = ctx.saved_tensors
        table = ctx.table
        weight = table.weight
        if weight.grad is None:  # first backward of the step (zero_grad set it to None)
            if table.grad_buffer is None or table.grad_buffer.shape != weight.shape:
                table.grad_buffer = torch.empty_like(weight)
            weight.grad = table.grad_buffer.zero_()
        rows, grads = ids.reshape(-1), grad_output.reshape(-1, weight.shape[1])
        if table.padding_idx is not None:  # the padding row gets no gradient, as in nn.Embedding
            # Zeros added to it rather than its rows dropped: a boolean index would size its output
            # from the data (a wait for the device on a GPU, train/host_syncs.py).
            grads = grads.masked_fill((rows == table.padding_idx).unsqueeze(1), 0)
        weight.grad.index_add_(0, rows, grads.to(weight.grad.dtype))
        return None, None, None


class PersistentGradEmbedding(nn.Embedding):
    """``nn.Embedding`` whose gradient lives in one buffer kept across steps.

    The dense gradient of a word-embedding table (30,522 x 384 floats = 47 MB for MiniLM) is above
    glibc's largest mmap threshold (32 MiB), so torch's backward maps fresh pages for it every step
    and zero-fills them: 80 ms of page faults per step here, ~7% of a bf16 SimCSE step. This
    backward zeroes the kept buffer instead (no faults) and adds only the rows the batch used.
    Gradients are the same as nn.Embedding's, also with tied weights and several backward passes
    per step (GradCache), which accumulate into the same buffer until ``zero_grad``.
    """

    grad_buffer: torch.Tensor | None = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled() or not self.weight.requires_grad or self.max_norm is not None:
            return super().forward(ids)
        return _RowsToGradient.apply(ids, self.weight, self)


def use_persistent_embedding_grad(backbone: nn.Module) -> bool:
    """Give the backbone's input embedding table a persistent gradient buffer (in place)."""
    getter = getattr(backbone, "get_input_embeddings", None)
    table = getter() if getter is not None else None
    if type(table) is not nn.Embedding or table.sparse:
        return False
    table.__class__ = PersistentGradEmbedding  # same parameters and state dict, another forward
    return True


def reuse_freed_memory() -> bool:
    """Ask glibc to keep freed blocks up to 32 MiB in the heap (a step's activations are freed and
    allocated again every step). Returns False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_GLIBC_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)) and bool(
        mallopt(_GLIBC_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))
