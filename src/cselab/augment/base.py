"""The augmenter interface, the registry that finds augmenters by name, and shared base classes.

An augmenter maps a batch of sentences to a batch of augmented sentences, deterministically for a
seed. A sentence it cannot change comes back unchanged, so ``changed`` is simply out != in.

Determinism: every augmenter here draws its randomness for a sentence from
``sentence_seed(seed, sentence)`` -- the run seed mixed with a CRC-32 of the sentence's UTF-8 text.
The same (seed, sentence) therefore gives the same output whatever else is in the batch, in any
process (CRC-32 is stable; Python's ``hash`` of a str is not), and two copies of one sentence in a
batch get the same augmentation.
"""
from __future__ import annotations

import random
import zlib
from typing import ClassVar, Protocol, TypeVar, runtime_checkable

from cselab.augment.tokenize import detokenize, tokenize
from cselab.errors import CselabError
from cselab.registry import Registry

#: Meaning tags, as AugCSE (Table 3) groups its transformations.
TAGS = ("meaning-preserving", "possibly-altering", "altering")


@runtime_checkable
class Augmenter(Protocol):
    name: str
    citation: str  # the BibTeX of its method's paper, "" for none (SentenceAugmenter's default)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        """One output per input, in order; the unchanged input where no rule applies."""
        ...


AUGMENTERS: Registry[Augmenter] = Registry("augmenter")

A = TypeVar("A", bound=type)


class AugmenterUnavailable(CselabError, RuntimeError):
    """An augmenter's optional dependency (WordNet files, GloVe vectors, spaCy model...) is missing."""


def register_augmenter(cls: A) -> A:
    """Class decorator: register ``cls`` under ``cls.name`` with ``cls.description``."""
    if getattr(cls, "tag", None) not in TAGS:
        raise ValueError(f"augmenter {cls.__name__}: tag must be one of {TAGS}, not {getattr(cls, 'tag', None)!r}")
    AUGMENTERS.register(cls.name, cls.description)(cls)
    return cls


def special_tokens(*augmenters) -> tuple[str, ...]:
    """Placeholder tokens the augmenters write (CLEAR's ``[DEL]``) that the tokenizer must keep whole,
    in first-seen order. An augmenter declares them as ``special_tokens``; compositions report their
    parts'; None (no augmenter) contributes nothing."""
    return tuple(dict.fromkeys(token for a in augmenters for token in (getattr(a, "special_tokens", ()) or ())))


def changed_flags(originals: list[str], augmented: list[str]) -> list[bool]:
    return [a != b for a, b in zip(originals, augmented, strict=True)]


def augment_with_flags(augmenter: Augmenter, sentences: list[str], seed: int) -> tuple[list[str], list[bool]]:
    out = augmenter.augment(sentences, seed)
    return out, changed_flags(sentences, out)


_MASK32 = 0xFFFFFFFF


def sentence_seed(seed: int, sentence: str) -> int:
    """The per-sentence seed: run seed mixed with the CRC-32 of the text (stable across processes)."""
    return ((seed * 0x9E3779B1) ^ zlib.crc32(sentence.encode("utf-8", "surrogatepass"))) & _MASK32


def derive_seed(seed: int, salt: int) -> int:
    """A distinct seed for a sub-step (e.g. step k of a sequence), reproducible from (seed, salt)."""
    return (seed * 1_000_003 + salt * 7_919 + 17) & _MASK32


class SentenceAugmenter:
    """Base class: per-sentence augmentation with a per-sentence RNG (see module docstring).

    Subclasses set ``name``, ``tag`` and ``description`` and implement ``augment_one``.
    """
    # The BibTeX of the paper whose method this is (cselab/citations.py); "": none defines it.
    citation: ClassVar[str] = ""

    name: ClassVar[str]
    tag: ClassVar[str]
    description: ClassVar[str]

    def __init__(self) -> None:
        self._rng = random.Random(0)  # reseeded per sentence: no per-call object creation

    def augment_one(self, sentence: str, rng: random.Random) -> str:
        raise NotImplementedError

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        rng = self._rng
        one = self.augment_one
        out = []
        for sentence in sentences:
            rng.seed(sentence_seed(seed, sentence))
            out.append(one(sentence, rng))
        return out

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({params})"


class TokenAugmenter(SentenceAugmenter):
    """A rule over the word tokens of ``cselab.augment.tokenize``.

    ``augment_tokens`` returns a new token list, or None when the rule cannot apply; a result
    equal to the input tokens also returns the sentence untouched (not re-detokenized), so the
    changed flag (out != in) tells the truth.
    """

    def augment_tokens(self, tokens: list[str], rng: random.Random) -> list[str] | None:
        raise NotImplementedError

    def augment_one(self, sentence: str, rng: random.Random) -> str:
        tokens = tokenize(sentence)
        if not tokens:
            return sentence
        new = self.augment_tokens(tokens, rng)
        if new is None or new == tokens:
            return sentence
        return detokenize(new)


def check_ratio(name: str, key: str, value: float, *, allow_one: bool = True) -> float:
    """A clear one-line error for a bad ratio parameter."""
    value = float(value)
    if not (0.0 <= value <= 1.0) or (value == 1.0 and not allow_one):
        raise ValueError(f"augmenter {name}: {key} must be in [0, 1{']' if allow_one else ')'}, got {value}")
    return value


def check_positive_int(name: str, key: str, value: int, *, minimum: int = 0) -> int:
    if int(value) != value or int(value) < minimum:
        raise ValueError(f"augmenter {name}: {key} must be an integer >= {minimum}, got {value!r}")
    return int(value)

