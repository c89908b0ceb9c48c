"""The step -> objective hand-off: what a loss term receives, declares and returns.

Every term is a ``LossTerm`` (an ``nn.Module``) whose ``forward(inputs: LossInputs)`` returns
``(loss, logs)``: a scalar tensor and a dict of detached scalar tensors to log. Logs stay on the
device; the training loop reads them back once per log window, so a term never forces the host to wait for the GPU.
Each term declares in ``needs`` the fields of ``LossInputs`` it cannot do without (hard negatives
are read when a step has them); a recipe whose views cannot provide them fails before training, and
the step computes only what some term reads (no contrastive pass for MLM alone).

What a term reads comes from two registries here: the view roles (``VIEW_ROLES``: rows of the
step's encoded batch, one sentence vector each) and the token-level passes (``TOKEN_PASSES``: the
step's sentences changed token by token in the collator, run through the backbone by the step,
such as MLM's masked tokens).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from cselab.registry import Registry


@dataclass
class TokenBatch:
    """What the collator makes for a token-level pass (host tensors, made in the loader's workers).

    features: the tokenised sentences as the pass changed them (``input_ids``, ``attention_mask``...);
    positions: (K,) the positions the pass acts on, in the flattened (batch x length) layout;
    labels: (K,) what is due there (MLM: the original ids of the masked tokens).
    """

    features: dict[str, torch.Tensor]
    positions: torch.Tensor
    labels: torch.Tensor

    def pin_memory(self) -> TokenBatch:
        return TokenBatch({k: v.pin_memory() for k, v in self.features.items()}, self.positions.pin_memory(),
                          self.labels.pin_memory())

    def to(self, device: torch.device) -> TokenBatch:
        return TokenBatch({k: v.to(device, non_blocking=True) for k, v in self.features.items()},
                          self.positions.to(device, non_blocking=True), self.labels.to(device, non_blocking=True))


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

    # The package's view roles: each is rows of the step's encoded batch, in this order (the collator's
    # row order, data/collate.py), registered below in VIEW_ROLES with the function giving its texts.
    # A role from outside the package is registered alone (register_view_role) and lives in `extra`;
    # the step, the gather across processes, the head and the recipe check iterate over VIEW_ROLES.
    anchor: torch.Tensor | None = field(default=None, metadata=_VIEW)
    positive: torch.Tensor | None = field(default=None, metadata=_VIEW)
    negative: torch.Tensor | None = field(default=None, metadata=_VIEW)
    negative_positive: torch.Tensor | None = field(default=None, metadata=_VIEW)
    label_view: torch.Tensor | None = field(default=None, metadata=_VIEW)
    labels: torch.Tensor | None = None  # rows aligned with label_view; gathered across processes like a view
    # The token-level passes' outputs (TOKEN_PASSES), per process (never gathered). The package's MLM
    # pass is this field; a pass added from outside the package lives in `tokens`.
    masked: MaskedTokens | None = None
    # The rows of roles added from outside the package (register_view_role), read as inputs.NAME.
    extra: dict[str, torch.Tensor] = field(default_factory=dict)
    # The outputs of token passes added from outside the package (register_token_pass), read as inputs.NAME.
    tokens: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str):
        # Only for names that are no field: a role or a token pass added from outside the package (None on
        # a step without it).
        for added in (self.__dict__.get("extra") or {}, self.__dict__.get("tokens") or {}):
            if name in added:
                return added[name]
        if name in VIEW_ROLES or name in TOKEN_PASSES:
            return None
        raise AttributeError(f"LossInputs has no field, view role or token pass {name!r}")

    def views(self) -> dict[str, torch.Tensor]:
        """The step's encoded rows by role, in the roles' order, those it has."""
        return {role: rows for role in VIEW_ROLES if (rows := getattr(self, role)) is not None}

    def with_views(self, views: dict[str, torch.Tensor]) -> LossInputs:
        """A copy with these roles' rows replaced (a field, or a role added with register_view_role)."""
        own = {role: rows for role, rows in views.items() if role in _FIELD_ROLES}
        extra = {**self.extra, **{role: rows for role, rows in views.items() if role not in _FIELD_ROLES}}
        return replace(self, **own, extra=extra)

    def with_tokens(self, outputs: dict[str, Any]) -> LossInputs:
        """A copy with these token passes' outputs (a field, or a pass added with register_token_pass)."""
        own = {name: output for name, output in outputs.items() if name in _FIELD_PASSES}
        tokens = {**self.tokens, **{name: output for name, output in outputs.items() if name not in _FIELD_PASSES}}
        return replace(self, **own, tokens=tokens)


class LossTerm(nn.Module):
    """The base class of an objective term: subclass it in ``losses/<name>.py`` and register the class
    with ``@LOSSES.register("name", "one line")``. Its hooks (class attributes, or set per instance
    in ``__init__`` where they depend on the parameters):

    - ``needs``: the fields of ``LossInputs`` it cannot do without (checked against them when a recipe
      is validated; a recipe whose views cannot provide them fails before training);
    - ``wants``: fields it reads when the step has them (hard negatives exist on UNA's steps only); the
      step builds ``negative_positive`` (M more encoded rows) only when some term wants it;
    - ``token_passes``: for a term that reads a token-level pass (a name in ``TOKEN_PASSES``, such as
      ``masked``), that pass's parameters, ``{name: {parameter: value}}`` (MLM: the masking rates);
      terms reading one pass must give it the same;
    - ``num_labels``: for a term that reads label views, how many labels it predicts (checked against
      ``len(views.label) + 1``);
    - ``citation``: the BibTeX of the paper whose objective this is (``cselab/citations.py``; "" for none);
    - ``models``: for a term whose run loads a model of its own (DiffCSE's generator), its constructor
      parameters that name one (a directory or a Hub name), each with what to give instead when it
      cannot be loaded; checked before any work (``losses.check_models``: first in ``train()``, and by
      ``--paper-setting``), so that an offline run stops at once with one line naming the key.

    The constructor's parameters are what a recipe's term may set; their defaults give the types a
    recipe's values must have (``LOSSES.argument_problem``). What is known only from the model
    (``embedding_size``, ``hidden_size``, ``vocab_size``, ``model_type``, ``hidden_act``,
    ``layer_norm_eps``, ``num_labels``, ``projected``: a training head runs after the pooler) is taken as keyword
    parameters defaulting to None: a recipe is
    validated by building every term without them, so a term builds its layers only once they are
    known; the training loop fills those the recipe leaves null (``train/setup.py:term_context``).

    ``forward(inputs)`` returns ``(loss, logs)``: a scalar tensor and short names -> detached scalar
    tensors (``loss``, ``acc``...). The objective logs them under the term's name (``infonce.acc``),
    so two terms never overwrite each other's values.
    """

    needs: frozenset[str] = frozenset()
    wants: frozenset[str] = frozenset()
    token_passes: Mapping[str, Mapping[str, Any]] = MappingProxyType({})
    num_labels: int | None = None
    citation: str = ""
    models: Mapping[str, str] = MappingProxyType({})

    def forward(self, inputs: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError

    def components(self) -> dict[str, Any]:
        """State the term keeps across steps besides its trainable weights, ``{name: component}``, each
        with ``state_dict()``/``load_state_dict()`` (and a ``version``): checkpointed with the run as
        ``TERM.NAME`` (``train/state.py``). None by default."""
        return {}


#: The loss terms by name; each module of this package registers its own on import.
LOSSES: Registry[LossTerm] = Registry("loss", base=LossTerm)


#: The view roles, in the collator's row order (registration order, also when iterated): a role's
#: name and the function that gives its texts, ``(views) -> list[str] | None``: ``views`` the step's
#: views (``data/views.py:StepViews``); one text per anchor, or None on a step without the role (the
#: same answer on every process: each role's rows are gathered across processes). The package's
#: roles are the fields of ``LossInputs`` marked as views; a role added from outside
#: (``@register_view_role``) is read as ``inputs.NAME``. A role in ``ON_DEMAND`` is made only when
#: some term needs or wants it (each row costs an encoder pass).
VIEW_ROLES: Registry[list[str] | None] = Registry("view role", ordered=True)
ON_DEMAND: set[str] = set()
_FIELD_ROLES = tuple(f.name for f in fields(LossInputs) if f.metadata.get("view"))


def register_view_role(name: str, description: str, on_demand: bool = True) -> Callable:
    """``@register_view_role("name", "one line")`` on ``texts(views) -> list[str] | None``: a new role of
    the step's encoded rows (after the package's own, in the order of registration); ``on_demand``:
    made only on runs where some term reads it."""
    if name not in _FIELD_ROLES and (name in {f.name for f in fields(LossInputs)} or hasattr(LossInputs, name)):
        raise ValueError(f"view role {name!r}: the name of a LossInputs attribute")
    if on_demand:
        ON_DEMAND.add(name)
    return VIEW_ROLES.register(name, description)


# The package's roles, in the fields' order (functions, not lambdas: the collator holding them is
# pickled into data-loader workers).
@register_view_role("anchor", "the anchor texts as encoded (augmented when views.anchor is set)", on_demand=False)
def _anchor_texts(views) -> list[str]:
    return views.anchors


@register_view_role("positive", "each anchor's positive; the anchor again (a dropout view) without views.positive",
                    on_demand=False)
def _positive_texts(views) -> list[str]:
    return views.positives if views.positives is not None else views.anchors


@register_view_role("negative", "each anchor's hard negative, on steps with them", on_demand=False)
def _negative_texts(views) -> list[str] | None:
    return views.negatives


@register_view_role("negative_positive", "the hard negatives again, their own dropout view (UNA's 4N NT-Xent)")
def _negative_again_texts(views) -> list[str] | None:
    return views.negatives


@register_view_role("label_view", "each anchor's augmented text whose type views.label's labels give (AugCSE)",
                    on_demand=False)
def _label_view_texts(views) -> list[str] | None:
    return views.label_texts


assert VIEW_ROLES.names() == list(_FIELD_ROLES)  # the fields' order is the rows' order


class TokenPass(nn.Module):
    """The base class of a token-level pass: the step's sentences changed token by token (masked,
    corrupted) and run through the backbone, for the terms that read it as ``inputs.NAME``. Subclass
    it and register the class with ``@register_token_pass("NAME", "one line")``, in the file of the
    objective that reads it (``mlm.py``: the ``masked`` pass and the MLM term).

    A run builds a pass when some term names it in ``needs`` or ``wants``, with the parameters that
    term gives in ``token_passes[NAME]`` (the constructor's parameters, typed by their defaults). Its
    three hooks are the three places it runs:

    - ``preparer(tokenizer)``: what the collator makes, in the loader's workers: a picklable callable
      ``(features, seed) -> TokenBatch`` over the step's original sentences, tokenised (the seed is the
      step's own for this pass, so a resumed run makes the same tokens);
    - ``setup(encoder, source)``: once, before step 1, the modules the step runs are built or loaded
      (MLM: the backbone's own MLM head, with the weights of ``source``, the model's name or path; None
      for a model built from a config);
    - ``forward(tokens, encoder, inputs)``: in the step, on the device, under the run's precision:
      ``tokens`` the ``TokenBatch`` there, ``inputs`` this process's rows of the sentence vectors by role,
      after the training head (none for an objective without views). It returns what the terms read.

    The pass's own trainable parameters are trained and checkpointed with the run's other heads.
    """

    def preparer(self, tokenizer) -> Callable[[dict[str, torch.Tensor], int], TokenBatch]:
        raise NotImplementedError

    def setup(self, encoder: nn.Module, source: str | None) -> None:
        """Nothing to build by default."""

    def forward(self, tokens: TokenBatch, encoder: nn.Module, inputs: LossInputs) -> Any:
        raise NotImplementedError

    def components(self) -> dict[str, Any]:
        """State the pass keeps across steps besides its trainable weights (a momentum encoder, a queue),
        ``{name: component}``, checkpointed with the run as ``PASS.NAME`` (``LossTerm.components``)."""
        return {}


#: The token-level passes by name, in registration order (a run's passes take their seed streams in
#: this order, data/seeds.py: token_pass_stream; the package's register as their modules are imported,
#: alphabetically).
TOKEN_PASSES: Registry[TokenPass] = Registry("token pass", ordered=True, base=TokenPass)
_FIELD_PASSES = ("masked",)  # passes whose output is a field of LossInputs (the others: LossInputs.tokens)


def register_token_pass(name: str, description: str) -> Callable:
    """``@register_token_pass("name", "one line")`` on a ``TokenPass`` subclass: a pass terms read as
    ``inputs.name`` (the name may be no other LossInputs attribute, nor a view role)."""
    if name not in _FIELD_PASSES and (name in VIEW_ROLES or hasattr(LossInputs, name)
                                      or name in {f.name for f in fields(LossInputs)}):
        raise ValueError(f"token pass {name!r}: the name of a LossInputs attribute or a view role")
    return TOKEN_PASSES.register(name, description)


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
    """The fields a term may name in ``needs`` or ``wants``: those of ``LossInputs``, every view role
    and every token pass."""
    own = (f.name for f in fields(LossInputs) if f.name not in ("extra", "tokens"))
    return tuple(dict.fromkeys([*own, *VIEW_ROLES, *TOKEN_PASSES]))


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
