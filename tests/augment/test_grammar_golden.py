"""Golden outputs of every SDA and AugCSE grammar rule on a fixed set of varied sentences.

The rules of ``augment/sda.py``, ``augment/augcse.py`` and ``augment/augcse_rules.py`` share one
English grammar (``augment/grammar.py``: rendering an edited parse, subject-verb agreement,
negation removal, the contraction and pronoun tables). Any change to it reaches both families at
once; this test shows what it changes, sentence by sentence, in every augmenter built on it.

The golden file ``golden_grammar.json`` was recorded with the code before the grammar was merged
(two copies). Re-recorded since, on purpose: ``sda_affirmative_aux`` (all its variants: the paper's
auxiliaries by default and its place, the first be-verb or verb ROOT in word order; issue 38 item
3) and ``sda_double_negation`` with its default completion (the authors' template where Algorithm 3
makes fewer than two negations; issue 38 item 4; ``none`` and ``template_only`` are the earlier
default and the earlier ``template``, their outputs as recorded); ``random_word_augmentation`` and
``random_swap`` (nlpaug's own RandomWordAug by default, issue 38 item 7: the outputs recorded before
are those of ``rule: cselab``, kept under the labels "... cselab") and ``city_names_transformation``
(spaCy's NER and GeoNames' city lists, issue 38 item 7). Re-record only on purpose, with the reason
in the commit message:

    python -m tests.augment.test_grammar_golden     # rewrites tests/augment/golden_grammar.json
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("spacy")

from cselab.augment import build_augmenter, load_all  # noqa: E402
from cselab.augment.base import AugmenterUnavailable  # noqa: E402

GOLDEN = Path(__file__).with_name("golden_grammar.json")

#: Varied on purpose: negations of every form, contractions (straight and curly apostrophes),
#: pronouns in every case, each tense, passives, modals, questions, imperatives, relative and
#: leading subordinate clauses, coordination, several sentences, numbers, colours, cities,
#: gendered words, discourse markers, casual words, odd spacing.
SENTENCES = [
    "The happy young man quickly bought a new car, but he did not drive it to the old city.",
    "She is happy.",
    "She's not happy, and they aren't either.",
    "He doesn't like apples.",
    "I can't swim, but I won't give up.",
    "We cannot accept this offer.",
    "They have gone home.",
    "He has a red car and she has two blue bikes.",
    "I am tired because I worked all day.",
    "The committee will meet in Paris next week.",
    "You'll never guess what I've found!",
    "The film was released in 2017 and it became a hit.",
    "Is she coming to the party tonight?",
    "Go home and close the door.",
    "The man who lives next door is a doctor.",
    "When I came home, the dog was asleep.",
    "Although it rained we went out.",
    "John and Mary were not invited to the wedding.",
    "The cat chased the dog.",
    "He saw her at the station and she gave him a book.",
    "They told us that we would win.",
    "I haven't seen my father since 1999.",
    "The king and his sons rode to London.",
    "It’s late and I’m tired.",
    "However, the project isn't finished yet.",
    "Therefore, the results were not significant.",
    "The kids are gonna love this awesome tv show.",
    "The sun rose early. Birds began to sing. We walked to the lake.",
    "There was no census in 1850, but 3,000 people lived there.",
    "A shareholder may transfer its Shares only with the prior written consent of the Company.",
    "He confessed to having taken the money.",
    "Having won the title, they went home.",
    "She should've told him the truth.",
    "My brother didn't attend the meeting, did he?",
    "The old woman walks her dog every morning.",
    "You still have much to learn.",
    "Scientists discovered that the ancient city was built by skilled workers.",
    "The results are good, and the long report is ready.",
    "  Two  spaces,\tand a tab; the tall actress wasn't   there  .  ",
    "He won the 21st prize with 5% of the votes in New York.",
    "I don't think it's true that she can't drive.",
    "Nobody knows where the green house is.",
    # Where the two grammars read a sentence differently: a coordinated subject led by "me", a
    # plural determiner as subject, a relative clause's subject, an all-capitals contraction, a
    # contracted "has" before a participle.
    "Me and him were late for the show.",
    "These may help us.",
    "The men who may come will help.",
    "I CAN'T GO HOME.",
    "He's taken the money.",
    "She's got a new job.",
]

RANDOM_SEEDS = (0, 1, 2)
#: (label, registered name, parameters, seeds): every SDA and AugCSE augmenter whose rules read or
#: write English grammar, with each mode; rules with no randomness run with one seed.
VARIANTS = [
    ("sda_punctuation", "sda_punctuation", {}, RANDOM_SEEDS),
    ("sda_punctuation ordered", "sda_punctuation", {"rule_choice": "ordered"}, RANDOM_SEEDS),
    ("sda_affirmative_aux", "sda_affirmative_aux", {}, RANDOM_SEEDS),
    *[(f"sda_affirmative_aux {a}", "sda_affirmative_aux", {"auxiliaries": [a]}, (0,))
      for a in ("must", "have to", "ought to", "cannot but", "cannot help but", "do", "definitely", "certainly",
                "surely")],
    ("sda_double_negation", "sda_double_negation", {}, (0,)),
    ("sda_double_negation none", "sda_double_negation", {"completion": "none"}, (0,)),
    ("sda_double_negation template_only", "sda_double_negation", {"completion": "template_only"}, (0,)),
    ("sda_single_negation", "sda_single_negation", {}, (0,)),
    ("adjective_antonym_switch", "adjective_antonym_switch", {}, RANDOM_SEEDS),
    ("auxiliary_negation_removal", "auxiliary_negation_removal", {}, (0,)),
    ("subject_object_switch", "subject_object_switch", {}, (0,)),
    ("sentence_reordering", "sentence_reordering", {}, RANDOM_SEEDS),
    ("tense_transformation", "tense_transformation", {}, RANDOM_SEEDS),
    *[(f"tense_transformation {d}", "tense_transformation", {"direction": d}, (0,))
      for d in ("to_past", "to_present", "to_future")],
    ("yoda", "yoda", {}, (0,)),
    ("contraction", "contraction", {}, (0,)),
    ("contraction p=0.5", "contraction", {"p": 0.5}, RANDOM_SEEDS),
    ("discourse_marker_substitution", "discourse_marker_substitution", {}, RANDOM_SEEDS),
    ("gender_swap", "gender_swap", {}, (0,)),
    ("number_to_word", "number_to_word", {}, (0,)),
    ("city_names_transformation", "city_names_transformation", {}, RANDOM_SEEDS),
    ("color_transformation", "color_transformation", {}, RANDOM_SEEDS),
    ("random_word_augmentation", "random_word_augmentation", {}, RANDOM_SEEDS),
    ("random_word_augmentation cselab", "random_word_augmentation", {"rule": "cselab"}, RANDOM_SEEDS),
    ("random_swap", "random_swap", {}, RANDOM_SEEDS),
    ("random_swap cselab", "random_swap", {"rule": "cselab"}, RANDOM_SEEDS),
    ("casual2formal", "casual2formal", {}, (0,)),
]

# Where SDA's and AugCSE's copies of the grammar disagreed, the merged grammar keeps the copy that was
# right, and the other family's outputs change (each case named, with its output now). SDA's own such
# cases ("She's got" is "has got"; "These have to") are in tests/augment/test_grammar.py: the
# affirmative auxiliary's outputs were re-recorded since (see below).
_ME_AND_HIM = "a coordinated subject is plural whatever its first word (SDA's order; AugCSE's said \"Me and him am\")"
_CURLY = "curly \"’s\"/\"’m\" are forms of be (SDA's table; AugCSE's lemmatizer gave \"It’’ed\", \"I’mmed\")"
_CASES = [
    ("tense_transformation", "Me and him were late for the show.", 1, "Me and him are late for the show.", _ME_AND_HIM),
    ("tense_transformation", "Me and him were late for the show.", 2, "Me and him are late for the show.", _ME_AND_HIM),
    ("tense_transformation to_present", "Me and him were late for the show.", 0, "Me and him are late for the show.",
     _ME_AND_HIM),
    ("tense_transformation", "It’s late and I’m tired.", 0, "It was late and I was tired.", _CURLY),
    ("tense_transformation", "It’s late and I’m tired.", 1, "It was late and I was tired.", _CURLY),
    ("tense_transformation", "It’s late and I’m tired.", 2, "It’ll be late and I’ll be tired.", _CURLY),
    ("tense_transformation to_past", "It’s late and I’m tired.", 0, "It was late and I was tired.", _CURLY),
    ("tense_transformation to_future", "It’s late and I’m tired.", 0, "It’ll be late and I’ll be tired.", _CURLY),
]
#: Outputs that changed on purpose since the golden file was recorded: (label, sentence, seed) ->
#: the output now (None: unchanged sentence). The reason of each is in ``_CASES``.
CHANGED_ON_PURPOSE: dict[tuple[str, str, int], str | None] = {
    (label, sentence, seed): output for label, sentence, seed, output, _reason in _CASES}


def outputs() -> dict[str, dict]:
    """Every variant's outputs: None where the sentence comes back unchanged."""
    load_all()
    result = {}
    for label, name, params, seeds in VARIANTS:
        augmenter = build_augmenter(name, **params)
        per_seed = [augmenter.augment(SENTENCES, seed) for seed in seeds]
        result[label] = {"seeds": list(seeds),
                         "outputs": [[None if out == sentence else out for out in per_seed_out]
                                     for sentence, per_seed_out in zip(SENTENCES, zip(*per_seed, strict=True),
                                                                       strict=True)]}
    return result


@pytest.fixture(scope="module")
def current() -> dict[str, dict]:
    try:
        return outputs()
    except AugmenterUnavailable as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"an augmenter's dependency is missing: {exc}")


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_golden_file_covers_these_sentences_and_variants(golden):
    assert golden["sentences"] == SENTENCES
    assert list(golden["variants"]) == [label for label, *_ in VARIANTS]


@pytest.mark.parametrize("label", [label for label, *_ in VARIANTS])
def test_every_output_is_the_recorded_one(label, current, golden):
    recorded = golden["variants"][label]
    now = current[label]
    assert now["seeds"] == recorded["seeds"]
    differences = []
    for sentence, before, after in zip(SENTENCES, recorded["outputs"], now["outputs"], strict=True):
        for seed, old, new in zip(now["seeds"], before, after, strict=True):
            key = (label, sentence, seed)
            expected = CHANGED_ON_PURPOSE[key] if key in CHANGED_ON_PURPOSE else old
            if new != expected:
                differences.append(f"seed {seed}: {sentence!r}\n  recorded {expected!r}\n  now      {new!r}")
    assert not differences, f"{label}: {len(differences)} outputs changed\n" + "\n".join(differences)


def test_each_change_on_purpose_differs_from_the_recording(golden):
    """A listed change is a real one: the recorded output was another."""
    for label, sentence, seed, output, _reason in _CASES:
        recorded = golden["variants"][label]
        old = recorded["outputs"][SENTENCES.index(sentence)][recorded["seeds"].index(seed)]
        assert old != output, (label, sentence, seed)


def test_the_golden_outputs_exercise_the_rules(golden):
    """Not vacuous: most variants change most of these sentences somewhere."""
    changed = {label: sum(any(o is not None for o in outs) for outs in info["outputs"])
               for label, info in golden["variants"].items()}
    assert sum(changed.values()) > 500
    assert all(count >= 1 for count in changed.values()), changed


def record() -> None:
    data = {"sentences": SENTENCES, "variants": outputs()}
    GOLDEN.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    record()
