"""Attention masks built without reading the batch back to the host.

transformers (5.x) builds a bidirectional model's mask with ``create_bidirectional_mask``, which first
asks whether the batch has any padding at all (``padding_mask.all()``, a ``Tensor.__bool__``): on a
GPU the host then waits for the device in every forward pass, just to skip the mask of a batch
without pads (rare for sentences of mixed lengths). The mask functions here build the mask always
(``speed/compat.py: always_build``): the same values, no question asked. They are registered under
new attention names whose attention function is the model's usual one, so only the encoders cselab
builds use them.
"""
from __future__ import annotations

import logging

from torch import nn

from cselab.speed.compat import always_build

log = logging.getLogger(__name__)

SDPA_NAME = "cselab_sdpa"
EAGER_NAME = "cselab_eager"
# Models whose own attention code never reads the implementation's name (only transformers' mask
# builder does), checked one by one: their mask can come from an always-built eager mask under
# another name. MPNet (all-mpnet-base-v2's architecture) has no SDPA attention.
OWN_EAGER_ATTENTION = frozenset({"mpnet"})


def use_sync_free_masks(backbone: nn.Module) -> bool:
    """Switch a backbone on PyTorch's SDPA attention to the same attention with an always-built mask
    (in place; nothing saved changes), and the models of :data:`OWN_EAGER_ATTENTION` to an
    always-built eager mask. False where the model or transformers has no attention interface
    (older transformers, other models with their own attention code): those keep their masks."""
    config = getattr(backbone, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    if implementation == "eager" and config.model_type in OWN_EAGER_ATTENTION:
        try:
            from transformers.masking_utils import AttentionMaskInterface, eager_mask
        except ImportError:
            return False
        AttentionMaskInterface.register(EAGER_NAME, always_build(eager_mask))
        config._attn_implementation = EAGER_NAME  # read by the mask builder only (not saved)
        return True
    if implementation != "sdpa" or not hasattr(backbone, "set_attn_implementation"):
        return False
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:  # transformers 4.x: masks made by each model's own code
        return False
    AttentionInterface.register(SDPA_NAME, sdpa_attention_forward)
    AttentionMaskInterface.register(SDPA_NAME, always_build(sdpa_mask))
    try:
        backbone.set_attn_implementation(SDPA_NAME)
    except (ValueError, NotImplementedError, AttributeError, TypeError, KeyError) as error:
        # a model that does not take custom attention (remote code included): it keeps its own masks
        log.info("attention masks stay transformers' (%s)", error)
        return False
    return True
