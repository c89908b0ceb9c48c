"""The English grammar SDA's and AugCSE's rules share, written once so that a fix reaches both.

* :class:`Edits` and :func:`render`: an edited spaCy parse written back as text, everything outside
  an edit byte-identical to the input;
* agreement: :func:`subject_of`, :func:`person_number`, :func:`present_form`, :func:`past_form`;
* negation: :func:`remove_negation` (and the bare forms of "can't", "won't", "shan't");
* capitals: :func:`keeps_capital`, :func:`decapitalize`, :func:`capitalize`;
* the tables: contractions (:data:`CONTRACTIONS`, :data:`EXPANSIONS`, :data:`CONTRACTED_FORM`,
  :data:`CONTRACTED_NEGATION`), pronouns (:data:`SUBJECT_FORM`, :data:`OBJECT_FORM`), the forms of the
  auxiliaries (:data:`AUXILIARY_LEMMAS`, :data:`BE_PERSON`) and
  the adverbs that sit between an auxiliary and its verb (:data:`MID_ADVERBS`).

Which words a rule edits is the rule's business (``sda.py``, ``augcse.py``, ``augcse_rules.py``);
how an edit is spelled, agreed and written back is this module's. Lexical verbs are inflected with
lemminflect, imported when first needed (the forms of be, have and do are tables here).
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cselab.augment.base import AugmenterUnavailable
from cselab.augment.tokenize import match_case

if TYPE_CHECKING:  # pragma: no cover - typing only
    from spacy.tokens import Doc, Token

APOSTROPHES = frozenset({"'", "’"})
AUXILIARY_DEPS = frozenset({"aux", "auxpass"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl"})

# =========================================================================== tables
#: Object pronouns by their subject form, and back ("He saw her" <-> "She saw him").
SUBJECT_FORM = {"me": "i", "him": "he", "her": "she", "us": "we", "them": "they", "whom": "who"}
OBJECT_FORM = {v: k for k, v in SUBJECT_FORM.items()}
#: A subject word that fixes the person whatever its tag says.
_PERSON_OF_WORD = {"i": "1s", "me": "1s", **dict.fromkeys(["you", "we", "they", "us", "them", "these", "those"], "pl")}

#: The lemma of each form of be, have and do, contracted forms included ("'s" is either: see
#: :func:`contracted_s_lemma`).
AUXILIARY_LEMMAS = {
    **dict.fromkeys(["be", "is", "are", "am", "was", "were", "been", "being", "'re", "'m", "’re", "’m"], "be"),
    **dict.fromkeys(["have", "has", "had", "having", "'ve", "’ve"], "have"),
    **dict.fromkeys(["do", "does", "did", "done", "doing"], "do"),
}
#: Forms of "be" that fix their subject's person ("I'm", "you're").
BE_PERSON = {**dict.fromkeys(["am", "'m", "’m"], "1s"), **dict.fromkeys(["are", "'re", "’re"], "pl")}
#: Adverbs that stand between an auxiliary and its verb ("is always late", "has just gone").
MID_ADVERBS = frozenset({"always", "never", "also", "still", "just", "already", "often", "usually", "really",
                         "probably", "certainly", "surely", "definitely", "actually", "even", "ever", "sometimes",
                         "rarely", "seldom", "generally", "mostly", "again", "not"})
#: Participles after which a contracted "'s" is "has" ("she's been", "he's gone").
_PERFECT_AFTER_S = frozenset({"been", "got", "gotten", "gone"})

CONTRACTED_NEGATION = frozenset({"n't", "n’t"})
#: Negations an auxiliary carries ("is not", "isn't").
AUXILIARY_NEGATIONS = frozenset({"not"}) | CONTRACTED_NEGATION
#: Hosts of a contracted "n't" whose bare form differs: "can't" is "ca" + "n't".
BARE_HOSTS = {"ca": "can", "wo": "will", "sha": "shall"}
#: The other way: the host a bare form takes before "n't" ("can" + "n't" is "can't": "ca" + "n't").
HOST_BEFORE_NEGATION = {bare: host for host, bare in BARE_HOSTS.items()}
#: Present forms of be and have that contract after a subject ("she is" -> "she's").
CONTRACTED_FORM = {"is": "s", "are": "re", "am": "m", "has": "s", "have": "ve"}

#: Contractions and what they stand for; "'s" and "'d" are read as "is" and "would" (the common case).
CONTRACTIONS = {
    "aren't": "are not", "can't": "cannot", "couldn't": "could not", "didn't": "did not", "doesn't": "does not",
    "don't": "do not", "hadn't": "had not", "hasn't": "has not", "haven't": "have not", "isn't": "is not",
    "mightn't": "might not", "mustn't": "must not", "needn't": "need not", "shan't": "shall not",
    "shouldn't": "should not", "wasn't": "was not", "weren't": "were not", "won't": "will not",
    "wouldn't": "would not", "i'm": "i am", "i've": "i have", "i'll": "i will", "i'd": "i would",
    "you're": "you are", "you've": "you have", "you'll": "you will", "you'd": "you would", "he's": "he is",
    "he'll": "he will", "he'd": "he would", "she's": "she is", "she'll": "she will", "she'd": "she would",
    "it's": "it is", "it'll": "it will", "we're": "we are", "we've": "we have", "we'll": "we will",
    "we'd": "we would", "they're": "they are", "they've": "they have", "they'll": "they will",
    "they'd": "they would", "that's": "that is", "that'll": "that will", "there's": "there is",
    "here's": "here is", "what's": "what is", "who's": "who is", "where's": "where is", "who'll": "who will",
    "could've": "could have", "should've": "should have", "would've": "would have", "might've": "might have",
    "must've": "must have", "let's": "let us",
}
#: Expansions that contract back. "let us" does not: "let us know" is not "let's know".
EXPANSIONS = {v: k for k, v in CONTRACTIONS.items() if v != "let us"} | {"can not": "can't"}
#: A subject pronoun right after a match: an inverted negation ("Isn't it?", "Why don't you").
INVERTED_SUBJECT = re.compile(r"\s+(?:i|you|he|she|it|we|they|there)\b", re.IGNORECASE)


def phrase_pattern(phrase: str) -> str:
    """A table phrase as a regular expression: either apostrophe, any run of spaces or tabs."""
    return re.escape(phrase).replace("'", "['’]").replace(r"\ ", r"[ \t]+")


def phrase_key(text: str) -> str:
    """The table key of a :func:`phrase_pattern` match: lower case, ' for ’, single spaces."""
    return re.sub(r"\s+", " ", text.lower().replace("’", "'"))


# =========================================================================== writing an edited parse
class Edits:
    """Edits of a Doc by token index, written back by :meth:`render`.

    ``before``/``after``: text inserted before/after a token; ``replaced``: a token's new text;
    ``deleted``: tokens left out; ``spans``: a token range ``[start, end)`` replaced by one text
    (keeping the range's trailing whitespace). Untouched tokens are written as ``token.text +
    token.whitespace_``, so the rest of the sentence stays byte-identical to the input."""

    def __init__(self, doc: Doc):
        self.doc = doc
        self.before: dict[int, str] = {}
        self.after: dict[int, str] = {}
        self.replaced: dict[int, str] = {}
        self.deleted: set[int] = set()
        self.spans: dict[int, tuple[int, str]] = {}

    def insert_before(self, i: int, text: str) -> None:
        self.before[i] = text + self.before.get(i, "")

    def insert_after(self, i: int, text: str) -> None:
        self.after[i] = self.after.get(i, "") + text

    def replace(self, i: int, text: str) -> None:
        self.replaced[i] = text

    def replace_span(self, start: int, end: int, text: str) -> None:
        self.spans[start] = (end, text)

    def delete(self, i: int) -> None:
        self.deleted.add(i)

    def touched(self, i: int) -> bool:
        """Replaced or deleted already: a second rule should leave the token alone."""
        return i in self.replaced or i in self.deleted

    def __bool__(self) -> bool:
        return bool(self.before or self.after or self.replaced or self.deleted or self.spans)

    def render(self) -> str:
        doc = self.doc
        # A deleted token's trailing whitespace replaces that of the last kept token before it:
        # deleting "not" from "is not," gives "is," and "n't" from "doesn't like" gives "does like".
        space = [token.whitespace_ for token in doc]
        for i in sorted(self.deleted):
            previous = i - 1
            while previous in self.deleted:
                previous -= 1
            if previous >= 0:
                space[previous] = space[i]
        out: list[str] = []
        i = 0
        while i < len(doc):
            if i in self.spans:
                end, text = self.spans[i]
                _append_word(out, text)
                out.append(space[end - 1])
                i = end
                continue
            if i not in self.deleted:
                if i in self.before:
                    _append_word(out, self.before[i])
                if i in self.replaced:
                    _append_word(out, self.replaced[i])
                else:
                    out.append(doc[i].text)
                if i in self.after:
                    out.append(self.after[i])
                out.append(space[i])
            i += 1
        return "".join(out)


def render(doc: Doc, replaced: dict[int, str] | None = None, deleted: Iterable[int] = (),
           spans: Iterable[tuple[int, int, str]] = ()) -> str:
    """The Doc's text with tokens replaced, deleted, and token ranges ``(start, end, text)`` replaced."""
    edits = Edits(doc)
    edits.replaced.update(replaced or {})
    edits.deleted.update(deleted)
    for start, end, text in spans:
        edits.replace_span(start, end, text)
    return edits.render()


def _append_word(out: list[str], piece: str) -> None:
    """Append a piece, with a space where a word would glue onto the word before it ("She's" ->
    "She was", not "Shewas")."""
    if out and piece[:1].isalnum():
        tail = out[-1] if out[-1] else (out[-2] if len(out) > 1 else "")
        if tail[-1:].isalnum():
            out.append(" ")
    out.append(piece)


# =========================================================================== capitals
def keeps_capital(token: Token) -> bool:
    """Names, "I" and acronyms keep their capital when they stop being sentence-initial."""
    return token.tag_ in {"NNP", "NNPS"} or token.pos_ == "PROPN" or token.text == "I" or \
        (token.text.isupper() and len(token.text) > 1)


def decapitalize(token: Token, text: str) -> str:
    return text if keeps_capital(token) else text[:1].lower() + text[1:]


def capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


# =========================================================================== agreement
def subject_of(verb: Token) -> Token | None:
    """The subject a finite verb (or auxiliary) agrees with: its clause's nominal subject, the first
    conjunct's for a coordinated verb without one ("They went and ate"), and for "the men who were"
    the noun "men"."""
    head = verb.head if verb.dep_ in AUXILIARY_DEPS else verb
    subject = next((c for c in head.children if c.dep_ in SUBJECT_DEPS), None)
    while subject is None and head.dep_ == "conj" and head.head is not head:
        head = head.head
        subject = next((c for c in head.children if c.dep_ in SUBJECT_DEPS), None)
    if subject is not None and subject.lower_ in {"who", "that", "which"} and head.dep_ == "relcl":
        return head.head
    return subject


def person_number(subject: Token | None) -> str:
    """"1s" ("I"), "3s" (he/she/it, singular nouns, no subject) or "pl" (coordinations, we/you/they,
    these/those, plural nouns). A coordination is plural whatever its first word ("me and him")."""
    if subject is None:
        return "3s"
    if any(c.dep_ == "conj" for c in subject.children):
        return "pl"
    person = _PERSON_OF_WORD.get(subject.lower_)
    if person is not None:
        return person
    return "pl" if subject.tag_ in {"NNS", "NNPS"} else "3s"


_PRESENT = {"be": {"1s": "am", "3s": "is", "pl": "are"}, "have": {"1s": "have", "3s": "has", "pl": "have"},
            "do": {"1s": "do", "3s": "does", "pl": "do"}}
_PAST = {"be": {"1s": "was", "3s": "was", "pl": "were"}, "have": dict.fromkeys(["1s", "3s", "pl"], "had"),
         "do": dict.fromkeys(["1s", "3s", "pl"], "did")}


@functools.lru_cache(maxsize=1)
def lemminflect():
    """lemminflect's ``getInflection``, which inflects lexical verbs; a clear error without it."""
    try:
        from lemminflect import getInflection
    except ImportError as exc:
        raise AugmenterUnavailable("this augmenter needs lemminflect: pip install lemminflect") from exc
    return getInflection


def present_form(lemma: str, person: str) -> str | None:
    """The present tense of ``lemma`` for ``person`` ("1s", "3s", "pl"); None if unknown."""
    if lemma in _PRESENT:
        return _PRESENT[lemma][person]
    forms = lemminflect()(lemma, "VBZ" if person == "3s" else "VBP")
    return forms[0] if forms else None


def past_form(lemma: str, person: str) -> str | None:
    """The simple past of ``lemma`` for ``person``; None if unknown."""
    if lemma in _PAST:
        return _PAST[lemma][person]
    forms = lemminflect()(lemma, "VBD")
    return forms[0] if forms else None


def contracted_s_lemma(token: Token) -> str:
    """"have" or "be" for a contracted "'s": "has" when the parse makes it a perfect auxiliary ("he's
    gone", labelled aux of a participle) or when "been", "got", "gotten" or "gone" follows (the
    small parser labels those auxpass too); "is" otherwise ("she's happy", "it's built")."""
    if token.dep_ == "aux" and token.head.tag_ == "VBN":
        return "have"
    end = token.sent.end if token.doc.has_annotation("SENT_START") else len(token.doc)
    following = next((t for t in token.doc[token.i + 1:end] if t.lower_ not in MID_ADVERBS), None)
    return "have" if following is not None and following.lower_ in _PERFECT_AFTER_S else "be"


# =========================================================================== negation
def remove_negation(negation: Token, edits: Edits) -> None:
    """Delete a negation; a contracted host gets its bare form back ("can't" -> "can", "WON'T" -> "WILL")."""
    edits.delete(negation.i)
    if negation.i > 0:
        host = negation.doc[negation.i - 1]
        bare = BARE_HOSTS.get(host.lower_)
        if bare and not host.whitespace_:
            edits.replace(host.i, match_case(bare, host.text))
