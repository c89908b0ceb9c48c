"""Composition of augmenters, configurable from a recipe's YAML params.

``sequence``: ``steps: [{name: clear_synonym_substitution}, {name: clear_word_deletion, ratio: 0.5}]``
applies the steps in order (CLEAR's "subs + del-word": substitute first, then delete).
``one_of``: ``choices: [{name: ...}, ...]`` and optional ``weights`` picks one per sentence.
``with_probability``: ``p: 0.5`` and ``augmenter: {name: ...}`` applies it to a share of sentences.

A step is either a name or a mapping with a ``name`` key and that augmenter's parameters. Each
step gets its own seed derived from (seed, step index); per-sentence choices draw from
(seed, sentence), so outputs do not depend on batch composition.
"""
from __future__ import annotations

import math
import random
from typing import Any

from cselab import citations
from cselab.augment.base import (
    AUGMENTERS,
    TAGS,
    Augmenter,
    derive_seed,
    register_augmenter,
    sentence_seed,
)
from cselab.errors import counted


def build_spec(spec: Any, where: str) -> Augmenter:
    """Build an augmenter from ``"name"`` or ``{name: ..., <params>}``; ``where`` names the key in errors."""
    from cselab.augment import build_augmenter

    if isinstance(spec, str):
        return build_augmenter(spec)
    if not isinstance(spec, dict) or "name" not in spec:
        raise ValueError(f"{where}: expected an augmenter name or a mapping with a 'name' key, got {spec!r}")
    params = {k: v for k, v in spec.items() if k != "name"}
    try:
        return build_augmenter(spec["name"], **params)
    except TypeError as exc:
        raise ValueError(f"{where}: bad parameters for augmenter {spec['name']!r}: {exc}") from None


def _most_altering(augmenters: list[Augmenter]) -> str:
    tags = [a.tag for a in augmenters]
    return max(tags, key=lambda t: TAGS.index(t) if t in TAGS else 1, default="meaning-preserving")


def _apply_to_rows(augmenter: Augmenter, sentences: list[str], rows: list[int], seed: int, out: list[str]) -> None:
    if rows:
        for i, text in zip(rows, augmenter.augment([sentences[i] for i in rows], seed), strict=True):
            out[i] = text


def _citation(parts: list[Augmenter]) -> str:
    """A composition cites the papers of its parts."""
    return citations.join(*(part.citation for part in parts))


@register_augmenter
class Sequence(Augmenter):
    citation = ""  # per instance: its parts'
    name = "sequence"
    tag = "possibly-altering"  # per instance: the most altering of its steps
    description = "apply several augmenters in order (params: steps: [{name: ..., <params>}, ...])"

    def __init__(self, steps: list):
        if not isinstance(steps, list) or not steps:
            raise ValueError(f"sequence: 'steps' must be a non-empty list, got {steps!r}")
        self.steps = [build_spec(spec, f"sequence.steps[{k}]") for k, spec in enumerate(steps)]
        self.tag = _most_altering(self.steps)
        self.citation = _citation(self.steps)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        out = list(sentences)
        for k, step in enumerate(self.steps):
            out = step.augment(out, derive_seed(seed, k))
        return out

    @property
    def parts(self) -> tuple[Augmenter, ...]:
        return tuple(self.steps)


def _valid_weights(weights, count: int) -> bool:
    """``count`` finite numbers >= 0 with a positive sum (a YAML typo gives strings, bools or nesting)."""
    if not isinstance(weights, list) or len(weights) != count:
        return False
    numbers = all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in weights)
    return numbers and all(w >= 0 for w in weights) and sum(weights) > 0


@register_augmenter
class OneOf(Augmenter):
    citation = ""  # per instance: its parts'
    name = "one_of"
    tag = "possibly-altering"
    description = "apply one augmenter per sentence, chosen at random (params: choices, optional weights)"

    def __init__(self, choices: list, weights: list[float] | None = None):
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"one_of: 'choices' must be a non-empty list, got {choices!r}")
        self.choices = [build_spec(spec, f"one_of.choices[{k}]") for k, spec in enumerate(choices)]
        if weights is None:
            weights = [1.0] * len(self.choices)
        if not _valid_weights(weights, len(self.choices)):
            raise ValueError(f"one_of: 'weights' must be {counted(len(self.choices), 'non-negative number')} "
                             f"with a positive sum, got {weights!r}")
        total = float(sum(weights))
        self.cumulative = []
        acc = 0.0
        for w in weights:
            acc += float(w) / total
            self.cumulative.append(acc)
        self.tag = _most_altering(self.choices)
        self.citation = _citation(self.choices)
        self._rng = random.Random(0)

    def choose(self, sentences: list[str], seed: int) -> list[int]:
        """The index of the augmenter each sentence gets (exposed for discriminator labels)."""
        rng = self._rng
        picks = []
        last = len(self.cumulative) - 1
        for sentence in sentences:
            rng.seed(sentence_seed(seed, sentence))
            u = rng.random()
            picks.append(next((k for k, c in enumerate(self.cumulative) if u < c), last))
        return picks

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        picks = self.choose(sentences, derive_seed(seed, 10_000))
        out = list(sentences)
        for k, augmenter in enumerate(self.choices):
            _apply_to_rows(augmenter, sentences, [i for i, c in enumerate(picks) if c == k], derive_seed(seed, k), out)
        return out

    @property
    def parts(self) -> tuple[Augmenter, ...]:
        return tuple(self.choices)


@register_augmenter
class WithProbability(Augmenter):
    citation = ""  # per instance: its parts'
    name = "with_probability"
    tag = "possibly-altering"
    description = "apply an augmenter to each sentence with probability p (params: p, augmenter: {name: ...})"

    def __init__(self, augmenter: Any, p: float = 0.5):
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"with_probability: 'p' must be in [0, 1], got {p}")
        self.p = p
        self.augmenter = build_spec(augmenter, "with_probability.augmenter")
        self.tag = self.augmenter.tag
        self.citation = _citation([self.augmenter])
        self._rng = random.Random(0)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        rng = self._rng
        gate_seed = derive_seed(seed, 10_000)
        rows = []
        for i, sentence in enumerate(sentences):
            rng.seed(sentence_seed(gate_seed, sentence))
            if rng.random() < self.p:
                rows.append(i)
        out = list(sentences)
        _apply_to_rows(self.augmenter, sentences, rows, derive_seed(seed, 0), out)
        return out

    @property
    def parts(self) -> tuple[Augmenter, ...]:
        return (self.augmenter,)


__all__ = ["OneOf", "Sequence", "WithProbability", "build_spec", "AUGMENTERS"]
