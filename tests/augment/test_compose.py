"""sequence / one_of / with_probability, built the way a recipe's YAML params give them."""
import pytest
import yaml

from cselab.augment import build_augmenter
from cselab.augment.base import derive_seed

TEXTS = [f"sentence number {i} has several words in it today ." for i in range(40)]


def test_sequence_applies_steps_in_order_with_derived_seeds():
    params = yaml.safe_load("steps: [{name: word_repetition}, {name: clear_word_deletion, placeholder: '<d>'}]")
    seq = build_augmenter("sequence", **params)
    expected = build_augmenter("word_repetition").augment(TEXTS, derive_seed(5, 0))
    expected = build_augmenter("clear_word_deletion", placeholder="<d>").augment(expected, derive_seed(5, 1))
    assert seq.augment(TEXTS, 5) == expected
    assert seq.tag == "altering"  # the most altering step


def test_one_of_picks_per_sentence_and_respects_weights():
    one = build_augmenter("one_of", choices=[{"name": "random_crop"}, "eda_random_swap"], weights=[0, 1])
    assert one.augment(TEXTS, 1) == build_augmenter("eda_random_swap").augment(TEXTS, derive_seed(1, 1))
    mixed = build_augmenter("one_of", choices=["random_crop", "word_repetition"])
    picks = mixed.choose(TEXTS, 3)
    assert set(picks) == {0, 1}
    assert mixed.augment(TEXTS[:7], 3) + mixed.augment(TEXTS[7:], 3) == mixed.augment(TEXTS, 3)


def test_with_probability_gates_sentences():
    never = build_augmenter("with_probability", p=0.0, augmenter={"name": "eda_random_swap"})
    assert never.augment(TEXTS, 0) == TEXTS
    always = build_augmenter("with_probability", p=1.0, augmenter={"name": "eda_random_swap"})
    assert always.augment(TEXTS, 0) == build_augmenter("eda_random_swap").augment(TEXTS, derive_seed(0, 0))
    half = build_augmenter("with_probability", p=0.5, augmenter={"name": "eda_random_swap"}).augment(TEXTS, 0)
    assert 5 < sum(a != b for a, b in zip(half, TEXTS, strict=True)) < 35


@pytest.mark.parametrize("name, params, message", [
    ("sequence", {"steps": []}, "non-empty list"),
    ("sequence", {"steps": [{"ratio": 0.5}]}, r"sequence.steps\[0\]: expected"),
    ("sequence", {"steps": [{"name": "random_crop", "bogus": 1}]}, r"sequence.steps\[0\]: bad parameters"),
    ("one_of", {"choices": ["random_crop"], "weights": [1, 2]}, "weights"),
    ("with_probability", {"p": 2, "augmenter": "random_crop"}, "'p' must be in"),
])
def test_bad_specs_name_the_key(name, params, message):
    with pytest.raises(ValueError, match=message):
        build_augmenter(name, **params)


def test_unknown_nested_name_lists_known_ones():
    with pytest.raises(KeyError, match="unknown augmenter 'nope'"):
        build_augmenter("sequence", steps=[{"name": "nope"}])


def test_a_cached_augmenters_fallback_declares_its_placeholder_tokens(tmp_path):
    """special_tokens walks every composition's parts: a `cached` with a CLEAR fallback writes [DEL] for
    the sentences its file lacks, so the tokenizer must keep [DEL] whole there too."""
    import warnings

    from cselab.augment import build_augmenter
    from cselab.augment.base import special_tokens

    empty = tmp_path / "aug.jsonl"
    empty.write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no cached augmentations": the fallback does all the work here
        cached = build_augmenter("cached", path=str(empty), augmenter="clear_word_deletion")
    assert special_tokens(cached) == ("[DEL]",)
    assert special_tokens(build_augmenter("sequence", steps=["eda_random_swap", "clear_word_deletion"])) == ("[DEL]",)
