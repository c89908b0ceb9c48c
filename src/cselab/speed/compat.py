"""What the speed-ups assume of transformers: the releases they were checked on, and mask functions
that never read the batch back.

The unpadded forward (``unpadded.py``) runs a BERT layer's modules itself, found by their attribute
names (``attention.self.query``, ``attention_head_size``, ``output.LayerNorm``, ...), and the
fast-dropout attention (``cpu.py``) is a function of transformers' attention interface, fed the mask
its mask interface builds. Both compute the model's own function (outputs and gradients:
``tests/scale/test_unpadded.py``, ``tests/scale/test_cpu_speed.py``) on the releases of
:data:`TESTED_TRANSFORMERS`; on another release neither is applied (:func:`cselab.speed.speed_up`
says so in one warning) and the model runs as transformers defines it.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

# The transformers releases the unpadded forward and the fast-dropout attention were checked on
# (5.17 on the H100 of docs/scaling.md, 5.24 on the CPU machine). Widen it after the tests above pass
# on a new release.
TESTED_TRANSFORMERS = ">=5.17,<5.25"


def transformers_version() -> str:
    import transformers

    return transformers.__version__


def transformers_tested() -> bool:
    """True where the installed transformers is in :data:`TESTED_TRANSFORMERS`."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(TESTED_TRANSFORMERS).contains(transformers_version(), prereleases=True)


def always_build(mask_function: Callable) -> Callable:
    """``mask_function`` (an entry of transformers' ``AttentionMaskInterface``) that never skips the
    mask of a batch without padding (the skip needs the batch's values on the host)."""

    @functools.wraps(mask_function)
    def build(*args, **kwargs):
        kwargs["allow_is_bidirectional_skip"] = False
        return mask_function(*args, **kwargs)

    return build
