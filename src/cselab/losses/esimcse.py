"""ESimCSE's momentum contrast: the ``momentum_keys`` token pass (a momentum encoder and a queue of its
past keys, two components of the run's state) and the ``esimcse`` term that reads it.

Wu, Gao, Zang, Han, Wang & Hu, "ESimCSE: Enhanced Sample Building Method for Contrastive Learning of
Unsupervised Sentence Embedding", COLING 2022, Sec. 3.2, as the authors' code runs it
(caskcsg/sentemb @ 5eeec55, ``ESimCSE/esimcse/models.py`` and ``trainers.py``). At step t, with the
online encoder's parameters theta_t (those that compute step t's loss):

1. theta_m <- lambda theta_m + (1 - lambda) theta_t over the backbone's parameters (``models.py:161-163``:
   after the online forward, before the loss and the optimiser step; lambda = 0.995, ``run.sh:2``);
2. k_t = MLP(CLS(momentum backbone(x_t))): the step's original sentences, the momentum backbone in eval
   mode (no dropout) without gradient, pooled as the encoder pools and through the *online* SimCSE MLP
   (``models.py:123-139, 183-192``; ``trainers.py:626-629``);
3. the loss, with z1 = the anchors, z2 = their positives (word repetition), Q the queue before this
   step's keys (``models.py:231, 241-248``; one direction, the anchors' rows):
   logits[i] = [cos(z1_i, z2_j) / tau for j in 1..N] + [cos(z1_i, q_m) / tau for q_m in Q],
   loss = CrossEntropy(logits, targets = arange(N)); an empty queue (step 1) is SimCSE's InfoNCE;
4. Q <- the newest K rows of [Q; k_t] (``trainers.py:631-636``; K = 160 = 2.5 x batch 64, ``run.sh:9``).

Differences from that code, each for a reason (docs/methods.md): the momentum encoder starts as a
copy of the encoder (the authors' copy is made before the checkpoint loads, so their run starts it
from random weights); under several processes every process's keys are gathered first, so the
queue holds the global batch and is the same on every process (theirs: each its own keys); the
queue is kept in fp32 (theirs: the autocast dtype); both the momentum encoder and the queue are in
the checkpoint, so a resumed run goes on exactly (theirs: the queue is lost).
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import get_ema_multi_avg_fn

from cselab import citations
from cselab.errors import ConfigError
from cselab.losses.base import LOSSES, LossInputs, LossTerm, TokenBatch, TokenPass, accuracy, register_token_pass
from cselab.losses.infonce import cosine_matrix


class MomentumEncoder:
    """An exponential moving average of the encoder's backbone, never trained by gradient: a component of
    the run's state (``state_dict``: the copy's weights). Kept outside the module tree on purpose, so
    the optimiser, the ``heads`` checkpoint component and DistributedDataParallel never see it."""

    version = 1

    def __init__(self, momentum: float):
        self.momentum = momentum
        self.average = get_ema_multi_avg_fn(momentum)  # torch's EMA: theta_m <- lambda theta_m + (1 - lambda) theta
        self.backbone: nn.Module | None = None

    def start(self, backbone: nn.Module) -> None:
        """A copy of ``backbone`` as it is now (before step 1, on the host), in eval mode: no dropout."""
        self.backbone = copy.deepcopy(backbone).requires_grad_(False).eval()

    def _started(self) -> nn.Module:
        if self.backbone is None:
            raise RuntimeError("momentum encoder: not started (TokenPass.setup copies the encoder's backbone)")
        return self.backbone

    @torch.no_grad()
    def update(self, online: nn.Module) -> None:
        """One EMA step toward ``online``'s parameters as they are now, paired by name (the copy follows
        the online backbone onto its device the first time)."""
        backbone = self._started()
        current = dict(online.named_parameters())
        averaged = dict(backbone.named_parameters())
        if averaged.keys() != current.keys():
            raise RuntimeError("momentum encoder: its parameters are not the encoder backbone's")
        device = next(iter(current.values())).device
        if next(iter(averaged.values())).device != device:
            backbone.to(device)
        self.average(list(averaged.values()), [current[name].detach() for name in averaged], None)

    @torch.no_grad()
    def encode(self, features: Mapping[str, torch.Tensor], encoder: nn.Module,
               real_tokens: int | None = None) -> torch.Tensor:
        """The momentum backbone's sentence vectors of ``features``: pooled by the encoder's pooler and
        through the encoder's own (online) MLP where its forward would apply it now; fp32. Run on the
        real tokens only where the encoder's forward is (``model.unpad``), given their count on the
        host (``real_tokens``), as the encoder's."""
        return encoder.pooled_by(self._started(), dict(features), real_tokens=real_tokens).float()

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self._started().state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._started().load_state_dict(state["weights"], strict=True)


class KeyQueue:
    """The newest ``size`` keys of earlier steps, oldest first, in fp32: a component of the run's state."""

    version = 1

    def __init__(self, size: int):
        self.size = size
        self.keys: torch.Tensor | None = None  # (<= size, d); None before the first step

    def rows(self, like: torch.Tensor) -> torch.Tensor:
        """The queue on ``like``'s device; (0, d) while empty."""
        if self.keys is None:
            return like.new_zeros((0, like.shape[-1]), dtype=torch.float32)
        if self.keys.device != like.device:
            self.keys = self.keys.to(like.device)
        return self.keys

    def push(self, keys: torch.Tensor) -> None:
        """Add ``keys`` (newest last) and keep the newest ``size`` rows."""
        keys = keys.detach().float()
        self.keys = keys[-self.size:] if self.keys is None else torch.cat([self.keys, keys])[-self.size:]

    def state_dict(self) -> dict[str, Any]:
        return {"keys": self.keys}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        keys = state["keys"]
        if keys is not None and (keys.dim() != 2 or len(keys) > self.size):
            raise ValueError(f"the saved queue holds {tuple(keys.shape)} keys; this run keeps at most {self.size}")
        self.keys = None if keys is None else keys.float()


def gather_keys(keys: torch.Tensor) -> torch.Tensor:
    """Every process's keys, in rank order (each process's rows are its share of the global batch, in
    that order), so the queue holds the global batch; this process's alone without several processes."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return keys
    pieces = [torch.empty_like(keys) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, keys.contiguous())
    return torch.cat(pieces)


class OriginalTokens:
    """The collator side: the step's original sentences as tokenised, unchanged, and the positions of
    their real tokens (whose count the step reads as a host integer: no read-back; picklable)."""

    def __call__(self, features: dict[str, torch.Tensor], seed: int) -> TokenBatch:
        real = features["attention_mask"].reshape(-1).nonzero().squeeze(1)
        return TokenBatch(dict(features), real, torch.zeros(0))


@register_token_pass("momentum_keys", "ESimCSE's queue: the momentum encoder's keys of earlier steps (the step's "
                                      "own are added after)")
class MomentumKeysPass(TokenPass):
    """Updates the momentum encoder (before the loss, from the parameters that compute it), encodes the
    step's original sentences with it, and returns the queue as it was before them: (<= K, d), empty at
    step 1; then adds them, gathered across processes."""

    def __init__(self, momentum: float = 0.995, queue_size: int = 160):
        super().__init__()
        # Plain attributes, not submodules: outside the optimiser, the heads' weights and DDP.
        self.momentum_encoder = MomentumEncoder(momentum)
        self.queue = KeyQueue(queue_size)

    def preparer(self, tokenizer) -> OriginalTokens:
        return OriginalTokens()

    def setup(self, encoder: nn.Module, source: str | None) -> None:
        self.momentum_encoder.start(encoder.backbone)

    def forward(self, tokens: TokenBatch, encoder: nn.Module, inputs: LossInputs) -> torch.Tensor:
        self.momentum_encoder.update(encoder.backbone)
        keys = gather_keys(self.momentum_encoder.encode(tokens.features, encoder, real_tokens=len(tokens.positions)))
        earlier = self.queue.rows(keys)
        self.queue.push(keys)
        return earlier

    def components(self) -> dict[str, Any]:
        return {"momentum_encoder": self.momentum_encoder, "queue": self.queue}


@LOSSES.register("esimcse", "ESimCSE: InfoNCE over in-batch positives and a queue of momentum-encoder keys of "
                            "earlier steps (momentum 0.995, 160 keys)")
class ESimCSELoss(LossTerm):
    """InfoNCE whose columns are the in-batch positives and then the queue (``momentum_keys``); the
    anchors are the rows, row i's target is column i; the queue's keys are always negatives.

    ``momentum``: lambda of the momentum encoder's EMA; ``queue_size``: K, the keys kept (the global
    batch's under several processes: scale it with the global batch, 2.5 x in the paper).
    """

    citation = citations.ESIMCSE
    needs = frozenset({"anchor", "positive", "momentum_keys"})

    def __init__(self, temperature: float = 0.05, momentum: float = 0.995, queue_size: int = 160,
                 projected: bool | None = None):
        super().__init__()
        if temperature <= 0:
            raise ValueError("temperature must be > 0")
        if not 0 <= momentum <= 1:
            raise ValueError("momentum must be in [0, 1]")
        if queue_size < 1:
            raise ValueError("queue_size must be >= 1")
        if projected:
            # The keys are the encoder's vectors (its pooler and MLP, as the authors'): a training head
            # would put the anchors and positives in another space than the queue's keys.
            raise ConfigError("model.projection: the esimcse queue holds the encoder's own vectors (its pooler and "
                              "MLP); a projection head would compare them with projected ones; set "
                              "model.projection: none")
        self.temperature = temperature
        self.token_passes = {"momentum_keys": {"momentum": momentum, "queue_size": queue_size}}

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        anchor, positive, queue = inputs.anchor, inputs.positive, inputs.momentum_keys
        logits = cosine_matrix(anchor, positive)
        if queue is not None and len(queue):
            logits = torch.cat([logits, cosine_matrix(anchor, queue)], dim=1)
        logits = logits / self.temperature
        targets = torch.arange(len(anchor), device=anchor.device)
        loss = F.cross_entropy(logits, targets)
        return loss, {"loss": loss.detach(), "acc": accuracy(logits, targets)}
