"""The forward pass of a BERT-family backbone on real tokens only (no compute on padding).

A batch of Wikipedia sentences at ``max_seq_len`` 32 is about 30% padding, and a padded forward
spends that share of every linear layer (nearly all of an encoder's FLOPs) on pad rows. Here:

1. the embeddings are computed on the padded batch (a lookup: cheap), then the real tokens are
   gathered once into a ``(tokens, hidden)`` matrix;
2. each layer's query/key/value projection (one fused matmul), attention output, feed-forward,
   dropout and layer norms work on that matrix; only the attention itself moves its rows into
   head-major ``(heads * batch, length, head_dim)`` blocks and back. Every such move is a gather,
   forward and backward (autograd would scatter-add, 4x slower on this CPU);
3. the hidden states are scattered back into the padded layout (zeros at pads), so poolers, the MLM
   head and ``output_hidden_states`` users see the shapes Hugging Face returns.

It uses the backbone's own modules and parameters and computes the same function as its forward
(``tests/scale/test_unpadded.py``: outputs and gradients); in training only the dropout draws
differ. Backbones with another layout (relative positions, decoders, other attention modules) are
not supported, nor transformers releases outside ``compat.TESTED_TRANSFORMERS`` (the layer modules
it runs by name are transformers' internals): :func:`supports_unpadding` says so and the encoder
keeps the padded path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from cselab.speed.compat import transformers_tested


def supports_unpadding(backbone: nn.Module) -> bool:
    """True for BERT/RoBERTa-style encoders: absolute positions and the standard layer modules, with
    a transformers release the unpadded forward was checked on."""
    if not transformers_tested():
        return False
    config = getattr(backbone, "config", None)
    if config is None or getattr(config, "is_decoder", False):
        return False
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        return False
    layers = getattr(getattr(backbone, "encoder", None), "layer", None)
    if not layers or not hasattr(backbone, "embeddings"):
        return False
    needed = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.self.dropout",
              "attention.output.dense",
              "attention.output.LayerNorm", "attention.output.dropout", "intermediate.dense",
              "intermediate.intermediate_act_fn", "output.dense", "output.LayerNorm", "output.dropout")
    for layer in layers:
        for dotted in needed:
            target = layer
            for name in dotted.split("."):
                target = getattr(target, name, None)
            if target is None:
                return False
    return True


ROW_MULTIPLE = 64


class _Positions:
    """Where a batch's real tokens sit. The rows are the real tokens in order, then zero rows up to
    a multiple of :data:`ROW_MULTIPLE`: a matmul's shape then takes a few values, not one per batch,
    and oneDNN reuses its compiled kernels (a new row count costs ~40 kernel compilations per step
    and their fresh code pages, ~10% of a step). The extra rows are never read as tokens: their
    values flow through the layers but no gather reads them back, so their gradient is zero.

    ``real`` (rows,) indexes each row's token in the flattened ``(batch * length)`` layout (any
    position for an extra row, zeroed after the gather); ``source`` (batch * length,) gives each
    position its row, or ``rows`` at a pad (one past the last: the zero row :func:`_pad` appends).
    """

    def __init__(self, attention_mask: torch.Tensor, tokens: int | None = None):
        device = attention_mask.device
        flat = attention_mask.reshape(-1)
        # The token count sets the shapes, so it must be a host integer: the caller's (counted on the
        # host when the batch was made), else read here (one wait for the device on a GPU).
        self.tokens = int(flat.sum()) if tokens is None else tokens
        self.rows = -(-self.tokens // ROW_MULTIPLE) * ROW_MULTIPLE
        # The real positions in order, without nonzero (whose output size the host must wait for): a
        # stable sort puts the real positions first, in order; the rest fill the extra rows (zeroed).
        order = torch.argsort((flat == 0).to(torch.uint8), stable=True)
        if self.rows <= len(order):
            self.real = order[: self.rows]
        else:
            self.real = torch.cat([order, order.new_zeros(self.rows - len(order))])
        self.source = torch.full((flat.numel(),), self.rows, dtype=torch.long, device=device)
        self.source.index_copy_(0, self.real[: self.tokens], torch.arange(self.tokens, device=device))


class _Pad(torch.autograd.Function):
    """(rows, groups * width) -> (groups, batch * length, width), zeros at the pads.

    Both directions are gathers: the backward reads the real positions' gradients back, instead of
    autograd's scatter-add of an ``index_select`` (4x slower here). It is exact, as the zero rows
    are constants."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, groups: int, positions: _Positions) -> torch.Tensor:
        ctx.positions = positions
        return _pad(rows, groups, positions)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _unpad(grad, ctx.positions), None, None


class _Unpad(torch.autograd.Function):
    """(groups, batch * length, width) -> (rows, groups * width): the real positions, then zero rows;
    the inverse of :class:`_Pad` (pads get zero gradient, as they were not read)."""

    @staticmethod
    def forward(ctx, blocks: torch.Tensor, positions: _Positions) -> torch.Tensor:
        ctx.positions, ctx.groups = positions, blocks.shape[0]
        return _unpad(blocks, positions)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _pad(grad, ctx.groups, ctx.positions), None


def _pad(rows: torch.Tensor, groups: int, positions: _Positions) -> torch.Tensor:
    per_group = rows.reshape(rows.shape[0], groups, -1).transpose(0, 1)
    # One copy makes the group-major layout and appends the zero row that pads gather.
    with_zero = torch.cat([per_group, per_group.new_zeros(groups, 1, per_group.shape[-1])], dim=1)
    return with_zero.index_select(1, positions.source)


def _unpad(blocks: torch.Tensor, positions: _Positions) -> torch.Tensor:
    rows = blocks.index_select(1, positions.real)
    rows[:, positions.tokens:].zero_()  # the extra rows (a fill, not a tensor made from a Python 0)
    return rows.transpose(0, 1).reshape(rows.shape[1], -1)


def unpadded_forward(backbone: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     token_type_ids: torch.Tensor | None = None, all_hidden_states: bool = False,
                     real_tokens: int | None = None) -> tuple[torch.Tensor, ...]:
    """Hidden states (batch, length, hidden), padded with zeros: the last layer's, or with
    ``all_hidden_states`` the embeddings' and every layer's (as Hugging Face's ``hidden_states``).
    Dropout is the backbone's own modules' (whatever the training loop swapped in). ``real_tokens``:
    the mask's sum, known on the host (the training step's batch counts it); without it the sum is
    read back from the device.
    """
    batch, length = input_ids.shape
    positions = _Positions(attention_mask, real_tokens)

    def padded(rows: torch.Tensor) -> torch.Tensor:
        return _Pad.apply(rows, 1, positions).view(batch, length, -1)

    embedded = backbone.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    hidden = _Unpad.apply(embedded.reshape(1, batch * length, -1), positions)
    if torch.is_autocast_enabled(hidden.device.type):
        # The residual stream in the autocast dtype: otherwise every layer norm returns fp32 and
        # each of the next layer's matmuls casts it back (a copy of the activations per matmul).
        hidden = hidden.to(torch.get_autocast_dtype(hidden.device.type))
    dtype = hidden.dtype
    # Added to the scores of pad keys (as Hugging Face's additive mask), for every (head, sentence)
    # block: an addition fused into the score matmul, where a bool mask would be a slow extra pass.
    heads = backbone.encoder.layer[0].attention.self.num_attention_heads
    key_bias = torch.zeros(batch, 1, length, dtype=dtype, device=input_ids.device)
    key_bias.masked_fill_(attention_mask[:, None, :] == 0, torch.finfo(dtype).min)
    key_bias = key_bias.repeat(heads, 1, 1)  # (heads * batch, 1, length): head-major, as the blocks
    states = [embedded] if all_hidden_states else []
    for layer in backbone.encoder.layer:
        hidden = _layer(layer, hidden, positions, key_bias)
        if all_hidden_states:
            states.append(padded(hidden))
    # Poolers and losses get fp32, as from the padded forward.
    return tuple(s.float() for s in states) if all_hidden_states else (padded(hidden.float()),)


def _layer(layer: nn.Module, hidden: torch.Tensor, positions: _Positions, key_bias: torch.Tensor) -> torch.Tensor:
    """One post-norm transformer layer (BERT's) on the (rows, hidden) matrix; ``key_bias`` is
    (heads * batch, 1, length)."""
    attention = layer.attention.self
    heads, head_dim = attention.num_attention_heads, attention.attention_head_size
    # Query, key and value in one matmul over the real rows; the query part carries the
    # 1/sqrt(head_dim) scale (a 384 x 384 product instead of a pass over every score).
    scale = head_dim ** -0.5
    qkv = F.linear(hidden, torch.cat([attention.query.weight * scale, attention.key.weight, attention.value.weight]),
                   torch.cat([attention.query.bias * scale, attention.key.bias, attention.value.bias]))
    # Head-major padded blocks (3 * heads * batch, length, head_dim): each (head, sentence) block is
    # contiguous, so the attention matmuls need no further copies.
    blocks = _Pad.apply(qkv, 3 * heads, positions).view(3, -1, key_bias.shape[-1], head_dim)
    query, key, value = blocks.unbind(0)  # its backward is one stack, not three zero-filled copies
    scores = torch.baddbmm(key_bias, query, key.transpose(1, 2))
    probs = attention.dropout(torch.softmax(scores, dim=-1))
    context = torch.bmm(probs, value).view(heads, -1, head_dim)  # (heads, batch * length, head_dim)
    context = _Unpad.apply(context, positions)  # pad queries' rows are dropped
    out = layer.attention.output
    hidden = out.LayerNorm(out.dropout(out.dense(context)) + hidden)
    inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(hidden))
    out = layer.output
    return out.LayerNorm(out.dropout(out.dense(inner)) + hidden)
