"""Step strategies: one batch in, gradients accumulated on the parameters, the loss out.

Both strategies keep the same contract (``StepStrategy``): the plain step encodes every view in one
forward pass; the GradCache step (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size
under Memory Limited Setup") encodes in chunks so that large batches fit in little memory, with the
same gradients. The loop picks one strategy once and never branches on it again.

Everything a step returns stays on the device: the loop reads it back once per log window.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from cselab.data.collate import Batch
from cselab.hardware import autocast
from cselab.losses import Objective
from cselab.losses.base import LossInputs
from cselab.model.encoder import SentenceEncoder
from cselab.train.distributed import gather_inputs, local_rows, world_size


@dataclass
class StepResult:
    loss: torch.Tensor  # detached scalar, on the device
    logs: dict[str, torch.Tensor]  # detached scalars from the objective's terms


class StepStrategy(Protocol):
    def __call__(self, batch: Batch) -> StepResult: ...


class StepForward(torch.nn.Module):
    """The step's forward pass as one module (encoder, head, objective): batch -> (loss, logs).

    With P processes, each encodes its share of the global batch and gathers the others' sentence
    vectors (``distributed.py``), so in-batch negatives span the global batch; the head then runs
    over the gathered rows, so a batch-norm head (AugCSE's) normalises the global batch exactly as
    one process with that batch would, on CPU (gloo) and GPU alike (what ``SyncBatchNorm`` does,
    which runs on GPUs only). Being one module, it is what ``DistributedDataParallel`` wraps.
    """

    def __init__(self, encoder: SentenceEncoder, head: torch.nn.Module, objective: Objective, device: torch.device,
                 precision: str):
        super().__init__()
        self.encoder, self.head, self.objective = encoder, head, objective
        self.device, self.precision = device, precision

    def embed(self, features: dict[str, torch.Tensor], real_tokens: int | None = None) -> torch.Tensor:
        """The encoder's sentence vectors (the head comes in :meth:`loss`). ``real_tokens``: the
        features' real-token count, counted on the host (no read-back)."""
        with autocast(self.device, self.precision):
            return self.encoder(features, real_tokens=real_tokens)

    def project(self, inputs: LossInputs) -> LossInputs:
        """The head over every view's rows at once (one batch for a batch-norm head, as DiffCSE and
        AugCSE call it). The views are concatenated in the collator's row order, so with one process
        the head sees the encoded batch exactly as it came."""
        views = inputs.views()
        rows = list(views.values())
        with autocast(self.device, self.precision):
            projected = self.head(torch.cat(rows) if len(rows) > 1 else rows[0])
        return inputs.with_views(dict(zip(views, projected.split([len(r) for r in rows]), strict=True)))

    def token_outputs(self, batch: Batch, local: LossInputs) -> dict:
        """Each token pass over its tokens, under the step's precision (``local``: this process's sentence
        vectors by role, after the head): what the terms read, by pass name."""
        with autocast(self.device, self.precision):
            return {name: self.objective.passes[name](tokens.to(self.device), self.encoder, local)
                    for name, tokens in batch.tokens.items()}

    def loss(self, embeddings: torch.Tensor | None, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The objective over the step; ``embeddings``: the encoder's vectors of the batch's rows."""
        inputs = LossInputs()
        if embeddings is not None:
            labels = None if batch.labels is None else batch.labels.to(self.device, non_blocking=True)
            views = {role: embeddings[rows] for role, rows in batch.roles.items()}
            inputs = self.project(gather_inputs(LossInputs(labels=labels).with_views(views)))
        if batch.tokens:  # a token-level pass (MLM, DiffCSE's replaced tokens) reads this process's rows
            inputs = inputs.with_tokens(self.token_outputs(batch, local_rows(inputs)))
        return self.objective(inputs)

    def features(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.features.items()}

    def forward(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        embeddings = self.embed(self.features(batch), batch.real_tokens) if self.objective.encodes_views else None
        return self.loss(embeddings, batch)


def unscaled(loss: torch.Tensor) -> torch.Tensor:
    return loss


class PlainStep:
    """Encode every view of the step at once, compute the objective, back-propagate.

    With several processes the forward runs under ``DistributedDataParallel``, which averages the
    gradients bucket by bucket while backward still runs. ``scale`` is fp16's loss scaling
    (``optimizer.OptimizerStep.scale``).
    """

    def __init__(self, forward: StepForward, scale: Callable[[torch.Tensor], torch.Tensor] = unscaled):
        self.forward, self.scale = forward, scale
        self.model = forward if world_size() == 1 else distributed_data_parallel(forward)

    def __call__(self, batch: Batch) -> StepResult:
        loss, logs = self.model(batch)
        self.scale(loss).backward()
        return StepResult(loss.detach(), logs)


class GradCacheStep:
    """The same gradients as :class:`PlainStep` with one chunk's activations in memory at a time.

    1. Encode the rows in chunks without gradient, remembering each chunk's RNG state.
    2. Compute the loss on the detached embeddings and back-propagate to them (and to the terms).
    3. Re-encode each chunk with gradient under its remembered RNG state (the same dropout masks)
       and push that chunk's embedding gradient through the encoder.
    The head runs in step 2, over the whole batch (``StepForward.project``): a batch-norm head sees
    the step's statistics, not a chunk's.

    With P > 1, ``DistributedDataParallel`` averages the gradients, as in the plain step: the
    encoder's in the last chunk's backward, the chunks before it running under ``no_sync`` (their
    gradients add up locally, and the last backward's bucketed all-reduce carries the sums, the
    MLM pass's among them); the head's and the terms' parameters, which only the loss's backward
    reaches, under a DDP of their own around the loss.
    """

    def __init__(self, forward: StepForward, scale: Callable[[torch.Tensor], torch.Tensor] = unscaled, *,
                 chunk_size: int):
        self.forward, self.scale, self.chunk_size = forward, scale, chunk_size
        self.encode: torch.nn.Module = ChunkEncoder(forward)
        self.loss: torch.nn.Module = LossSide(forward)
        self.distributed = world_size() > 1
        if self.distributed:
            self.encode = distributed_data_parallel(self.encode)
            if any(p.requires_grad for p in self.loss.parameters()):  # DDP refuses a module without any
                self.loss = distributed_data_parallel(self.loss)

    def __call__(self, batch: Batch) -> StepResult:
        loss, logs = self.cached_backward(batch)
        return StepResult(loss.detach(), logs)

    def cached_backward(self, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        forward = self.forward
        features = forward.features(batch)
        # Each chunk is trimmed to its own longest row; lengths come from the host copy (no device sync).
        lengths = batch.features["attention_mask"].numpy().sum(axis=1)
        bounds = [(start, min(start + self.chunk_size, len(lengths)), int(lengths[start:start + self.chunk_size].max()))
                  for start in range(0, len(lengths), self.chunk_size)]

        def chunk_tokens(start: int, stop: int) -> int:
            return int(lengths[start:stop].sum())

        states, pieces = [], []
        with torch.no_grad():
            for start, stop, length in bounds:
                states.append(RngState())
                pieces.append(forward.embed(chunk_rows(features, start, stop, length), chunk_tokens(start, stop)))
        embeddings = torch.cat(pieces).detach().requires_grad_(True)
        loss, logs = self.loss(embeddings, batch)
        # The head's and terms' parameters, and the cached embeddings (their gradient carries fp16's scale on).
        self.scale(loss).backward()
        after_loss = RngState()  # the loss may draw too (MLM pass, discriminator dropout): not replayed
        for i, ((start, stop, length), state) in enumerate(zip(bounds, states, strict=True)):
            state.restore()
            synced = not self.distributed or i == len(bounds) - 1
            with contextlib.nullcontext() if synced else self.encode.no_sync():
                self.encode(chunk_rows(features, start, stop, length),
                            chunk_tokens(start, stop)).backward(embeddings.grad[start:stop])
        after_loss.restore()  # later randomness continues as if each chunk ran once
        return loss, logs


class ChunkEncoder(torch.nn.Module):
    """The encoder alone, as the module a GradCache step's chunks run through (and DDP wraps)."""

    def __init__(self, forward: StepForward):
        super().__init__()
        self.encoder = forward.encoder
        self.embed = forward.embed  # a bound method: the step's autocast, not a submodule

    def forward(self, features: dict[str, torch.Tensor], real_tokens: int | None = None) -> torch.Tensor:
        return self.embed(features, real_tokens)


class LossSide(torch.nn.Module):
    """The head and the objective (its terms and token passes): the parameters a GradCache step's loss
    backward trains (besides the encoder's, which a token pass may run)."""

    def __init__(self, forward: StepForward):
        super().__init__()
        self.head, self.objective = forward.head, forward.objective
        self.loss = forward.loss

    def forward(self, embeddings: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return self.loss(embeddings, batch)


class RngState:
    """The CPU (and CUDA) generator states at one moment, to replay a forward pass exactly."""

    def __init__(self):
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)


def chunk_rows(features: dict[str, torch.Tensor], start: int, stop: int, length: int) -> dict[str, torch.Tensor]:
    """Rows start:stop of a tokenised batch, cut to ``length`` tokens (the padding past the chunk's
    longest row changes no output)."""
    return {k: v[start:stop, :length] if v.dim() == 2 else v[start:stop] for k, v in features.items()}


def choose_step(forward: StepForward, grad_cache_chunk: int | None,
                scale: Callable[[torch.Tensor], torch.Tensor] = unscaled) -> StepStrategy:
    """GradCache when a chunk size is set and the objective encodes views (an MLM-only one has none to
    cache), else the plain step."""
    if grad_cache_chunk and forward.objective.encodes_views:
        return GradCacheStep(forward, scale, chunk_size=grad_cache_chunk)
    return PlainStep(forward, scale)


def distributed_data_parallel(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` under DistributedDataParallel on this process's device (gloo on CPU, NCCL on GPU).

    ``find_unused_parameters`` stays False (True walks the autograd graph every step): nothing
    trainable goes without a gradient instead (model/encoder.py's poolers; train/parts.py freezes
    what an MLM-only objective never runs). tests/scale/test_ddp_unused.py holds that promise."""
    from torch.nn.parallel import DistributedDataParallel

    device = next(module.parameters()).device
    return DistributedDataParallel(module, device_ids=[device] if device.type == "cuda" else None,
                                   gradient_as_bucket_view=True)
