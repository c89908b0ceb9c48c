"""The augmenter interface, the registry that finds augmenters by name, and composition.

An augmenter maps a batch of sentences to a batch of augmented sentences, deterministically for a
seed. A sentence it cannot change comes back unchanged, so ``changed`` is simply out != in.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from cselab.registry import Registry


@runtime_checkable
class Augmenter(Protocol):
    name: str

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        """One output per input, in order; the unchanged input where no rule applies."""
        ...


AUGMENTERS: Registry[Augmenter] = Registry("augmenter")


def changed_flags(originals: list[str], augmented: list[str]) -> list[bool]:
    return [a != b for a, b in zip(originals, augmented)]


def augment_with_flags(augmenter: Augmenter, sentences: list[str], seed: int) -> tuple[list[str], list[bool]]:
    out = augmenter.augment(sentences, seed)
    return out, changed_flags(sentences, out)
