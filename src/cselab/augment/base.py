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
from collections.abc import Sequence
from typing import ClassVar, TypeVar

from cselab.augment.tokenize import detokenize, tokenize
from cselab.errors import CselabError
from cselab.registry import Registry

#: Meaning tags, as AugCSE (Table 3) groups its transformations.
TAGS = ("meaning-preserving", "possibly-altering", "altering")


class Augmenter:
    """The base class of every augmenter: subclass it (or ``SentenceAugmenter``/``TokenAugmenter`` for a
    per-sentence rule), set ``name``, ``tag`` (one of ``TAGS``) and ``description``, and register the
    class with ``@register_augmenter``. ``augment`` is the one method to write; every other hook has a
    default that does nothing, and the training views call them on every augmenter:

    - ``citation``: the BibTeX of its method's paper (``cselab/citations.py``; "" for none);
    - ``fit(corpus)``: corpus statistics before step 1 (UNA's TF-IDF, a cache built for the corpus);
      a composition fits its parts;
    - ``extra_fit_positives``: true when ``fit`` also takes ``positives=``, the positive view's outputs
      for the whole corpus (UNA fitted on paraphrased positives too);
    - ``augmented_texts()``: its outputs for the whole corpus when it computed them beforehand
      (``cached``), else None;
    - ``use_tokenizer(tokenizer)``: counts the encoder's tokens (CLEAR's token-level rules);
    - ``special_tokens``: placeholder tokens it writes that the tokenizer must keep whole (``[DEL]``);
      a composition reports its parts';
    - ``parts``: the augmenters it is made of (compositions), walked for the hooks above;
    - ``output_revision``: raised when its rules change, so cached outputs of the old rules are rebuilt;
    - ``edits_token_ids``: true for an augmenter that edits the encoder's token ids after truncation
      rather than the text (ESimCSE's sub-word repetition): the training views then leave the positive's
      text as it is and the collator edits each of its rows with ``token_plan`` (``data/collate.py``);
      only ``views.positive`` takes such an augmenter, not inside a composition.
    """

    name: ClassVar[str]
    tag: str  # a class attribute; a composition sets its own per instance
    description: ClassVar[str]
    citation: str = ""
    special_tokens: tuple[str, ...] = ()
    extra_fit_positives: bool = False
    output_revision: ClassVar[int] = 0
    edits_token_ids: bool = False

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        """One output per input, in order; the unchanged input where no rule applies."""
        raise NotImplementedError

    @property
    def parts(self) -> tuple[Augmenter, ...]:
        return ()

    def fit(self, corpus: Sequence[str]) -> None:
        for part in self.parts:
            part.fit(corpus)

    def augmented_texts(self) -> list[str] | None:
        return None

    def use_tokenizer(self, tokenizer) -> None:
        return None

    def token_plan(self, ids: list[int], rng: random.Random) -> list[int] | None:
        """For an augmenter that ``edits_token_ids``: the edited row as indices into ``ids`` (one row's
        tokens after truncation, special tokens included), in order; an index given twice repeats its
        token, one left out deletes it. None leaves the row as it is."""
        raise NotImplementedError


AUGMENTERS: Registry[Augmenter] = Registry("augmenter", base=Augmenter)

A = TypeVar("A", bound=type)


class AugmenterUnavailable(CselabError, RuntimeError):
    """An augmenter's optional dependency (WordNet files, GloVe vectors, spaCy model...) is missing."""


def register_augmenter(cls: A) -> A:
    """Class decorator: register ``cls`` under ``cls.name`` with ``cls.description``."""
    if getattr(cls, "tag", None) not in TAGS:  # a class being registered: the attribute may be missing
        raise ValueError(f"augmenter {cls.__name__}: tag must be one of {TAGS}, not {getattr(cls, 'tag', None)!r}")
    AUGMENTERS.register(cls.name, cls.description)(cls)
    return cls


def special_tokens(*augmenters: Augmenter | None) -> tuple[str, ...]:
    """Placeholder tokens the augmenters write (CLEAR's ``[DEL]``) that the tokenizer must keep whole,
    in first-seen order, a composition's parts' included; None (no augmenter) contributes nothing."""
    tokens = [token for a in augmenters if a is not None
              for token in (*a.special_tokens, *special_tokens(*a.parts))]
    return tuple(dict.fromkeys(tokens))


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


class SentenceAugmenter(Augmenter):
    """Base class: per-sentence augmentation with a per-sentence RNG (see module docstring).

    Subclasses set ``name``, ``tag`` and ``description`` and implement ``augment_one``.
    """
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

