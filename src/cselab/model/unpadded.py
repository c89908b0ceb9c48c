"""The forward pass of a BERT-family backbone on real tokens only (no compute on padding).

A batch of Wikipedia sentences at ``max_seq_len`` 32 is about 30% padding, and a padded forward
spends that share of every linear layer (nearly all of an encoder's FLOPs) on pad rows. Here:

1. the embeddings are computed on the padded batch (a lookup: cheap), then the real tokens are
   gathered once into a ``(tokens, hidden)`` matrix;
2. each layer's query/key/value projection (one fused matmul), attention output, feed-forward,
   dropout and layer norms work on that matrix; only the attention itself scatters its rows back
   into ``(batch, heads, length, head_dim)`` blocks and gathers the result;
3. the hidden states are scattered back into the padded layout (zeros at pads), so poolers, the MLM
   head and ``output_hidden_states`` users see the shapes Hugging Face returns.

It uses the backbone's own modules and parameters and computes the same function as its forward
(``tests/scale/test_unpadded.py``: outputs and gradients); in training only the dropout draws
differ. Backbones with another layout (relative positions, decoders, other attention modules) are
not supported: :func:`supports_unpadding` says so and the encoder keeps the padded path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def supports_unpadding(backbone: nn.Module) -> bool:
    """True for BERT/RoBERTa-style encoders: absolute positions and the standard layer modules."""
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


def _with_zero_row(rows: torch.Tensor) -> torch.Tensor:
    """``rows`` and one row of zeros after them: what every pad position gathers."""
    return torch.cat([rows, rows.new_zeros(1, *rows.shape[1:])])


def unpadded_forward(backbone: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     token_type_ids: torch.Tensor | None = None, all_hidden_states: bool = False,
                     ) -> tuple[torch.Tensor, ...]:
    """Hidden states (batch, length, hidden), padded with zeros: the last layer's, or with
    ``all_hidden_states`` the embeddings' and every layer's (as Hugging Face's ``hidden_states``).
    Dropout is the backbone's own modules' (whatever the training loop swapped in).
    """
    batch, length = input_ids.shape
    real = attention_mask.reshape(-1).nonzero().squeeze(1)  # rows of real tokens in (batch * length)
    # For each padded position, its real row, or one past the last row (a zero row appended).
    source = torch.full((batch * length,), len(real), dtype=torch.long, device=input_ids.device)
    source[real] = torch.arange(len(real), device=input_ids.device)

    def padded(rows: torch.Tensor) -> torch.Tensor:
        # A gather (one pass); its backward adds into the small (tokens, width) gradient.
        return _with_zero_row(rows).index_select(0, source).view(batch, length, -1)

    embedded = backbone.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
    hidden = embedded.reshape(batch * length, -1).index_select(0, real)
    if torch.is_autocast_enabled(hidden.device.type):
        # The residual stream in the autocast dtype: otherwise every layer norm returns fp32 and
        # each of the next layer's matmuls casts it back (a copy of the activations per matmul).
        hidden = hidden.to(torch.get_autocast_dtype(hidden.device.type))
    # Masked keys, broadcast over (heads, batch, queries, keys); pad queries are dropped anyway.
    key_is_pad = (attention_mask == 0)[None, :, None, :]
    states = [embedded] if all_hidden_states else []
    for layer in backbone.encoder.layer:
        hidden = _layer(layer, hidden, real, source, key_is_pad)
        if all_hidden_states:
            states.append(padded(hidden))
    # Poolers and losses get fp32, as from the padded forward.
    return tuple(s.float() for s in states) if all_hidden_states else (padded(hidden.float()),)


def _layer(layer: nn.Module, hidden: torch.Tensor, real: torch.Tensor, source: torch.Tensor,
           key_is_pad: torch.Tensor) -> torch.Tensor:
    """One post-norm transformer layer (BERT's) on the (tokens, hidden) rows."""
    attention = layer.attention.self
    heads, head_dim = attention.num_attention_heads, attention.attention_head_size
    batch, length = key_is_pad.shape[1], key_is_pad.shape[-1]
    tokens = hidden.shape[0]
    # Query, key and value in one matmul over the real rows.
    qkv = F.linear(hidden, torch.cat([attention.query.weight, attention.key.weight, attention.value.weight]),
                   torch.cat([attention.query.bias, attention.key.bias, attention.value.bias]))
    # Head-major blocks (3 * heads, batch * length, head_dim): the padded layout in one gather, and
    # each (head, sentence) block contiguous, so the attention matmuls need no further copies.
    per_head = _with_zero_row(qkv).view(tokens + 1, 3 * heads, head_dim).transpose(0, 1)
    blocks = per_head.index_select(1, source).view(3, heads * batch, length, head_dim)
    query, key, value = blocks.unbind(0)  # its backward is one stack, not three zero-filled copies
    scores = torch.bmm(query, key.transpose(1, 2)).view(heads, batch, length, length) * head_dim ** -0.5
    probs = attention.dropout(torch.softmax(scores.masked_fill(key_is_pad, torch.finfo(scores.dtype).min), dim=-1))
    context = torch.bmm(probs.view(heads * batch, length, length), value)  # (heads * batch, length, head_dim)
    context = context.view(heads, batch * length, head_dim).index_select(1, real).transpose(0, 1).reshape(tokens, -1)
    out = layer.attention.output
    hidden = out.LayerNorm(out.dropout(out.dense(context)) + hidden)
    inner = layer.intermediate.intermediate_act_fn(layer.intermediate.dense(hidden))
    out = layer.output
    return out.LayerNorm(out.dropout(out.dense(inner)) + hidden)
