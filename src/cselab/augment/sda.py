"""SDA: rule-based discrete augmentations guided by a dependency parse.

Mao, Zhu, Lu, Zhao and Tan, "SDA: Simple Discrete Augmentation for Contrastive Sentence
Representation Learning". Three positives of increasing strength, each a few rules over a
spaCy parse, plus a single negation for use as a hard negative:

* ``sda_punctuation`` (PI, Algorithm 1): a comma between a subordinate clause and the clause it
  depends on; a comma after, or quotes around, the noun (nominal) subject; a duplicated inner
  punctuation mark; the final mark made '!'.
* ``sda_affirmative_aux`` (AA, Algorithm 2): one of the paper's affirmative auxiliaries ("must",
  "have to", "ought to", "cannot but", "cannot help but"; emphatic "do", "definitely", "certainly"
  and "surely" on request) at the first be-verb or verb ROOT in word order, with the verb in its
  base form and the tense kept ("went" -> "had to go", "was" -> "must have been").
* ``sda_double_negation`` (DN, Algorithm 3): two negation transformations (delete a negation, or
  insert "not" at an auxiliary / do-support at the ROOT verb / "Not" at the start); where fewer
  than two can be made, the authors' completion: the main predicate negated once under "It is not
  true that ..." (``completion="none"``: unchanged instead; see the class docstring).
* ``sda_single_negation``: one negation transformation at the main predicate (meaning-altering).

A sentence no rule fits comes back unchanged, byte for byte: output is rebuilt from the tokens'
own text and ``whitespace_``, so everything outside an edit is identical to the input.
Loading, batched parsing and the parse cache (:mod:`cselab.augment.spacy_pipeline`) and the English
grammar (:mod:`cselab.augment.grammar`: rendering edits, agreement, negation removal, the contraction
and pronoun tables) are shared with AugCSE's rules; this module adds the verb tables its rules read.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import random
import warnings
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from cselab import citations
from cselab.augment import spacy_pipeline
from cselab.augment.base import Augmenter, AugmenterUnavailable, register_augmenter, sentence_seed
from cselab.augment.grammar import (
    AUXILIARY_DEPS,
    AUXILIARY_LEMMAS,
    AUXILIARY_NEGATIONS,
    CONTRACTED_NEGATION,
    Edits,
    capitalize,
    contracted_s_lemma,
    decapitalize,
    keeps_capital,
    past_form,
    person_number,
    present_form,
    remove_negation,
    subject_of,
)
from cselab.augment.spacy_pipeline import MAX_PARSE_CHARS
from cselab.errors import counted

if TYPE_CHECKING:  # pragma: no cover - typing only
    from spacy.language import Language
    from spacy.tokens import Doc, Token

# The rules read fine-grained tags and dependencies only. attribute_ruler and lemmatizer cost as
# much CPU as the parser on short sentences, yet only the one or two verbs a rule rewrites need a
# lemma: :func:`verb_lemma` computes those on demand from the lemmatizer's own tables.
PIPES_NEEDED = ("tok2vec", "tagger", "parser")
VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"})
WH_TAGS = frozenset({"WDT", "WP", "WP$"})  # who, which, that, what: relative/interrogative pronouns

FINITE_TAGS = frozenset({"MD", "VBZ", "VBP", "VBD"})
CLAUSAL_DEPS = frozenset({"acl", "advcl", "ccomp", "csubj", "relcl", "xcomp"})
NOMINAL_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})  # grammar.SUBJECT_DEPS without the expletive "there"
_GROUP_SUBJECT_DEPS = NOMINAL_SUBJECT_DEPS | {"expl", "csubj"}  # a verb group's subject ("there", a clause)
_GROUP_MEMBER_DEPS = AUXILIARY_DEPS | {"neg"}  # words that belong to their head's verb group
NON_FINITE_AUX_TAGS = frozenset({"TO", "VBG"})  # infinitival "to"; "having", "being"
END_MARKS = frozenset({".", "!", "?", "…", "...", "!!", "?!", "!?"})
# Marks that can end a sentence (Algorithm 1's final "punctuation punc"); symbols such as '%' or '&'
# are not among them: replacing one with '!' would change the text, not its tone.
TERMINAL_MARKS = END_MARKS | {":", ";", ","}
NEGATION_WORDS = AUXILIARY_NEGATIONS | {"never"}
# Negative determiners/pronouns: a clause holding one ("there was no census") takes no extra "not".
NEGATIVE_ARGUMENTS = frozenset({"no", "none", "nothing", "nobody", "neither", "nor", "nowhere", "never"})


def load_spacy(model: str | None = None) -> Language:
    """SDA's pipeline (running PIPES_NEEDED only), with its lemmatizer's verb tables registered."""
    nlp = spacy_pipeline.load_pipeline(PIPES_NEEDED, model)
    if id(nlp.vocab) not in _LEMMA_TABLES:
        if "lemmatizer" not in nlp.pipe_names + nlp.disabled:
            raise AugmenterUnavailable("the spaCy pipeline has no lemmatizer, which SDA needs for verb lemmas")
        _register_lemma_tables(nlp)
    return nlp


_LEMMA_TABLES: dict[int, tuple[dict, set, list]] = {}  # id(vocab) -> verb exceptions, known verbs, rules


def _register_lemma_tables(nlp: Language) -> None:
    table = nlp.get_pipe("lemmatizer").lookups.get_table
    exceptions = dict(table("lemma_exc")["verb"])
    known = set(table("lemma_index")["verb"]) | {lemma for lemmas in exceptions.values() for lemma in lemmas}
    _LEMMA_TABLES[id(nlp.vocab)] = (exceptions, known | set(AUXILIARY_LEMMAS.values()),
                                    list(table("lemma_rules")["verb"]))


def _tables(token: Token) -> tuple[dict, set, list]:
    tables = _LEMMA_TABLES.get(id(token.doc.vocab))
    return tables if tables is not None else _LEMMA_TABLES[id(load_spacy().vocab)]


def is_known_verb(token: Token) -> bool:
    """The verb's lemma is in the lemmatizer's verb vocabulary: a guard against tagging errors
    ("Amphibolips confluenta" tagged as a verb) before a rule rewrites its form."""
    return verb_lemma(token) in _tables(token)[1]


def verb_lemma(token: Token) -> str:
    """The lemma of a verb from spaCy's rule-lemmatizer tables: exceptions ("went" -> "go"), then
    suffix rules whose result is a known verb (the first rule wins: "hoping" -> "hope", where the
    component itself picks "hop"); base forms (VB, VBP, MD) are their own lemma."""
    lower = token.lower_
    if lower in ("'s", "’s"):  # "he's gone" (perfect) vs "she's happy" / "it's built"
        return contracted_s_lemma(token)
    if lower in AUXILIARY_LEMMAS:
        return AUXILIARY_LEMMAS[lower]
    if token.tag_ in {"VB", "VBP", "MD"}:
        return lower
    exceptions, index, rules = _tables(token)
    if lower in exceptions:
        return exceptions[lower][0]
    known, unknown = [], []
    for old, new in rules:
        if lower.endswith(old) and len(lower) > len(old):
            form = lower[: len(lower) - len(old)] + new
            (known if form in index else unknown).append(form)
    return (known or unknown or [lower])[0]


def is_verb(token: Token) -> bool:
    """Tagged as a verb and made of letters (the tagger labels stray symbols too, e.g. control codes)."""
    return token.tag_ in VERB_TAGS and any(ch.isalpha() for ch in token.text)


def is_lexical_verb(token: Token) -> bool:
    """A verb other than a modal or a form of "be" (spaCy's VERB as opposed to AUX at the ROOT)."""
    return is_verb(token) and token.tag_ != "MD" and verb_lemma(token) != "be"


def parse(sentences: Sequence[str], *, model: str | None = None, **options) -> list[Doc | None]:
    """SDA's parses, through the shared batching and cache; ``options`` as for
    :func:`cselab.augment.spacy_pipeline.parse` (None for blank or overlong inputs)."""
    load_spacy(model)  # registers the verb tables before any rule reads a Doc
    return spacy_pipeline.parse(sentences, PIPES_NEEDED, model=model, **options)


def sentence_rng(seed: int, sentence: str) -> random.Random:
    """A generator fixed by (seed, sentence), the project's rule (``base.sentence_seed``): the
    same sentence gets the same choice in any batch and any process."""
    return random.Random(sentence_seed(seed, sentence))


# --------------------------------------------------------------------------- editing a parse
def _first_token(doc: Doc) -> Token | None:
    return next((t for t in doc if not t.is_space), None)


def _last_token(doc: Doc) -> Token | None:
    return next((t for t in reversed(doc) if not t.is_space), None)


def _capitalize_like(piece: str, original: Token) -> str:
    """Sentence-initial replacements keep the capital of the word they replace."""
    first = _first_token(original.doc)
    if first is not None and first.i == original.i and original.text[:1].isupper():
        return capitalize(piece)
    return piece


def _lowercase_first_word(doc: Doc, edits: Edits) -> None:
    """Lower-case the first word before a prefix ("Not the man ..."), unless it is a name/"I"/acronym."""
    first = _first_token(doc)
    if first is None or first.i in edits.replaced or not first.text[:1].isupper():
        return
    if keeps_capital(first):
        return
    edits.replace(first.i, decapitalize(first, first.text))


# --------------------------------------------------------------------------- verb groups
class VerbGroup:
    """A predicate ``head`` with its preceding auxiliaries; ``finite`` is the word carrying tense."""

    def __init__(self, head: Token):
        self.head = head
        self.auxiliaries = [c for c in head.children if c.dep_ in AUXILIARY_DEPS and c.i < head.i]
        self.finite = self.auxiliaries[0] if self.auxiliaries else head
        self.negations = [c for c in head.children if c.dep_ == "neg"]
        for aux in self.auxiliaries:
            self.negations += [c for c in aux.children if c.dep_ == "neg"]

    @property
    def is_finite(self) -> bool:
        return self.finite.tag_ in FINITE_TAGS

    @property
    def subject(self) -> Token | None:
        return next((c for c in self.head.children if c.dep_ in _GROUP_SUBJECT_DEPS), None)

    @property
    def inverted(self) -> bool:
        """Questions and inversions ("Is she happy?", "Never had I ...") are left alone."""
        subject = self.subject
        return subject is not None and subject.i > self.finite.i

    @property
    def kind(self) -> str:
        """How the tense-carrying word combines: modal, do-support, be, perfect have, or lexical."""
        finite = self.finite
        if finite.tag_ == "MD":
            return "modal"
        if verb_lemma(finite) == "be":
            return "be"
        if finite is not self.head:
            return {"do": "do", "have": "perfect"}.get(verb_lemma(finite), "other")
        return "lexical"

    @property
    def past(self) -> bool:
        return self.finite.tag_ == "VBD"

    @property
    def person(self) -> str:
        """Agreement for has/does ("1s", "3s" or "pl"): from the finite tag, else from the subject."""
        if self.finite.tag_ == "VBZ":
            return "3s"
        person = person_number(subject_of(self.finite))
        return "pl" if self.finite.tag_ == "VBP" and person == "3s" else person


def _main_groups(doc: Doc) -> list[VerbGroup]:
    """Predicates of main clauses: each sentence's ROOT, then verbs coordinated with it."""
    roots = [t for t in doc if t.dep_ == "ROOT"]
    heads = roots + [c for r in roots for c in r.children if c.dep_ == "conj" and is_verb(c)]
    return [VerbGroup(h) for h in heads if is_verb(h)]


def _group_of(token: Token) -> VerbGroup:
    return VerbGroup(token.head if token.dep_ in _GROUP_MEMBER_DEPS else token)


# --------------------------------------------------------------------------- punctuation insertion
PUNCTUATION_RULES = ("subordinate_clause", "noun_subject", "duplicate_inner", "final_exclamation")


def _pi_subordinate_clause(doc: Doc, edits: Edits, rng: random.Random) -> bool:
    """Rule 1: ',' "between the main clause and the subordinate clause" (the paper's rule (1)), for a
    clausal dependent (acl, advcl, ccomp, csubj, relcl, xcomp): before its first word when it follows
    the word it depends on, after its last word when it comes first ("When I came home, the ...")."""
    positions = []  # token indices to put the comma after
    for token in doc:
        if token.dep_ not in CLAUSAL_DEPS:
            continue
        start, end = token.left_edge.i, token.right_edge.i
        position = end if token.head.i > end else start - 1
        if _can_take_comma(doc, position) and position not in positions:
            positions.append(position)
    if not positions:
        return False
    edits.insert_after(rng.choice(positions), ",")
    return True


def _can_take_comma(doc: Doc, i: int) -> bool:
    """A comma fits after token ``i``: two words separated by a space, neither a punctuation mark
    (an existing mark already separates the clauses)."""
    if i < 0 or i + 1 >= len(doc):
        return False
    left, right = doc[i], doc[i + 1]
    return bool(left.whitespace_) and not (left.is_punct or left.is_space or right.is_punct or right.is_space)


def _pi_noun_subject(doc: Doc, edits: Edits, rng: random.Random) -> bool:
    """Rule 2: quote the noun subject's subtree, or put ',' after it. A noun subject is a word the
    parser labels a nominal subject (nsubj, nsubjpass): the paper finds "the roles of every word" with
    the dependency parser, so pronoun, number and determiner heads ("He", "Some of the residents")
    count; relative and interrogative pronouns ("the man who lives") do not, being no noun."""
    options = []
    for token in doc:
        if token.dep_ not in NOMINAL_SUBJECT_DEPS or token.tag_ in WH_TAGS:
            continue
        start, end = token.left_edge.i, token.right_edge.i
        if not _balanced(doc[start: end + 1]):
            continue  # a subtree cutting through brackets or quotes (a parse error) is left alone
        following = doc[end + 1] if end + 1 < len(doc) else None
        if following is not None and not following.is_punct:
            options.append(("comma", start, end))
        if not doc[start].is_quote and not doc[end].is_quote and not doc[end].is_punct:
            options.append(("quotes", start, end))
    if not options:
        return False
    how, start, end = rng.choice(options)
    if how == "comma":
        edits.insert_after(end, ",")
    else:
        edits.insert_before(start, '"')
        edits.insert_after(end, '"')
    return True


def _balanced(span) -> bool:
    """Brackets close in order and straight double quotes pair up inside ``span``."""
    depth = 0
    for token in span:
        if token.is_left_punct and token.is_bracket:
            depth += 1
        elif token.is_right_punct and token.is_bracket:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and sum(t.text.count('"') for t in span) % 2 == 0


def _pi_duplicate_inner(doc: Doc, edits: Edits, rng: random.Random) -> bool:
    """Rule 3: duplicate a punctuation mark that is not the final one (quotes/brackets excluded,
    since doubling one of a pair unbalances it; word-internal marks like "well-known" excluded)."""
    last = _last_token(doc)
    if last is None:
        return False
    marks = []
    for token in doc:
        if not token.is_punct or token.is_quote or token.is_bracket or token.i == last.i:
            continue
        inside_word = token.i > 0 and not doc[token.i - 1].whitespace_ and not token.whitespace_
        if not inside_word:
            marks.append(token)
    if not marks:
        return False
    mark = rng.choice(marks)
    edits.insert_after(mark.i, mark.text)
    return True


def _pi_final_exclamation(doc: Doc, edits: Edits, rng: random.Random) -> bool:
    """Rule 4 (Algorithm 1, lines 16-22): a sentence ending with '!' gets another '!'; any other final
    mark ('.', '?', ':', ';', ',', '...') becomes '!'. The final mark may sit inside closing quotes or
    brackets ('... young men."'), and a full stop absorbed by a closing abbreviation ("the Y.M.C.A.")
    is kept, '!' appended. A sentence without a final mark is left alone (Algorithm 1, line 24)."""
    mark = _final_mark(doc)
    if mark is None:
        return False
    if mark.text == "!" or not mark.is_punct:  # "!" -> "!!"; "Y.M.C.A." -> "Y.M.C.A.!"
        edits.insert_after(mark.i, "!")
    else:
        edits.replace(mark.i, "!")
    return True


def _final_mark(doc: Doc) -> Token | None:
    """The token holding the sentence's final mark, looking inside trailing closing quotes and
    brackets; None when the sentence ends without one."""
    last = _last_token(doc)
    if last is None:
        return None
    i = last.i
    while i > 0 and (_is_closing(doc[i]) or doc[i].is_space):
        i -= 1
    token = doc[i]
    if token.text in TERMINAL_MARKS:
        return token
    ends_abbreviation = token.text.endswith(".") and any(ch.isalpha() for ch in token.text)
    return token if ends_abbreviation and token.i == last.i else None


def _is_closing(token: Token) -> bool:
    return token.is_quote or (token.is_bracket and token.is_right_punct)


_PI_RULES: dict[str, Callable[[Doc, Edits, random.Random], bool]] = {
    "subordinate_clause": _pi_subordinate_clause,
    "noun_subject": _pi_noun_subject,
    "duplicate_inner": _pi_duplicate_inner,
    "final_exclamation": _pi_final_exclamation,
}


# Rules 3 and 4 look at tokens only, so a sentence drawn for them needs no parse.
_PI_RULES_NEEDING_PARSE = frozenset({"subordinate_clause", "noun_subject"})


def punctuation_insertion(doc: Doc, rng: random.Random, rule: str | None = None) -> str:
    """Algorithm 1. ``rule=None``: the first of the four rules that applies (the algorithm's
    order); a rule name: only that rule, the sentence unchanged if it does not apply."""
    edits = Edits(doc)
    for name in PUNCTUATION_RULES if rule is None else (rule,):
        if _PI_RULES[name](doc, edits, rng):
            break
    return edits.render() if edits else doc.text


# --------------------------------------------------------------------------- affirmative auxiliary
# The paper's auxiliaries (Algorithm 2's V_aux): its text lists "have to", "can't but", "can't help to"
# "etc.", and the authors' implementation "must", "have to", "ought to" (NOTES.md). "can't but" and
# "can't help to" are written in their standard forms "cannot but" and "cannot help but" (both take a
# bare infinitive).
PAPER_AUXILIARIES = ("must", "have to", "ought to", "cannot but", "cannot help but")
# cselab's emphatic additions, opt-in (``auxiliaries=[...]``): emphatic "do" and three adverbs.
EXTRA_AUXILIARIES = ("do", "definitely", "certainly", "surely")
AFFIRMATIVE_AUXILIARIES = PAPER_AUXILIARIES + EXTRA_AUXILIARIES
_ADVERBS = frozenset({"definitely", "certainly", "surely"})


def _past_participle_guess(verb: Token) -> str | None:
    """Regular verbs share the -ed form for past and participle; irregular ones are not guessed."""
    return verb.text if verb.tag_ == "VBD" and verb.lower_.endswith("ed") else None


def _affirmative_phrase(auxiliary: str, group: VerbGroup) -> str | None:
    """The words replacing the group's finite word, or None where ``auxiliary`` does not fit."""
    kind, past, finite = group.kind, group.past, group.finite
    if kind == "other" or (kind == "lexical" and not is_known_verb(group.head)):
        return None
    lemma = verb_lemma(group.head) if kind == "lexical" else ""
    if auxiliary in _ADVERBS:  # after an auxiliary/be ("is definitely"), before a lexical verb
        return f"{auxiliary} {finite.text}" if kind == "lexical" else f"{finite.text} {auxiliary}"
    if auxiliary == "do":  # emphatic do-support: "She does like it", "He did go"
        if kind != "lexical":
            return None
        return f"{past_form('do', group.person) if past else present_form('do', group.person)} {lemma}"
    if auxiliary in {"must", "ought to"}:  # no past form: the past goes through "have" + participle
        if not past:
            rest = {"modal": "", "do": "", "be": " be", "perfect": " have", "lexical": f" {lemma}"}[kind]
            return auxiliary + rest
        if kind == "be":
            return f"{auxiliary} have been"
        if kind == "perfect":
            return f"{auxiliary} have"
        participle = _past_participle_guess(finite) if kind == "lexical" else None
        return f"{auxiliary} have {participle}" if participle else None
    if auxiliary == "have to":
        have = past_form("have", group.person) if past else present_form("have", group.person)
        rest = {"modal": "", "do": "", "be": " be", "perfect": None, "lexical": f" {lemma}"}[kind]
        return None if rest is None else f"{have} to{rest}"
    if auxiliary in {"cannot but", "cannot help but"}:
        phrase = auxiliary.replace("cannot", "could not") if past else auxiliary
        rest = {"modal": "", "do": "", "be": " be", "perfect": None, "lexical": f" {lemma}"}[kind]
        return None if rest is None else phrase + rest
    raise ValueError(f"unknown affirmative auxiliary {auxiliary!r}")


def _aa_candidates(doc: Doc) -> Iterable[VerbGroup]:
    """Algorithm 2's places, in word order: each be-verb (lines 3-4, "is", a passive's "was", the
    "been" of "has been") and the ROOT when it is a verb (lines 6-7), as the verb group whose finite
    word takes the auxiliary ("may transfer" -> "has to transfer", the paper's Table 1)."""
    for token in doc:
        if is_verb(token) and verb_lemma(token) == "be":
            yield _group_of(token)
        elif token.dep_ == "ROOT" and is_verb(token):
            yield VerbGroup(token)


def affirmative_auxiliary(doc: Doc, rng: random.Random, auxiliaries: Sequence[str] = PAPER_AUXILIARIES) -> str:
    """Algorithm 2: one affirmative auxiliary at the first be-verb or verb ROOT, in word order, that
    can take one (finite, not negated, not a question); the auxiliary is drawn among those that fit
    the verb's form and tense (the paper draws it first, whatever the verb)."""
    for group in _aa_candidates(doc):
        if not group.is_finite or group.negations or group.inverted or group.finite.lower_ == "'d" \
                or not is_verb(group.finite) or not is_verb(group.head):
            continue
        fitting = [(a, p) for a in auxiliaries if (p := _affirmative_phrase(a, group)) is not None]
        if not fitting:
            continue
        _, phrase = rng.choice(fitting)
        edits = Edits(doc)
        edits.replace(group.finite.i, _capitalize_like(phrase, group.finite))
        return edits.render()
    return doc.text


# --------------------------------------------------------------------------- negation
def _removable_negation(token: Token) -> bool:
    """A "not"/"n't"/"never" that can be deleted leaving a grammatical sentence."""
    if token.dep_ != "neg" or token.lower_ not in NEGATION_WORDS:
        return False
    first = _first_token(token.doc)
    if first is not None and first.i == token.i:
        return False  # "Never have I ..." would need re-ordering
    if token.lower_ in CONTRACTED_NEGATION:
        host = token.doc[token.i - 1] if token.i > 0 else None
        return host is not None and host.lower_ != "ai"  # "ain't" has no single bare form
    return True


def _insert_negation(group: VerbGroup, edits: Edits) -> bool:
    """"not" after an auxiliary, modal or be; do-support (does/do/did + base form) otherwise."""
    finite = group.finite
    if finite.i in edits.replaced or finite.i in edits.after or not is_verb(finite):
        return False
    arguments = [c for c in group.head.children if c.dep_ not in CLAUSAL_DEPS | {"conj"}]
    if any(w.lower_ in NEGATIVE_ARGUMENTS for a in arguments for w in (a, *a.children)):
        return False  # "was not no census"
    if group.kind in {"modal", "be", "do", "perfect"}:
        edits.insert_after(finite.i, " not")
        return True
    if group.kind != "lexical" or finite.lower_ == "'d" or not is_known_verb(finite):
        return False
    if finite.tag_ == "VBD":
        do = past_form("do", group.person)
    elif finite.tag_ in {"VBZ", "VBP"}:
        do = present_form("do", group.person)
    elif finite.tag_ == "VB" and finite.i == _first_token(finite.doc).i:
        do = present_form("do", "pl")  # an imperative: "Go home." -> "Do not go home."
    else:
        return False
    edits.replace(finite.i, _capitalize_like(f"{do} not {verb_lemma(finite)}", finite))
    return True


def _negate_main_predicate(doc: Doc, edits: Edits) -> VerbGroup | None:
    """One negation transformation at the first usable main predicate: remove its negation, or add one."""
    for group in _main_groups(doc):
        if group.inverted:
            continue
        removable = [n for n in group.negations if _removable_negation(n)]
        if removable:
            for negation in removable:
                remove_negation(negation, edits)
            return group
        if not group.negations and (group.is_finite or group.finite.tag_ == "VB"):
            if _insert_negation(group, edits):
                return group
    return None


def single_negation(doc: Doc) -> str:
    edits = Edits(doc)
    return edits.render() if _negate_main_predicate(doc, edits) else doc.text


TEMPLATE = "It is not true that "


def _prefix(doc: Doc, edits: Edits, prefix: str) -> None:
    first = _first_token(doc)
    _lowercase_first_word(doc, edits)
    edits.insert_before(first.i, prefix)


def double_negation_paper(doc: Doc) -> str:
    """Algorithm 3 with correct English forms: delete one negation; then, in word order, "not"
    after a finite auxiliary, before a non-finite one ("not to go", "not having gone"), and at the
    ROOT do-support for a lexical verb or "Not" at the start otherwise (also when the ROOT's verb
    group is already negated, as in the paper's Table 1). Each verb group changes once; fewer than
    two transformations leave the sentence unchanged."""
    edits, count = _algorithm_3(doc)
    return edits.render() if count >= 2 else doc.text


def double_negation(doc: Doc) -> str:
    """Algorithm 3 where it makes two negations; otherwise, as the authors' implementation completes it
    (NOTES.md), one negation at the main predicate cancelled by "It is not true that ..."; unchanged
    when neither can be made."""
    edits, count = _algorithm_3(doc)
    return edits.render() if count >= 2 else double_negation_template(doc)


def _algorithm_3(doc: Doc) -> tuple[Edits, int]:
    """Algorithm 3's edits (at most two) and how many negation transformations they make."""
    edits = Edits(doc)
    touched: set[int] = set()  # verb-group heads already transformed
    count = _remove_first_negation(doc, edits, touched)
    for token in doc:
        if count >= 2:
            break
        if token.dep_ in AUXILIARY_DEPS and token.tag_ in NON_FINITE_AUX_TAGS:
            count += _negate_non_finite_auxiliary(token, edits, touched)
        elif token.dep_ in AUXILIARY_DEPS and token.tag_ in FINITE_TAGS:
            group = _group_of(token)
            if group.finite.i == token.i and group.head.i not in touched and not group.negations \
                    and not group.inverted and _insert_negation(group, edits):
                touched.add(group.head.i)
                count += 1
        elif token.dep_ == "ROOT":
            count += _negate_root(token, edits, touched)
    return edits, count


def _remove_first_negation(doc: Doc, edits: Edits, touched: set[int]) -> int:
    """Algorithm 3, lines 2-5: delete the first removable negation (with any other of its verb group)."""
    for token in doc:
        if _removable_negation(token):
            group = _group_of(token)
            for negation in (n for n in group.negations if _removable_negation(n)):
                remove_negation(negation, edits)
            touched.add(group.head.i)
            return 1
    return 0


def _negate_non_finite_auxiliary(token: Token, edits: Edits, touched: set[int]) -> int:
    """Algorithm 3's "w.dep == aux" step for an infinitival "to" or a gerund "having"/"being":
    English puts "not" before them ("confessed to not having taken") rather than after."""
    group = _group_of(token)
    if group.finite.i != token.i or group.head.i in touched or group.negations or token.i in edits.before:
        return 0
    first = _first_token(token.doc)
    if first is not None and first.i == token.i:
        _prefix(token.doc, edits, "Not ")  # "Having won ..." -> "Not having won ..."
    else:
        edits.insert_before(token.i, "not ")
    touched.add(group.head.i)
    return 1


def _negate_root(root: Token, edits: Edits, touched: set[int]) -> int:
    """Algorithm 3's ROOT step: do-support for a lexical verb ("did not go"); "Not" at the start
    otherwise (line 18), also for a ROOT whose verb group is already negated (the paper's Table 1).
    A copula ROOT ("She is happy") is no verb here: it gets "Not" and nothing else. Algorithm 3's
    "not" goes to words labelled aux (spaCy: aux, auxpass), and spaCy labels a copula ROOT."""
    group = VerbGroup(root)
    if is_lexical_verb(root) and root.i not in touched and not group.negations and not group.inverted \
            and _insert_negation(group, edits):
        touched.add(root.i)
        return 1
    first = _first_token(root.doc)
    if first is None or first.i in edits.before:  # "Not" is already there
        return 0
    _prefix(root.doc, edits, "Not ")
    return 1


def double_negation_template(doc: Doc) -> str:
    """One negation transformation at the main predicate, cancelled by "It is not true that ..."."""
    edits = Edits(doc)
    group = _negate_main_predicate(doc, edits)
    if group is None or group.subject is None:  # an imperative cannot follow "that"
        return doc.text
    _prefix(doc, edits, TEMPLATE)
    return edits.render()


# --------------------------------------------------------------------------- worker pool
# Why a pool of our own rather than ``nlp.pipe(n_process=N)``: spaCy's workers send every parsed
# Doc back to the parent (serialised, then rebuilt), which costs more CPU than the second core
# saves (benchmarks/results/sda_speed.md). Here each worker parses *and* applies the rule, so only
# the input and output strings cross the process boundary.
_WORKER_AUGMENTER: _SpacyAugmenter | None = None  # set in each pool worker by the initializer


def _init_worker(augmenter: _SpacyAugmenter) -> None:
    global _WORKER_AUGMENTER
    _WORKER_AUGMENTER = augmenter
    load_spacy(augmenter.model)  # inherited (already loaded) under fork; loaded once here under spawn


def _augment_chunk(task: tuple[list[str], int]) -> list[str]:
    sentences, seed = task
    return _WORKER_AUGMENTER.augment(sentences, seed)


def _pool_context():
    """'fork' where the platform has it: workers start at once and share the parent's loaded
    pipeline copy-on-write; elsewhere the default method (each worker loads the pipeline)."""
    return multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)


def _shut_down(pool) -> None:
    pool.terminate()  # workers are idle between augment() calls: nothing is lost
    pool.join()


def resolve_processes(name: str, processes: int | str) -> int:
    """``processes``: a count >= 1, or 0 / "auto" for one worker per CPU (``os.cpu_count()``)."""
    if processes == "auto" or (isinstance(processes, int) and not isinstance(processes, bool) and processes == 0):
        return os.cpu_count() or 1
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 0:
        raise ValueError(f"{name}: processes must be an integer >= 0 or 'auto', got {processes!r}")
    return processes


# --------------------------------------------------------------------------- augmenters
class _SpacyAugmenter(Augmenter):
    """Parses a batch with spaCy (``nlp.pipe``) and applies one rule per parsed sentence.

    ``processes`` > 1 (or 0 / "auto" for every CPU) runs parse + rule in a pool of worker
    processes, ``chunk_size`` sentences per task; outputs are identical to ``processes=1``, because
    each sentence's randomness comes from (seed, sentence) alone. The pool starts on the first
    batch larger than one chunk, is reused by later calls, and stops when the augmenter is garbage
    collected, at interpreter exit, or on :meth:`close`. Keep the default 1 inside training
    data-loader workers: they are already separate processes (and daemonic ones cannot start a
    pool; the augmenter then works in-process with a warning). Use it for offline augmentation
    (``cselab augment --aug sda_punctuation --set sda_punctuation.processes=auto``) and benchmarks.
    Pickling drops the pool."""
    citation = citations.SDA

    name = ""
    tag = ""
    cost = "parse"  # spaCy parsing: property tests run these with fewer examples

    def __init__(self, batch_size: int = 256, n_process: int = 1, model: str | None = None,
                 max_chars: int = MAX_PARSE_CHARS, processes: int | str = 1, chunk_size: int = 256):
        if batch_size < 1 or n_process < 1 or chunk_size < 1:
            raise ValueError(f"{self.name}: batch_size, n_process and chunk_size must be >= 1, "
                             f"got {batch_size}, {n_process}, {chunk_size}")
        processes = resolve_processes(self.name, processes)
        if processes > 1 and n_process > 1:
            raise ValueError(f"{self.name}: use processes (parse + rule in workers) or spaCy's n_process, not both")
        self.batch_size, self.n_process, self.model, self.max_chars = batch_size, n_process, model, max_chars
        self.processes, self.chunk_size = processes, chunk_size
        self._pool = self._pool_finalizer = self._pool_pid = None
        load_spacy(model)  # fail at build time, with a clear message, if spaCy or the model is missing

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        if self.processes > 1 and len(sentences) > self.chunk_size:
            pool = self._worker_pool()
            if pool is not None:
                chunks = [(list(sentences[i: i + self.chunk_size]), seed)
                          for i in range(0, len(sentences), self.chunk_size)]
                # map keeps the chunks' order; chunksize=1 hands them out one by one (load balance)
                return [out for chunk in pool.map(_augment_chunk, chunks, chunksize=1) for out in chunk]
        rngs = [sentence_rng(seed, text) for text in sentences]
        plans = [self.plan(rng) for rng in rngs]
        docs = parse(sentences, model=self.model, batch_size=self.batch_size, n_process=self.n_process,
                     max_chars=self.max_chars, tokenize_only=[not self.needs_parse(p) for p in plans])
        return self._rewrite_all(sentences, docs, rngs, plans)

    def _worker_pool(self):
        """The pool, started on first use; None where this process may not have children."""
        if self._pool is not None and self._pool_pid != os.getpid():
            # A forked copy (e.g. a DataLoader worker) holds the parent's pool, unusable here.
            self._pool = self._pool_finalizer = None
        if self._pool is None:
            if multiprocessing.current_process().daemon:
                warnings.warn(f"{self.name}: processes={self.processes} ignored in a daemonic process "
                              "(e.g. a DataLoader worker); augmenting in this process", RuntimeWarning,
                              stacklevel=3)
                self.processes = 1
                return None
            worker_copy = copy.copy(self)  # __getstate__: no pool; processes=1 so workers never nest
            worker_copy.processes = 1
            self._pool = _pool_context().Pool(self.processes, initializer=_init_worker, initargs=(worker_copy,))
            self._pool_pid = os.getpid()
            self._pool_finalizer = weakref.finalize(self, _shut_down, self._pool)  # also runs at exit
        return self._pool

    def close(self) -> None:
        """Stop the worker pool now (a later batch starts a new one)."""
        if self._pool_finalizer is not None and self._pool_pid == os.getpid():
            self._pool_finalizer()
        self._pool = self._pool_finalizer = self._pool_pid = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pool"] = state["_pool_finalizer"] = state["_pool_pid"] = None  # a pool cannot cross processes
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def augment_docs(self, sentences: Sequence[str], docs: Sequence[Doc | None], seed: int) -> list[str]:
        """Apply the rule to already parsed sentences (parse once, augment in several ways);
        gives exactly what :meth:`augment` gives for the same seed."""
        rngs = [sentence_rng(seed, text) for text in sentences]
        return self._rewrite_all(sentences, docs, rngs, [self.plan(rng) for rng in rngs])

    def _rewrite_all(self, sentences, docs, rngs, plans) -> list[str]:
        if len(docs) != len(sentences):
            raise ValueError(f"{self.name}: {counted(len(sentences), 'sentence')} but {counted(len(docs), 'parse')}")
        return [text if doc is None else self.rewrite(doc, rng, plan)
                for text, doc, rng, plan in zip(sentences, docs, rngs, plans, strict=True)]

    def plan(self, rng: random.Random) -> object:
        """Random choices that decide how much parsing a sentence needs, drawn before parsing."""
        return None

    def needs_parse(self, plan: object) -> bool:
        return True

    def rewrite(self, doc: Doc, rng: random.Random, plan: object) -> str:
        raise NotImplementedError


@register_augmenter
class PunctuationInsertion(_SpacyAugmenter):
    """``rule_choice="random"`` (default): one of the four rules drawn uniformly, as the paper's text
    says ("randomly select a rule"); it reproduces the paper's changed share (Table 3) far better
    than ``"ordered"``, Algorithm 1's first-applicable-rule order, which changes almost every
    sentence (see benchmarks/results/sda_rates.md)."""

    name = "sda_punctuation"
    tag = "meaning-preserving"
    description = "SDA punctuation insertion: clause comma, subject comma/quotes, duplicated mark or final '!'"

    def __init__(self, rule_choice: str = "random", **kwargs):
        if rule_choice not in {"random", "ordered"}:
            raise ValueError(f"sda_punctuation: rule_choice must be 'random' or 'ordered', got {rule_choice!r}")
        super().__init__(**kwargs)
        self.rule_choice = rule_choice

    def plan(self, rng):
        return rng.choice(PUNCTUATION_RULES) if self.rule_choice == "random" else None

    def needs_parse(self, plan):
        return plan is None or plan in _PI_RULES_NEEDING_PARSE

    def rewrite(self, doc, rng, plan):
        return punctuation_insertion(doc, rng, plan)


@register_augmenter
class AffirmativeAuxiliary(_SpacyAugmenter):
    """Algorithm 2: an auxiliary of ``auxiliaries`` (default: the paper's five) at the first be-verb or
    verb ROOT, in word order, that can take one ("The man who was there left." -> "The man who had to
    be there left."). cselab's emphatic additions are opt-in: ``auxiliaries: [must, have to, ought to,
    cannot but, cannot help but, do, definitely, certainly, surely]`` (the earlier default)."""

    name = "sda_affirmative_aux"
    tag = "possibly-altering"
    description = "SDA affirmative auxiliary ('must', 'have to', 'ought to', ...) at the first be-verb or ROOT verb"
    output_revision = 1  # 1: the paper's auxiliaries and place (earlier: extras by default, main clause first)

    def __init__(self, auxiliaries: Sequence[str] = PAPER_AUXILIARIES, **kwargs):
        unknown = [a for a in auxiliaries if a not in AFFIRMATIVE_AUXILIARIES]
        if unknown or not auxiliaries:
            raise ValueError(f"sda_affirmative_aux: auxiliaries must be a non-empty subset of "
                             f"{list(AFFIRMATIVE_AUXILIARIES)}, got {list(auxiliaries)}")
        super().__init__(**kwargs)
        self.auxiliaries = tuple(auxiliaries)

    def rewrite(self, doc, rng, plan):
        return affirmative_auxiliary(doc, rng, self.auxiliaries)


@register_augmenter
class DoubleNegation(_SpacyAugmenter):
    """``completion`` says what happens where Algorithm 3 makes fewer than two negations:

    - ``"template"`` (default), as the authors' implementation completes it (NOTES.md): one negation
      at the main predicate (remove its negation, or add one), cancelled by "It is not true that
      ..." ("He went home." -> "It is not true that he did not go home."); a sentence with two
      negations to make gets Algorithm 3's ("He wants to go home." -> "He does not want not to go
      home.");
    - ``"none"``: Algorithm 3 as printed, the sentence unchanged;
    - ``"template_only"``: the template on every sentence, Algorithm 3 never (cselab's earlier
      ``"template"``): the two negations always scope over each other and cancel, where Algorithm
      3's loop can negate two unrelated clauses.

    The template applies to far more sentences than Algorithm 3 (benchmarks/results/sda_rates.md)."""

    name = "sda_double_negation"
    tag = "possibly-altering"
    description = "SDA double negation: two negation transformations (Algorithm 3), else 'It is not true that ...'"
    output_revision = 1  # 1: the template completes Algorithm 3 by default (earlier: opt-in)
    completions = ("template", "none", "template_only")

    def __init__(self, completion: str = "template", **kwargs):
        if completion not in self.completions:
            raise ValueError(f"sda_double_negation: completion must be one of {', '.join(self.completions)}, "
                             f"got {completion!r}")
        super().__init__(**kwargs)
        self.completion = completion

    def rewrite(self, doc, rng, plan):
        if self.completion == "template":
            return double_negation(doc)
        return double_negation_template(doc) if self.completion == "template_only" else double_negation_paper(doc)


@register_augmenter
class SingleNegation(_SpacyAugmenter):
    """One negation transformation at the main predicate: SDA's hard negative (3-column format)."""

    name = "sda_single_negation"
    tag = "altering"
    description = "One negation at the main verb (remove it, or add not/do-support): a hard negative"

    def rewrite(self, doc, rng, plan):
        return single_negation(doc)
