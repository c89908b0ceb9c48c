"""Embedding-level positives: a term wrapper that replaces the positives by augmented embeddings.

The embedding-level augmentations compared in UNA's appendix (Table C3, after MODALS, Cheung &
Yeung 2021), applied to the positive view's embedding z (the anchor's dropout view by default):

- ``gaussian``:    z + eps, eps ~ N(0, (strength * std_batch)^2) per dimension, std over the batch;
- ``interpolate``: z + strength * (z_h - z), z_h the hardest in-batch example (most similar other anchor);
- ``extrapolate``: z + strength * (z - z_h), moving away from the hardest example.

The hardest example is chosen without gradient; the new positive keeps the gradient of z and z_h.
The wrapped term (``inner``, any objective term as a mapping, InfoNCE by default) then sees the
new positives; its own parameters are trained with the wrapper.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from cselab import citations
from cselab.losses.base import LOSSES, LossInputs, LossTerm, build_term

KINDS = ("none", "gaussian", "interpolate", "extrapolate")


def hardest_in_batch(anchor: torch.Tensor) -> torch.Tensor:
    """Index of each row's most cosine-similar other row."""
    with torch.no_grad():
        sims = F.normalize(anchor.float(), dim=-1) @ F.normalize(anchor.float(), dim=-1).T
        sims.fill_diagonal_(float("-inf"))
        return sims.argmax(dim=1)


def embedding_positive(anchor: torch.Tensor, positive: torch.Tensor, kind: str, strength: float,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    if kind == "none":
        return positive
    if kind == "gaussian":
        scale = positive.detach().float().std(dim=0, keepdim=True).clamp(min=1e-6)
        noise = torch.randn(positive.shape, generator=generator, device=positive.device) * scale * strength
        return positive + noise.to(positive.dtype)
    hardest = positive[hardest_in_batch(anchor)]
    if kind == "interpolate":
        return positive + strength * (hardest - positive)
    return positive + strength * (positive - hardest)  # extrapolate


@LOSSES.register("embedding_positive",
                 "wrap a term: positives from Gaussian noise / hard-example inter- or extrapolation")
class EmbeddingPositiveTerm(LossTerm):
    citation = ""  # per instance: UNA's appendix and the wrapped term's paper
    def __init__(self, kind: str = "gaussian", strength: float = 0.1, inner: dict | None = None,
                 context: dict | None = None):
        """``context``: what the training loop knows of the model (sizes, ``model_type``), for the inner term."""
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if strength < 0:
            raise ValueError("strength must be >= 0")
        inner = dict(inner or {"name": "infonce", "temperature": 0.05})
        if not isinstance(inner, dict) or "name" not in inner:
            raise ValueError("inner must be a mapping with a 'name', e.g. {name: infonce, temperature: 0.05}")
        name = inner.pop("name")
        inner.pop("weight", None)  # the wrapper's own weight applies
        if name not in LOSSES:
            raise ValueError(f"inner: unknown loss {name!r} (known: {', '.join(LOSSES.names())})")
        try:
            self.inner = build_term(name, inner, context)
        except TypeError as exc:
            raise ValueError(f"inner ({name}): {exc}") from None
        self.kind, self.strength = kind, strength
        self.needs = frozenset({"anchor", "positive"}) | self.inner.needs
        self.wants = self.inner.wants
        # UNA's appendix compares these embedding-level positives; the wrapped term cites its own paper.
        self.citation = citations.join(citations.UNA, self.inner.citation)

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        positive = embedding_positive(inputs.anchor, inputs.positive, self.kind, self.strength)
        return self.inner(dataclasses.replace(inputs, positive=positive))
