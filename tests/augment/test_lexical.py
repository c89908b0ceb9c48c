"""CLEAR, EDA, crop and repetition rules: the paper's counts, placeholders and determinism."""
from collections import Counter

import pytest

from cselab.augment import build_augmenter
from cselab.augment.tokenize import tokenize

LONG = " ".join(f"w{i}" for i in range(40)) + "."  # 41 distinct tokens


def test_clear_word_deletion_deletes_70_percent_and_collapses_placeholders():
    out = build_augmenter("clear_word_deletion").augment([LONG], seed=3)[0]
    tokens = tokenize(out)
    kept = [t for t in tokens if t != "[DEL]"]
    assert len(kept) == 41 - round(0.7 * 41)
    assert all(not (a == b == "[DEL]") for a, b in zip(tokens, tokens[1:], strict=False))  # runs merged
    assert "[DEL]" in tokens
    # kept tokens keep their order
    original = tokenize(LONG)
    assert [original.index(t) for t in kept] == sorted(original.index(t) for t in kept)


def test_clear_word_deletion_placeholder_options():
    removed = build_augmenter("clear_word_deletion", placeholder=None).augment([LONG], seed=3)[0]
    assert "[DEL]" not in removed and len(tokenize(removed)) == 41 - round(0.7 * 41)
    masked = build_augmenter("clear_word_deletion", placeholder="<del>", collapse=False).augment([LONG], seed=3)[0]
    assert len(tokenize(masked.replace("<del>", " X "))) == 41  # one placeholder per deleted token


def test_clear_span_deletion_deletes_spans_of_5_percent():
    text = " ".join(f"w{i}" for i in range(100))
    out = build_augmenter("clear_span_deletion", placeholder=None).augment([text], seed=1)[0]
    kept = tokenize(out)
    assert 100 - 25 <= len(kept) < 100  # 5 spans of 5 tokens, which may overlap
    gaps = sum(1 for a, b in zip(kept, kept[1:], strict=False) if int(b[1:]) != int(a[1:]) + 1)
    assert gaps + (kept[0] != "w0") + (kept[-1] != "w99") <= 5


def test_clear_reorder_swaps_spans_keeping_every_token():
    text = " ".join(f"w{i}" for i in range(100))
    out = build_augmenter("clear_reorder").augment([text], seed=2)[0]
    assert Counter(tokenize(out)) == Counter(tokenize(text)) and out != text
    moved = sum(1 for i, t in enumerate(tokenize(out)) if t != f"w{i}")
    assert 0 < moved <= 10 * 5  # 5 pairs of 5-token spans


def test_eda_random_swap_and_deletion_and_crop():
    swap = build_augmenter("eda_random_swap").augment([LONG], seed=0)[0]
    assert Counter(tokenize(swap)) == Counter(tokenize(LONG)) and swap != LONG
    deletion = build_augmenter("eda_random_deletion", p=0.5).augment([LONG], seed=0)[0]
    assert 0 < len(tokenize(deletion)) < 41
    assert len(tokenize(build_augmenter("eda_random_deletion", p=1.0).augment([LONG], seed=0)[0])) == 1
    crop = tokenize(build_augmenter("random_crop", ratio=0.25).augment([LONG], seed=0)[0])
    assert len(crop) == 41 - 10
    original = tokenize(LONG)
    start = next(i for i, (a, b) in enumerate(zip(original, crop + [None], strict=False)) if a != b)
    assert crop == original[:start] + original[start + 10:]  # one contiguous span


def test_word_repetition_duplicates_tokens_in_place():
    aug = build_augmenter("word_repetition")
    words = LONG[:-1]  # no final '.': a doubled '.' would glue into one '..' token
    outs = aug.augment([f"{words} x{i}" for i in range(30)], seed=0)
    changed = [o for o, i in zip(outs, range(30), strict=True) if o != f"{words} x{i}"]
    assert changed
    for out in changed:
        tokens = tokenize(out)
        deduped = [t for k, t in enumerate(tokens) if k == 0 or t != tokens[k - 1]]
        assert deduped == tokenize(words) + [deduped[-1]]
        assert len(tokens) - len(deduped) <= max(2, int(0.32 * 41))


@pytest.mark.parametrize("name", ["clear_word_deletion", "clear_span_deletion", "clear_reorder", "eda_random_swap",
                                  "eda_random_deletion", "random_crop", "word_repetition"])
def test_deterministic_and_independent_of_batch(name, sample_sentences):
    SENTENCES = sample_sentences
    aug = build_augmenter(name)
    alone = [aug.augment([s], seed=7)[0] for s in SENTENCES]
    assert aug.augment(SENTENCES, seed=7) == alone
    assert aug.augment(list(reversed(SENTENCES)), seed=7) == list(reversed(alone))
    assert aug.augment(SENTENCES, seed=8) != alone or name == "word_repetition"
    assert aug.augment(["", "   "], seed=1) == ["", "   "]


def test_single_token_is_left_alone_by_deletions():
    for name in ["clear_word_deletion", "clear_span_deletion", "clear_reorder", "eda_random_deletion", "random_crop"]:
        assert build_augmenter(name).augment(["Hello"], seed=0) == ["Hello"]


def test_bad_parameters_give_clear_errors():
    with pytest.raises(ValueError, match="clear_word_deletion: ratio"):
        build_augmenter("clear_word_deletion", ratio=1.5)
    with pytest.raises(ValueError, match="clear_span_deletion: spans"):
        build_augmenter("clear_span_deletion", spans=0)


def test_wordnet_rules(wordnet_ready):
    sentence = "The happy child bought a new car and a large house."
    subs = build_augmenter("clear_synonym_substitution").augment([sentence], seed=0)[0]
    assert subs != sentence and len(tokenize(subs)) >= len(tokenize(sentence))
    eda = build_augmenter("eda_synonym_replacement").augment([sentence], seed=0)[0]
    assert eda != sentence
    inserted = build_augmenter("eda_random_insertion").augment([sentence], seed=0)[0]
    assert len(tokenize(inserted)) > len(tokenize(sentence))
    assert build_augmenter("eda_random_insertion").augment(["of the and"], seed=0) == ["of the and"]
