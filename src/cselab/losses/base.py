"""The step -> objective hand-off: what a loss term receives, declares and returns.

Every term is a ``LossTerm`` (an ``nn.Module``) whose ``forward(inputs: LossInputs)`` returns
``(loss, logs)``: a scalar tensor and a dict of detached scalar tensors to log. Logs stay on the
device; the training loop reads them back once per log window, so a term never forces the host to wait for the GPU.
Each term declares in ``needs`` the fields of ``LossInputs`` it cannot do without (hard negatives
are read when a step has them); a recipe whose views cannot provide them fails before training, and
the step computes only what some term reads (no contrastive pass for MLM alone).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields

import torch
from torch import nn

from cselab.registry import Registry


@dataclass
class MaskedTokens:
    """The MLM pass of a step: the encoder's MLM head over the masked positions, and what they were.

    logits: (K, V) the backbone's own MLM head (``model/mlm_head.py``) at the K masked positions;
    labels: (K,) the original token ids.
    """

    logits: torch.Tensor
    labels: torch.Tensor


_VIEW = {"view": True}


@dataclass
class LossInputs:
    """Embeddings of one training step by role, rows aligned with the anchors.

    anchor, positive: (N, d) after the training head. negative: (M, d) hard negatives of the first M
    anchors. label_view: (N, d) each anchor's augmented text (AugCSE); labels: (N,) its augmentation
    type (0 = unchanged). masked: the MLM pass (CLEAR, pre-training). negative_positive: (M, d) a second
    encoding of each hard negative (its own dropout view, rows aligned with ``negative``), only on steps
    with hard negatives and only when some term wants it (UNA's 4N NT-Xent). An objective of MLM alone
    gets no embeddings at all (the step skips the contrastive forward pass).
    """

    # The view roles: each is rows of the step's encoded batch, in this order (the collator's row
    # order, data/collate.py). A new role is one field here, marked _VIEW, plus the code that makes its
    # texts (the collator's rows of it); the step, the gather across processes, the head and the
    # recipe check read the roles from these fields.
    anchor: torch.Tensor | None = field(default=None, metadata=_VIEW)
    positive: torch.Tensor | None = field(default=None, metadata=_VIEW)
    negative: torch.Tensor | None = field(default=None, metadata=_VIEW)
    negative_positive: torch.Tensor | None = field(default=None, metadata=_VIEW)
    label_view: torch.Tensor | None = field(default=None, metadata=_VIEW)
    labels: torch.Tensor | None = None  # rows aligned with label_view; gathered across processes like a view
    masked: MaskedTokens | None = None  # per process: the MLM pass is not gathered


class LossTerm(nn.Module):
    """The base class of an objective term: subclass it in ``losses/<name>.py`` and register the class
    with ``@LOSSES.register("name", "one line")``. Its hooks (class attributes, or set per instance
    in ``__init__`` where they depend on the parameters):

    - ``needs``: the fields of ``LossInputs`` it cannot do without (checked against them when a recipe
      is validated; a recipe whose views cannot provide them fails before training);
    - ``wants``: fields it reads when the step has them (hard negatives exist on UNA's steps only); the
      step builds ``negative_positive`` (M more encoded rows) only when some term wants it;
    - ``masking``: for a term that needs ``masked``, the collator's MLM rates (``MlmMasking``'s keyword
      arguments: probability, mask_replace_prob, random_replace_prob, whole_word);
    - ``num_labels``: for a term that reads label views, how many labels it predicts (checked against
      ``len(views.label) + 1``);
    - ``citation``: the BibTeX of the paper whose objective this is (``cselab/citations.py``; "" for none).

    The constructor's parameters are what a recipe's term may set; their defaults give the types a
    recipe's values must have (``LOSSES.argument_problem``). What is known only from the model
    (``embedding_size``, ``hidden_size``, ``vocab_size``, ``model_type``, ``hidden_act``,
    ``layer_norm_eps``, ``num_labels``) is taken as keyword parameters defaulting to None: a recipe is
    validated by building every term without them, so a term builds its layers only once they are
    known; the training loop fills those the recipe leaves null (``train/parts.py:term_context``).

    ``forward(inputs)`` returns ``(loss, logs)``: a scalar tensor and short names -> detached scalar
    tensors (``loss``, ``acc``...). The objective logs them under the term's name (``infonce.acc``),
    so two terms never overwrite each other's values.
    """

    needs: frozenset[str] = frozenset()
    wants: frozenset[str] = frozenset()
    masking: dict | None = None
    num_labels: int | None = None
    citation: str = ""

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError


#: The loss terms by name; each module of this package registers its own on import.
LOSSES: Registry[LossTerm] = Registry("loss")


#: The view roles, in the collator's row order: the fields of ``LossInputs`` that are encoded rows.
VIEW_ROLES = tuple(f.name for f in fields(LossInputs) if f.metadata.get("view"))


def build_term(name: str, params: dict, context: dict | None = None) -> LossTerm:
    """The term ``name`` with a recipe's ``params``; ``context`` fills the sizes it accepts but the recipe
    left unset (known before step 1). A term that takes a ``context`` parameter (a wrapper) gets the
    whole mapping, for the term it wraps."""
    params = dict(params)
    accepted = inspect.signature(LOSSES.get(name)).parameters
    for key, value in (context or {}).items():
        if key in accepted and params.get(key) is None and value is not None:
            params[key] = value
    if "context" in accepted:
        params["context"] = context
    return LOSSES.build(name, **params)


def input_fields() -> tuple[str, ...]:
    """The fields a term may name in ``needs`` or ``wants``."""
    return tuple(f.name for f in fields(LossInputs))


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.factor * grad, None


def scale_gradient(x: torch.Tensor, factor: float) -> torch.Tensor:
    """Identity forward; backward multiplies the gradient by ``factor`` (gradient reversal: a
    negative factor; the gather across processes: their number)."""
    return _ScaleGradient.apply(x, factor)


def accuracy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Share of rows whose highest logit is the target, as a detached tensor (no host sync)."""
    return (logits.detach().argmax(dim=-1) == targets).float().mean()
