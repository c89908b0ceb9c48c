"""SDA augmenters (Mao et al.): hand-checked rules, verb forms, determinism, robustness.

spaCy is loaded once per process (``load_spacy`` is cached); augmenters are built once per module.
"""
from __future__ import annotations

import difflib
import multiprocessing
import os
import pickle
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("spacy")

from cselab.augment import augment_with_flags, build_augmenter  # noqa: E402
from cselab.augment.base import AugmenterUnavailable  # noqa: E402
from cselab.augment.sda import (  # noqa: E402
    AFFIRMATIVE_AUXILIARIES,
    PAPER_AUXILIARIES,
    PUNCTUATION_RULES,
    affirmative_auxiliary,
    double_negation_paper,
    double_negation_template,
    load_spacy,
    parse,
    punctuation_insertion,
    single_negation,
    verb_lemma,
)

try:
    NLP = load_spacy()
except AugmenterUnavailable as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"spaCy model missing: {exc}", allow_module_level=True)

NAMES = ("sda_punctuation", "sda_affirmative_aux", "sda_double_negation", "sda_single_negation")
_BUILT: dict[tuple, object] = {}


def aug(name: str, **params):
    key = (name, tuple(sorted(params.items())))
    if key not in _BUILT:
        _BUILT[key] = build_augmenter(name, **params)
    return _BUILT[key]


def doc(text: str):
    return NLP(text)


def rng(seed: int = 0) -> random.Random:
    return random.Random(seed)


def aa(text: str, auxiliary: str, seed: int = 0) -> str:
    return affirmative_auxiliary(doc(text), rng(seed), (auxiliary,))


# --------------------------------------------------------------------------- punctuation insertion
def test_pi_rule1_comma_before_subordinate_clause():
    assert punctuation_insertion(doc("The man who lives next door is a doctor."), rng(), "subordinate_clause") \
        == "The man, who lives next door is a doctor."
    assert punctuation_insertion(doc("She is happy."), rng(), "subordinate_clause") == "She is happy."


@pytest.mark.parametrize("text, expected", [
    # Rule (1) puts the comma "between the main clause and the subordinate clause": after a clause
    # that comes first, never in front of the sentence.
    ("When I came home the dog was asleep.", "When I came home, the dog was asleep."),
    ("Although it rained we went out.", "Although it rained, we went out."),
    ("Although it rained, we went out.", "Although it rained, we went out."),  # already separated
])
def test_pi_rule1_comma_after_a_leading_subordinate_clause(text, expected):
    assert {punctuation_insertion(doc(text), rng(seed), "subordinate_clause") for seed in range(6)} == {expected}


def test_pi_rule2_comma_after_or_quotes_around_noun_subject():
    text = "The old man reads a book."
    outputs = {punctuation_insertion(doc(text), rng(seed), "noun_subject") for seed in range(12)}
    assert outputs == {"The old man, reads a book.", '"The old man" reads a book.'}


@pytest.mark.parametrize("text, expected", [
    # The noun subject is the parser's nominal subject (nsubj): pronoun and determiner heads count.
    ("She reads a book.", {"She, reads a book.", '"She" reads a book.'}),
    ("Some of the residents left.", {"Some of the residents, left.", '"Some of the residents" left.'}),
    # A relative pronoun is no noun: only the sentence's own subject is framed.
    ("The man who lives next door is a doctor.",
     {"The man who lives next door, is a doctor.", '"The man who lives next door" is a doctor.'}),
    ("Which is better?", {"Which is better?"}),
    # The paper's Table 1 (its PI example is the comma after the noun subject).
    ("A shareholder may transfer its Shares only with the prior written consent of the Company.",
     {"A shareholder, may transfer its Shares only with the prior written consent of the Company.",
      '"A shareholder" may transfer its Shares only with the prior written consent of the Company.'}),
])
def test_pi_rule2_noun_subject_is_the_nominal_subject(text, expected):
    assert {punctuation_insertion(doc(text), rng(seed), "noun_subject") for seed in range(12)} == expected


def test_pi_rule2_never_quotes_across_brackets():
    for text in ("The gates (from the west) led to the fort.", 'The "big gates led to the fort.'):
        for seed in range(10):
            out = punctuation_insertion(doc(text), rng(seed), "noun_subject")
            assert out.count("(") == out.count(")") and out.count('"') % 2 == text.count('"') % 2


def test_pi_rule3_duplicates_an_inner_mark_only():
    assert punctuation_insertion(doc("Yes, he came home."), rng(), "duplicate_inner") == "Yes,, he came home."
    # The final mark, word-internal hyphens and quotes are not duplicated.
    for text in ("He came home.", "A well-known man came.", 'He said "hi" today'):
        assert punctuation_insertion(doc(text), rng(), "duplicate_inner") == text


def test_pi_rule4_final_exclamation():
    assert punctuation_insertion(doc("She is happy."), rng(), "final_exclamation") == "She is happy!"
    assert punctuation_insertion(doc("Is she happy?"), rng(), "final_exclamation") == "Is she happy!"
    assert punctuation_insertion(doc("What a day!"), rng(), "final_exclamation") == "What a day!!"
    assert punctuation_insertion(doc("She is happy"), rng(), "final_exclamation") == "She is happy"


@pytest.mark.parametrize("text, expected", [
    # Algorithm 1, lines 16-22: whatever punctuation ends the sentence becomes '!' ...
    ("The winners were:", "The winners were!"),
    ("He won the cup;", "He won the cup!"),
    # ... also inside closing quotes or brackets, which stay balanced ...
    ('He said "go home."', 'He said "go home!"'),
    ("(He left.)", "(He left!)"),
    ("He was born in the U.S. (Ohio).", "He was born in the U.S. (Ohio)!"),
    # ... and a full stop that a closing abbreviation absorbed is kept, '!' appended.
    ("He joined the Y.M.C.A.", "He joined the Y.M.C.A.!"),
    # No final mark (line 24), or a symbol rather than a mark: unchanged.
    ("It rose 5%", "It rose 5%"),
    ("He moved (in 1990)", "He moved (in 1990)"),
    ("YMCA in South Australia", "YMCA in South Australia"),
])
def test_pi_rule4_final_mark_inside_closers_and_after_abbreviations(text, expected):
    assert punctuation_insertion(doc(text), rng(), "final_exclamation") == expected


def test_pi_ordered_takes_the_first_rule_that_applies():
    pi = aug("sda_punctuation", rule_choice="ordered")
    assert pi.augment(["The man who lives next door is a doctor."], 0) == ["The man, who lives next door is a doctor."]
    assert pi.augment(["Happy days."], 0) == ["Happy days!"]  # rules 1-3 cannot apply


def test_pi_random_draws_each_rule_across_seeds():
    text = "When I came home, the old man who lives next door was asleep."
    outputs = {aug("sda_punctuation").augment([text], seed)[0] for seed in range(40)}
    assert text.replace(".", "!") in outputs  # rule 4
    assert text.replace(",", ",,") in outputs  # rule 3
    assert any('"' in o for o in outputs) or any("man," in o for o in outputs)  # rule 2
    assert len(outputs) >= 4


CLOSERS = "\"'”’)]}"


def _only_insertions(before: str, after: str) -> bool:
    """Everything of ``before`` survives in order, byte for byte (the final mark, possibly inside
    closing quotes or brackets, may become '!')."""
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    for op, _i1, i2, j1, j2 in ops:
        if op == "insert":
            continue
        if op == "equal":
            continue
        if op == "replace" and not before[i2:].rstrip().strip(CLOSERS) and after[j1:j2] == "!":
            continue
        return False
    return True


def test_pi_keeps_the_rest_of_the_sentence_byte_identical():
    sentences = ["  Two  spaces,\tand a tab; the old man,  who is tall, walked home  .  ",
                 "The committee, after long debate, approved the plan that the mayor proposed.",
                 "In 1850 a meeting was called (apparently for a Y.M.C.A.) by the founders."]
    for rule_choice in ("random", "ordered"):
        pi = aug("sda_punctuation", rule_choice=rule_choice)
        for seed in range(8):
            for before, after in zip(sentences, pi.augment(sentences, seed), strict=True):
                assert _only_insertions(before, after), (before, after)
                assert after != before or rule_choice == "random"  # a drawn rule may not apply


# --------------------------------------------------------------------------- affirmative auxiliary
@pytest.mark.parametrize("text, auxiliary, expected", [
    ("She is happy.", "must", "She must be happy."),
    ("She is happy.", "have to", "She has to be happy."),
    ("They are happy.", "have to", "They have to be happy."),
    ("She's happy.", "must", "She must be happy."),
    ("She is happy.", "definitely", "She is definitely happy."),
    ("She was happy.", "must", "She must have been happy."),
    ("She was happy.", "have to", "She had to be happy."),
    ("He likes apples.", "must", "He must like apples."),
    ("He likes apples.", "have to", "He has to like apples."),
    ("He likes apples.", "do", "He does like apples."),
    ("He likes apples.", "certainly", "He certainly likes apples."),
    ("The dogs eat meat.", "have to", "The dogs have to eat meat."),
    ("He went home.", "have to", "He had to go home."),
    ("He went home.", "do", "He did go home."),
    ("He went home.", "cannot help but", "He could not help but go home."),
    ("I admire her courage.", "cannot but", "I cannot but admire her courage."),
    ("He walked home.", "must", "He must have walked home."),
    ("He has gone home.", "must", "He must have gone home."),
    ("They were built in 1900.", "have to", "They had to be built in 1900."),
    # The paper's Table 1: the modal is replaced by the affirmative auxiliary.
    ("A shareholder may transfer its Shares.", "have to", "A shareholder has to transfer its Shares."),
    ("The man who lives next door is a doctor.", "ought to", "The man who lives next door ought to be a doctor."),
])
def test_aa_verb_forms(text, auxiliary, expected):
    assert aa(text, auxiliary) == expected


def test_aa_irregular_past_is_not_guessed():
    # "must have" needs the participle of "went" ("gone"), which is not guessed: no change.
    assert aa("He went home.", "must") == "He went home."


@pytest.mark.parametrize("text", ["He does not like apples.", "I can't swim.", "Is she happy?", "Hello",
                                  "Population of the town in 1900."])
def test_aa_leaves_negated_questions_and_verbless_text(text):
    assert aug("sda_affirmative_aux").augment([text], 3) == [text]


def test_aa_seed_picks_one_of_the_papers_auxiliaries():
    outputs = {aug("sda_affirmative_aux").augment(["He likes apples."], seed)[0] for seed in range(100)}
    assert outputs == {"He must like apples.", "He has to like apples.", "He ought to like apples.",
                       "He cannot but like apples.", "He cannot help but like apples."}


def test_aa_emphatic_extras_are_opt_in():
    extras = aug("sda_affirmative_aux", auxiliaries=AFFIRMATIVE_AUXILIARIES)
    outputs = {extras.augment(["He likes apples."], seed)[0] for seed in range(100)}
    assert {"He must like apples.", "He does like apples.", "He definitely likes apples."} <= outputs
    assert set(AFFIRMATIVE_AUXILIARIES) == set(PAPER_AUXILIARIES) | {"do", "definitely", "certainly", "surely"}


@pytest.mark.parametrize("text, expected", [
    # Algorithm 2 takes the first be-verb or verb ROOT in word order, a subordinate clause's be-verb too.
    ("The man who was there left.", "The man who had to be there left."),
    ("When he was young, he walked home.", "When he had to be young, he walked home."),
    ("He said that she was ill.", "He had to say that she was ill."),
    ("The film was released in 2017 and it became a hit.", "The film had to be released in 2017 and it became a hit."),
    # A place that cannot take one (negated, a question) passes to the next in word order.
    ("She is not here, but he was.", "She is not here, but he had to be."),
])
def test_aa_first_be_verb_or_root_in_word_order(text, expected):
    assert aa(text, "have to") == expected


# --------------------------------------------------------------------------- negation
@pytest.mark.parametrize("text, expected", [
    ("He went home.", "He did not go home."),
    ("He likes apples.", "He does not like apples."),
    ("They eat apples.", "They do not eat apples."),
    ("She is happy.", "She is not happy."),
    ("She's happy.", "She's not happy."),
    ("They were built in 1900.", "They were not built in 1900."),
    ("Go home.", "Do not go home."),
    ("He does not like apples.", "He does like apples."),
    ("He doesn't like apples.", "He does like apples."),
    ("I can't swim.", "I can swim."),
    ("He won't come.", "He will come."),
    ("I cannot swim.", "I can swim."),
    ("I do not.", "I do."),
    ("There was no census in 1850.", "There was no census in 1850."),  # not "was not no census"
    ("He saw nothing.", "He saw nothing."),
])
def test_single_negation(text, expected):
    assert single_negation(doc(text)) == expected


@pytest.mark.parametrize("text, expected", [
    # The paper's Table 1 example, with the first word lower-cased after "Not".
    ("A shareholder may transfer its Shares.", "Not a shareholder may not transfer its Shares."),
    ("He does not like apples.", "Not he does like apples."),
    ("He wants to go home.", "He does not want not to go home."),
    ("John has gone home.", "Not John has not gone home."),
    ("The film was released in 2017.", "Not the film was not released in 2017."),
    ("She is not happy.", "Not she is happy."),
    # Every auxiliary counts (Algorithm 3, line 10); "not" goes before a non-finite one.
    ("He confessed to having taken the money.", "He did not confess to not having taken the money."),
    ("Having won the title, they went home.", "Not having won the title, they did not go home."),
    ("To be honest, he left.", "Not to be honest, he did not leave."),
])
def test_double_negation_paper(text, expected):
    assert double_negation_paper(doc(text)) == expected


@pytest.mark.parametrize("text", [
    "He went home.", "Is she happy?", "There was no census in 1850.", "Hello",
    # A copula ROOT is labelled ROOT, not aux: it takes Algorithm 3's ROOT step ("Not") only.
    "She is happy.", "I'm hungry.", "Having won the title, they were happy.",
])
def test_double_negation_paper_unchanged_when_only_one_negation_fits(text):
    assert double_negation_paper(doc(text)) == text


@pytest.mark.parametrize("text, expected", [
    ("He went home.", "It is not true that he did not go home."),
    ("He does not like apples.", "It is not true that he does like apples."),
    ("I can't swim.", "It is not true that I can swim."),
    ("John is tall.", "It is not true that John is not tall."),
    ("The man who lives next door is a doctor.", "It is not true that the man who lives next door is not a doctor."),
])
def test_double_negation_template(text, expected):
    assert double_negation_template(doc(text)) == expected
    assert aug("sda_double_negation", completion="template_only").augment([text], 0) == [expected]


@pytest.mark.parametrize("text, expected", [
    # Only one negation to make: the authors' template completes it (the default).
    ("He went home.", "It is not true that he did not go home."),
    ("She is happy.", "It is not true that she is not happy."),
    ("There was no census in 1850.", "There was no census in 1850."),  # neither can be made
    ("Go home.", "Go home."),  # an imperative cannot follow "that"
    # Two negations: Algorithm 3's, as before.
    ("He does not like apples.", "Not he does like apples."),
    ("He wants to go home.", "He does not want not to go home."),
    ("A shareholder may transfer its Shares.", "Not a shareholder may not transfer its Shares."),
])
def test_double_negation_completes_with_the_template_by_default(text, expected):
    assert aug("sda_double_negation").augment([text], 0) == [expected]
    paper = double_negation_paper(doc(text))
    assert aug("sda_double_negation", completion="none").augment([text], 0) == [paper]


def test_double_negation_template_skips_imperatives():
    assert double_negation_template(doc("Go home.")) == "Go home."


def test_unknown_verbs_are_not_rewritten():
    # A tagger "verb" whose lemma the lemmatizer does not know gets no new verb form.
    text = "He zorbles the ball."
    assert aa(text, "must") == aa(text, "definitely") == single_negation(doc(text)) == text


def test_verb_lemma_from_tables():
    tokens = {t.text: t for t in doc("He went home, bought apples and was hoping she likes them.")}
    assert [verb_lemma(tokens[w]) for w in ("went", "bought", "was", "hoping", "likes")] == \
        ["go", "buy", "be", "hope", "like"]


# --------------------------------------------------------------------------- contract
@pytest.mark.parametrize("name", NAMES)
def test_unchanged_where_no_rule_applies(name):
    batch = ["Hello", "", "   ", "🙂", "\x00\x07", "\n"]
    out, changed = augment_with_flags(aug(name), batch, seed=5)
    assert out == batch and changed == [False] * len(batch)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_and_batch_independent(name):
    batch = ["He went home.", "The man who lives next door is a doctor.", "A shareholder may transfer its Shares.",
             "She is happy.", "He likes apples, but she does not."]
    augmenter = aug(name)
    out = augmenter.augment(batch, 11)
    assert augmenter.augment(batch, 11) == out
    assert augmenter.augment(batch[::-1], 11) == out[::-1]
    assert [augmenter.augment([s], 11)[0] for s in batch] == out
    assert augmenter.augment_docs(batch, parse(batch), 11) == out  # parse once, same result


@pytest.mark.parametrize("name", NAMES)
def test_registered_with_name_and_tag(name):
    augmenter = aug(name)
    assert augmenter.name == name
    assert augmenter.tag in {"meaning-preserving", "possibly-altering", "altering"}


def test_bad_parameters_fail_clearly():
    with pytest.raises(ValueError, match="rule_choice"):
        build_augmenter("sda_punctuation", rule_choice="first")
    with pytest.raises(ValueError, match="completion"):
        build_augmenter("sda_double_negation", completion="sometimes")
    with pytest.raises(ValueError, match="auxiliaries"):
        build_augmenter("sda_affirmative_aux", auxiliaries=["shall"])
    with pytest.raises(ValueError, match="batch_size"):
        build_augmenter("sda_single_negation", batch_size=0)


def test_overlong_input_is_left_alone_and_long_input_works():
    overlong = "the dog ran home . " * 1000  # 19,000 characters > max_chars
    long = " ".join(["The dog ran home, and the cat stayed."] * 40)
    for name in NAMES:
        out = aug(name).augment([overlong, long], 2)
        assert out[0] == overlong and isinstance(out[1], str)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(st.one_of(st.text(max_size=120),
                                st.lists(st.sampled_from(["the", "dog", "is", "not", "ran", "who", ",", ".", "!", '"',
                                                          "n't", "John", "can", "to", "go", "'s"]),
                                         max_size=25).map(" ".join)),
                      min_size=1, max_size=3),
       seed=st.integers(0, 2**31 - 1))
def test_any_text_never_fails(batch, seed):
    for name in NAMES:
        out = aug(name).augment(batch, seed)
        assert len(out) == len(batch) and all(isinstance(o, str) for o in out)
        for before, after in zip(batch, out, strict=True):
            if not before.strip():
                assert after == before


# --------------------------------------------------------------------------- worker pool
def _varied_sentences(count: int = 50) -> list[str]:
    """Generated sentences that between them trigger every rule, plus a duplicate, a blank line
    and an overlong line (left alone), so chunk boundaries fall between different kinds of input."""
    subjects = ["The old man", "She", "The committee", "John and Mary", "It", "The river"]
    predicates = ["reads a book", "was not happy", "has lived in Paris since 1990", "can't swim",
                  "went home, which surprised everyone", "is considered a major work",
                  "did not attend the meeting", "will be released next year"]
    sentences = [f"{subjects[i % len(subjects)]} {predicates[(i * 3) % len(predicates)]}{'.!'[i % 7 == 0]}"
                 for i in range(count - 3)]
    return sentences + [sentences[0], "   ", "the dog ran home . " * 1000]


@pytest.mark.parametrize("name", NAMES)
def test_worker_pool_gives_the_same_output_as_one_process(name):
    sentences = _varied_sentences()
    augmenter = build_augmenter(name, processes=2, chunk_size=16)  # 50 sentences -> 4 chunks over 2 workers
    try:
        for seed in (0, 7):
            expected = aug(name).augment(sentences, seed)
            assert sum(a != b for a, b in zip(sentences, expected, strict=True)) >= 10  # the comparison means something
            assert augmenter.augment(sentences, seed) == expected
        assert augmenter._pool is not None  # the pool really ran (batch > chunk_size)
    finally:
        augmenter.close()
    assert augmenter._pool is None


def test_worker_pool_is_reused_and_restarts_after_close():
    sentences = _varied_sentences()
    augmenter = build_augmenter("sda_punctuation", processes=2, chunk_size=10)
    try:
        first = augmenter.augment(sentences, 1)
        pool = augmenter._pool
        assert augmenter.augment(sentences, 1) == first and augmenter._pool is pool
        augmenter.close()
        assert augmenter.augment(sentences, 1) == first and augmenter._pool is not None
    finally:
        augmenter.close()


def test_pickling_drops_the_pool_and_keeps_the_settings():
    sentences = _varied_sentences()
    augmenter = build_augmenter("sda_double_negation", completion="template", processes=2, chunk_size=16)
    try:
        expected = augmenter.augment(sentences, 3)  # starts the pool before pickling
        clone = pickle.loads(pickle.dumps(augmenter))
        assert clone._pool is None and augmenter._pool is not None
        assert (clone.processes, clone.chunk_size, clone.completion) == (2, 16, "template")
        assert clone.augment(sentences, 3) == expected  # the clone starts its own pool
        clone.close()
        assert augmenter.augment(sentences, 3) == expected  # the original's pool still works
    finally:
        augmenter.close()


def test_processes_parameter_is_checked():
    assert build_augmenter("sda_punctuation", processes="auto").processes == (os.cpu_count() or 1)
    assert build_augmenter("sda_punctuation", processes=0).processes == (os.cpu_count() or 1)
    for bad in (-1, 1.5, "two", True):
        with pytest.raises(ValueError, match="processes"):
            build_augmenter("sda_punctuation", processes=bad)
    with pytest.raises(ValueError, match="not both"):
        build_augmenter("sda_punctuation", processes=2, n_process=2)
    with pytest.raises(ValueError, match="chunk_size"):
        build_augmenter("sda_punctuation", chunk_size=0)


def test_daemonic_process_works_in_process_with_a_warning(monkeypatch):
    # DataLoader workers are daemonic, and daemonic processes may not start a pool.
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)
    sentences = _varied_sentences()
    augmenter = build_augmenter("sda_single_negation", processes=2, chunk_size=16)
    with pytest.warns(RuntimeWarning, match="daemonic"):
        out = augmenter.augment(sentences, 0)
    assert out == aug("sda_single_negation").augment(sentences, 0)
    assert augmenter._pool is None and augmenter.processes == 1


# --------------------------------------------------------------------------- on real text
def test_corpus_sample(shared_data):
    lines = (shared_data / "corpus" / "wiki1m-first-11913.txt").read_text(encoding="utf-8").splitlines()[:150]
    docs = parse(lines)
    for name in NAMES:
        out = aug(name).augment_docs(lines, docs, 0)
        assert any(a != b for a, b in zip(lines, out, strict=True)), name
        assert any(a == b for a, b in zip(lines, out, strict=True)) or name == "sda_single_negation"
    for before, after in zip(lines, aug("sda_punctuation").augment_docs(lines, docs, 0), strict=True):
        assert _only_insertions(before, after), (before, after)
    assert set(PUNCTUATION_RULES) == {"subordinate_clause", "noun_subject", "duplicate_inner", "final_exclamation"}
