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

from typing import Protocol

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


class CompiledRows(Protocol):
    """:func:`encode_rows` compiled, with the length bucket its batches are padded to
    (``compiled.CompiledLayers``)."""

    def length_bucket(self, length: int) -> int: ...

    def __call__(self, layers: nn.ModuleList, embedded: torch.Tensor, attention_mask: torch.Tensor,
                 source: torch.Tensor, real: torch.Tensor, zero_from: int | None, dtype: torch.dtype,
                 all_hidden_states: bool) -> tuple[torch.Tensor, ...]: ...


class _Positions:
    """Where a batch's real tokens sit. The rows are the real tokens in order, then extra rows up to
    a multiple of :data:`ROW_MULTIPLE`: a matmul's shape then takes a few values, not one per batch,
    and oneDNN reuses its compiled kernels (a new row count costs ~40 kernel compilations per step
    and their fresh code pages, ~10% of a step). An extra row takes part in no output, and its
    gradient is zero: it holds a pad position's values (a pad's gradient is zero: its key is masked,
    its value weighted 0, its query's output never read), or, past the last position, position 0's,
    zeroed after every gather (``zero_from``). ``within``: never past the last position (the rows
    stop there), so that nothing needs zeroing (the compiled path: no row count in the graph).

    ``real`` (rows,) indexes each row's position in the flattened ``(batch * length)`` layout;
    ``source`` (batch * length,) gives each real position its row and each pad ``rows`` (one past
    the last: the zero row :func:`_pad` appends). Both are made on the device without a read-back;
    only the row count must be known on the host (it sets the shapes).
    """

    def __init__(self, attention_mask: torch.Tensor, tokens: int | None = None, within: bool = False):
        flat = attention_mask.reshape(-1)
        # The token count sets the shapes, so it must be a host integer: the caller's (counted on the
        # host when the batch was made), else read here (one wait for the device on a GPU).
        self.tokens = int(flat.sum()) if tokens is None else tokens
        self.rows = -(-self.tokens // ROW_MULTIPLE) * ROW_MULTIPLE
        if within:
            self.rows = min(self.rows, flat.numel())
        # The real positions in order, without nonzero (whose output size the host must wait for): a
        # stable sort puts the real positions first, in order, then the pads.
        order = torch.argsort((flat == 0).to(torch.uint8), stable=True)
        self.zero_from: int | None = None
        if self.rows <= len(order):
            self.real = order[: self.rows]
        else:
            self.real = torch.cat([order, order.new_zeros(self.rows - len(order))])
            self.zero_from = self.tokens
        # A real position's row is the number of real positions before it.
        self.source = torch.where(flat != 0, flat.cumsum(0) - 1, self.rows)


class _Pad(torch.autograd.Function):
    """(rows, groups * width) -> (groups, batch * length, width), zeros at the pads.

    Both directions are gathers: the backward reads the real positions' gradients back, instead of
    autograd's scatter-add of an ``index_select`` (4x slower on a CPU). It is exact, as the zero
    rows are constants. The index tensors are arguments (not context attributes) so that
    torch.compile traces it."""

    @staticmethod
    def forward(ctx, rows: torch.Tensor, groups: int, source: torch.Tensor, real: torch.Tensor,
                zero_from: int | None) -> torch.Tensor:
        ctx.save_for_backward(source, real)
        ctx.zero_from = zero_from
        return _pad(rows, groups, source)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        _, real = ctx.saved_tensors
        return _unpad(grad, real, ctx.zero_from), None, None, None, None


class _Unpad(torch.autograd.Function):
    """(groups, batch * length, width) -> (rows, groups * width): the real positions, then the extra
    rows; the inverse of :class:`_Pad` (pads get zero gradient, as they were not read)."""

    @staticmethod
    def forward(ctx, blocks: torch.Tensor, source: torch.Tensor, real: torch.Tensor,
                zero_from: int | None) -> torch.Tensor:
        ctx.save_for_backward(source, real)
        ctx.groups = blocks.shape[0]
        return _unpad(blocks, real, zero_from)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        source, _ = ctx.saved_tensors
        return _pad(grad, ctx.groups, source), None, None, None


def _pad(rows: torch.Tensor, groups: int, source: torch.Tensor) -> torch.Tensor:
    per_group = rows.reshape(rows.shape[0], groups, -1).transpose(0, 1)
    # One copy makes the group-major layout and appends the zero row that pads gather.
    with_zero = torch.cat([per_group, per_group.new_zeros(groups, 1, per_group.shape[-1])], dim=1)
    return with_zero.index_select(1, source)


def _unpad(blocks: torch.Tensor, real: torch.Tensor, zero_from: int | None) -> torch.Tensor:
    rows = blocks.index_select(1, real)
    if zero_from is not None:
        rows[:, zero_from:].zero_()  # the copies of position 0 past the last position (a fill, not a tensor)
    return rows.transpose(0, 1).reshape(rows.shape[1], -1)


def unpadded_forward(backbone: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     token_type_ids: torch.Tensor | None = None, all_hidden_states: bool = False,
                     real_tokens: int | None = None,
                     compiled: CompiledRows | None = None) -> tuple[torch.Tensor, ...]:
    """Hidden states (batch, length, hidden), padded with zeros: the last layer's, or with
    ``all_hidden_states`` the embeddings' and every layer's (as Hugging Face's ``hidden_states``).
    Dropout is the backbone's own modules' (whatever the training loop swapped in). ``real_tokens``:
    the mask's sum, known on the host (the training step's batch counts it); without it the sum is
    read back from the device. ``compiled``: the layers compiled (``speed/compiled.py``); the batch
    is then padded to its length bucket first (pads change no real token's value), so that the
    compiled shapes take few values.
    """
    length = input_ids.shape[1]
    if compiled is not None:
        input_ids, attention_mask, token_type_ids = _padded_to(
            compiled.length_bucket(length), backbone.config.pad_token_id or 0, input_ids, attention_mask,
            token_type_ids)
    positions = _Positions(attention_mask, real_tokens, within=compiled is not None)
    embedded = backbone.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    # The residual stream in the autocast dtype: otherwise the first layer's matmuls would each cast it.
    autocasting = torch.is_autocast_enabled(embedded.device.type)
    dtype = torch.get_autocast_dtype(embedded.device.type) if autocasting else embedded.dtype
    run = encode_rows if compiled is None else compiled
    states = run(backbone.encoder.layer, embedded, attention_mask, positions.source, positions.real,
                 positions.zero_from, dtype, all_hidden_states)
    if states[0].shape[1] != length:  # the bucket's extra pad columns
        states = tuple(s[:, :length] for s in states)
    return states


def _padded_to(length: int, pad_id: int, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               token_type_ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The batch with pad columns up to ``length`` (pad ids, mask 0, token type 0)."""
    extra = length - input_ids.shape[1]
    if extra <= 0:
        return input_ids, attention_mask, token_type_ids
    input_ids = F.pad(input_ids, (0, extra), value=pad_id)
    attention_mask = F.pad(attention_mask, (0, extra), value=0)
    if token_type_ids is not None:
        token_type_ids = F.pad(token_type_ids, (0, extra), value=0)
    return input_ids, attention_mask, token_type_ids


def encode_rows(layers: nn.ModuleList, embedded: torch.Tensor, attention_mask: torch.Tensor, source: torch.Tensor,
                real: torch.Tensor, zero_from: int | None, dtype: torch.dtype,
                all_hidden_states: bool) -> tuple[torch.Tensor, ...]:
    """The backbone's layers on the real rows of ``embedded`` (batch, length, hidden): the states of
    :func:`unpadded_forward`, padded and in fp32. What ``train.compile`` compiles (everything here
    is traceable: no read-back, no shape taken from the data)."""
    batch, length = attention_mask.shape

    def padded(rows: torch.Tensor) -> torch.Tensor:
        return _Pad.apply(rows, 1, source, real, zero_from).view(batch, length, -1)

    hidden = _Unpad.apply(embedded.reshape(1, batch * length, -1), source, real, zero_from).to(dtype)
    # Added to the scores of pad keys (as Hugging Face's additive mask), for every (head, sentence)
    # block: an addition fused into the score matmul, where a bool mask would be a slow extra pass.
    heads = layers[0].attention.self.num_attention_heads
    key_bias = torch.zeros(batch, 1, length, dtype=dtype, device=embedded.device)
    key_bias.masked_fill_(attention_mask[:, None, :] == 0, torch.finfo(dtype).min)
    key_bias = key_bias.repeat(heads, 1, 1)  # (heads * batch, 1, length): head-major, as the blocks
    states = [embedded] if all_hidden_states else []
    for layer in layers:
        hidden = _layer(layer, hidden, source, real, zero_from, key_bias)
        if all_hidden_states:
            states.append(padded(hidden))
    # Poolers and losses get fp32, as from the padded forward.
    return tuple(s.float() for s in states) if all_hidden_states else (padded(hidden.float()),)


def _layer(layer: nn.Module, hidden: torch.Tensor, source: torch.Tensor, real: torch.Tensor,
           zero_from: int | None, key_bias: torch.Tensor) -> torch.Tensor:
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
    blocks = _Pad.apply(qkv, 3 * heads, source, real, zero_from).view(3, -1, key_bias.shape[-1], head_dim)
    query, key, value = blocks.unbind(0)  # its backward is one stack, not three zero-filled copies
    scores = torch.baddbmm(key_bias, query, key.transpose(1, 2))
    probs = attention.dropout(torch.softmax(scores, dim=-1))
    context = torch.bmm(probs, value).view(heads, -1, head_dim)  # (heads, batch * length, head_dim)
    context = _Unpad.apply(context, source, real, zero_from)  # pad queries' rows are dropped
    out = layer.attention.output
    hidden = out.LayerNorm(out.dropout(out.dense(context)) + hidden)
    inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(hidden))
    out = layer.output
    return out.LayerNorm(out.dropout(out.dense(inner)) + hidden)
