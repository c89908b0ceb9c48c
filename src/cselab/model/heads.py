"""Training-only heads over the pooled sentence vectors, found by name in ``HEADS``.

A projection head maps (B, h) -> (B, h') before the objective; encoding never uses it.
"""
from __future__ import annotations

from torch import nn

from cselab.registry import Registry

HEADS: Registry[nn.Module] = Registry("projection head")


@HEADS.register("none", "no projection: the objective sees the pooled vectors")
def no_head(hidden_size: int) -> nn.Module:
    return nn.Identity()


def build_head(name: str, hidden_size: int, **params) -> nn.Module:
    return HEADS.build(name, hidden_size=hidden_size, **params)


def init_like_backbone(head: nn.Module, backbone: nn.Module) -> nn.Module:
    """``model.head_init: bert``: BERT's initialisation of ``head``'s linear layers, which SimCSE's
    ``cl_init`` and DiffCSE's ``init_weights`` apply to their MLPs (``BertPreTrainedModel._init_weights``): weights
    from normal(0, the backbone's ``initializer_range``), biases zero. Batch norm and other layers keep
    torch's defaults (weight 1, bias 0), which are BERT's too for its normalisation layers."""
    std = getattr(backbone.config, "initializer_range", 0.02)
    for layer in head.modules():
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, mean=0.0, std=std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return head


@HEADS.register("clear_mlp", "CLEAR/SimCLR nonlinear projection: Linear-ReLU-Linear")
def clear_mlp(hidden_size: int, output_size: int | None = None) -> nn.Module:
    """Wu et al. 2020 (CLEAR) follow SimCLR (Chen et al. 2020): g(H) = W2 ReLU(W1 H)."""
    return nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, output_size or hidden_size))


@HEADS.register("bn_mlp", "2-layer batch-norm MLP, hidden width h: Linear-BN-ReLU-Linear-BN (diffcse_mlp is 2h wide)")
def bn_mlp(hidden_size: int, output_size: int | None = None) -> nn.Module:
    """DiffCSE's layout at hidden width h (half of DiffCSE's): a cheaper variant, kept for older runs."""
    return _batch_norm_mlp(hidden_size, hidden_size, output_size or hidden_size)


@HEADS.register("diffcse_mlp", "DiffCSE/AugCSE projection: Linear(h,2h)-BN-ReLU-Linear(2h,h)-BN, bias-free")
def diffcse_mlp(hidden_size: int, output_size: int | None = None) -> nn.Module:
    """Chuang et al. 2022 (DiffCSE) ``ProjectionMLP``, which AugCSE (Tang et al. 2022, sec. 4.3) trains
    with: bias-free Linear(h, 2h) -> BatchNorm1d(2h) -> ReLU -> bias-free Linear(2h, h) ->
    BatchNorm1d(h) without affine parameters (the layer sizes and flags are DiffCSE's public model
    code, which the AugCSE authors reuse; the paper says only "2-layer projection with batch norm").

    Batch norm: the training step calls the head once on all rows of the step (anchors, positives
    and label views together, ``train/steps.py:StepForward.project``), as DiffCSE/AugCSE do on
    their flattened (batch x views) tensor, so every view is normalised with the same statistics.
    With several processes it runs over the rows gathered from all of them, so the statistics are
    the global batch's, as with one process of that batch (``SyncBatchNorm``'s effect, which torch
    offers on GPUs only; the head's cost is small next to the encoder's, so each process computing
    it over the global batch costs little). Under GradCache (``optim.grad_cache_chunk``) the head
    runs once, in the loss pass, over the whole step as well.
    The head is training-only: ``SentenceEncoder.save`` writes the encoder, never the head, so
    the saved sentence-transformers model is the [CLS] encoder, as the paper evaluates it.
    """
    return _batch_norm_mlp(hidden_size, 2 * hidden_size, output_size or hidden_size)


def _batch_norm_mlp(in_size: int, hidden: int, out: int) -> nn.Module:
    # Bias-free linears: a bias right before batch norm is cancelled by its mean subtraction.
    return nn.Sequential(nn.Linear(in_size, hidden, bias=False), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, out, bias=False), nn.BatchNorm1d(out, affine=False))
