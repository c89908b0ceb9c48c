"""The English grammar SDA and AugCSE share (``augment/grammar.py``): rendering, agreement, negation,
and the cases where the two families' former copies disagreed, through both families."""
from __future__ import annotations

import random

import pytest

pytest.importorskip("spacy")

from cselab.augment import augcse, augcse_rules, build_augmenter, grammar, sda  # noqa: E402
from cselab.augment.base import AugmenterUnavailable  # noqa: E402
from cselab.augment.grammar import (  # noqa: E402
    Edits,
    contracted_s_lemma,
    past_form,
    person_number,
    present_form,
    remove_negation,
    render,
    subject_of,
)

try:
    NLP = sda.load_spacy()
except AugmenterUnavailable as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"spaCy model missing: {exc}", allow_module_level=True)


def token(text: str, word: str):
    return next(t for t in NLP(text) if t.text == word)


# --------------------------------------------------------------------------- one grammar
def test_both_families_use_the_one_grammar():
    """No second copy: the rules of both families call this module's functions and tables."""
    assert sda.Edits is augcse.Edits is grammar.Edits
    assert augcse.render is grammar.render
    assert sda.remove_negation is augcse.remove_negation is grammar.remove_negation
    assert sda.person_number is augcse.person_number is grammar.person_number
    assert sda.AUXILIARY_LEMMAS is augcse.AUXILIARY_LEMMAS is grammar.AUXILIARY_LEMMAS
    assert augcse.CONTRACTIONS is augcse_rules.CONTRACTIONS is grammar.CONTRACTIONS
    for module in (sda, augcse, augcse_rules):
        names = vars(module)
        assert not any(name in names for name in ("_Edits", "_append_word", "_person_number", "_CONTRACTIONS",
                                                  "CONTRACTED_HOSTS", "_BARE_HOST", "PLURAL_PRONOUNS",
                                                  "_PLURAL_PRONOUNS", "_apostrophe_form")), module.__name__


# --------------------------------------------------------------------------- rendering
def test_untouched_text_is_byte_identical():
    doc = NLP("  Two  spaces,\tand a tab .  ")
    assert Edits(doc).render() == doc.text
    edits = Edits(doc)
    edits.insert_after(1, ",")
    assert edits.render() == "  Two,  spaces,\tand a tab .  "


def test_deleting_keeps_the_right_space():
    doc = NLP("He does not like it, does he not?")
    negations = [t.i for t in doc if t.lower_ == "not"]
    assert render(doc, deleted=negations) == "He does like it, does he?"
    doc = NLP("He doesn't like it.")
    assert render(doc, deleted=[t.i for t in doc if t.lower_ == "n't"]) == "He does like it."


def test_a_replacing_word_gets_its_own_space():
    doc = NLP("She's happy.")
    assert render(doc, {1: "was"}) == "She was happy."
    assert render(doc, {1: "'ll be"}) == "She'll be happy."
    edits = Edits(doc)
    edits.insert_before(0, "Not ")
    edits.replace(0, "she")
    assert edits.render() == "Not she's happy."


def test_a_span_is_replaced_whole():
    doc = NLP("The old cat chased the dog.")
    assert render(doc, spans=[(0, 3, "The dog"), (4, 6, "the old cat")]) == "The dog chased the old cat."


# --------------------------------------------------------------------------- agreement
@pytest.mark.parametrize("text, word, person", [
    ("I am here.", "I", "1s"),
    ("She is here.", "She", "3s"),
    ("The dogs bark.", "dogs", "pl"),
    ("These may help us.", "These", "pl"),
    ("Me and him were late.", "Me", "pl"),  # a coordination is plural whatever its first word
    ("John and Mary were late.", "John", "pl"),
    ("You are late.", "You", "pl"),
])
def test_person_number(text, word, person):
    assert person_number(token(text, word)) == person


def test_person_number_without_a_subject_is_third_singular():
    assert person_number(None) == "3s"


@pytest.mark.parametrize("text, verb, subject", [
    ("They went home and ate dinner.", "ate", "They"),  # a conjunct takes the first verb's subject
    ("The men who were there left.", "were", "men"),  # a relative pronoun stands for its antecedent
    ("She has gone.", "has", "She"),
])
def test_subject_of(text, verb, subject):
    assert subject_of(token(text, verb)).text == subject


def test_forms_of_be_have_do_need_no_inflection_library():
    assert [present_form(v, p) for v in ("be", "have", "do") for p in ("1s", "3s", "pl")] == \
        ["am", "is", "are", "have", "has", "have", "do", "does", "do"]
    assert [past_form(v, p) for v in ("be", "have", "do") for p in ("1s", "pl")] == \
        ["was", "were", "had", "had", "did", "did"]
    assert present_form("walk", "3s") == "walks" and past_form("go", "pl") == "went"


@pytest.mark.parametrize("text, lemma", [
    ("She's got a new job.", "have"),
    ("He's been there.", "have"),
    ("He's always gone early.", "have"),
    ("She's happy.", "be"),
    ("It's built of stone.", "be"),
])
def test_contracted_s(text, lemma):
    assert contracted_s_lemma(token(text, "'s")) == lemma


# --------------------------------------------------------------------------- negation
@pytest.mark.parametrize("text, expected", [
    ("He won't come.", "He will come."),
    ("I Can't swim.", "I Can swim."),
    ("She does not care.", "She does care."),
])
def test_remove_negation(text, expected):
    doc = NLP(text)
    edits = Edits(doc)
    remove_negation(next(t for t in doc if t.dep_ == "neg"), edits)
    assert edits.render() == expected


# --------------------------------------------------------------------------- where the copies disagreed
def test_sda_reads_a_contracted_has_as_augcse_did():
    """SDA read "'s" before "got" as "is" ("She must be got a new job")."""
    doc = NLP("She's got a new job.")
    assert sda.affirmative_auxiliary(doc, random.Random(0), ("must",)) == "She must have got a new job."


def test_sda_agrees_with_plural_determiners_as_augcse_did():
    """SDA took "These" for third person singular ("These has to help us")."""
    assert sda.affirmative_auxiliary(NLP("These may help us."), random.Random(0), ("have to",)) == \
        "These have to help us."


def test_augcse_makes_a_coordinated_subject_plural_as_sda_did():
    """AugCSE read "Me and him" as first person singular ("Me and him am late")."""
    tense = build_augmenter("tense_transformation", direction="to_present")
    assert tense.augment(["Me and him were late for the show."], 0) == ["Me and him are late for the show."]


def test_augcse_knows_curly_contracted_be_as_sda_did():
    """AugCSE's lemmatizer gave "It’’ed late and I’mmed tired" and "Itwill ’ late"."""
    assert build_augmenter("tense_transformation", direction="to_past").augment(["It’s late and I’m tired."], 0) \
        == ["It was late and I was tired."]
    assert build_augmenter("tense_transformation", direction="to_future").augment(["It’s late and I’m tired."], 0) \
        == ["It’ll be late and I’ll be tired."]
