"""AugCSE's rule-based augmenters on arbitrary input (hypothesis, few examples: spaCy is slow)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cselab.augment import build_augmenter, load_all
from cselab.augment.augcse import MAX_PARSE_CHARS

load_all()

RULES = ["adjective_antonym_switch", "auxiliary_negation_removal", "subject_object_switch", "contraction",
         "discourse_marker_substitution", "gender_swap", "number_to_word", "yoda", "sentence_reordering",
         "tense_transformation"]

# Any Unicode (surrogates excluded: they cannot be UTF-8 encoded), with control characters and
# words that trigger the rules mixed in so the rewriting paths run on odd text too.
TRIGGERS = ["He", "her", "his", "not", "don't", "do not", "It is", "However,", "3", "21st", "1850", "good",
            "walked", "chased", "the dog", ".", "!", "\x00", "\t", "\n", "\u200b", "😀", "ß", "İ", "’"]
text = st.lists(st.one_of(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
                          st.sampled_from(TRIGGERS)), max_size=12).map(" ".join)

_built: dict[str, object] = {}


def get(name: str):
    if name not in _built:
        _built[name] = build_augmenter(name)
    return _built[name]


@pytest.mark.parametrize("name", RULES)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(text, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_any_text(name, batch, seed):
    augmenter = get(name)
    out = augmenter.augment(batch, seed)
    assert isinstance(out, list) and len(out) == len(batch) and all(isinstance(s, str) for s in out)
    assert out == augmenter.augment(batch, seed)
    for original, augmented in zip(batch, out, strict=True):
        if not original.strip():
            assert augmented == original
        if augmented != original:
            assert augmented.strip(), "a rule must never blank out a sentence"


@pytest.mark.parametrize("name", RULES)
def test_whitespace_control_and_long_inputs(name):
    augmenter = get(name)
    long_text = "He did not walk to the 3 old houses. " * (MAX_PARSE_CHARS // 30)
    batch = ["", " ", "\t\n", "\x00\x01\x7f", "\u2028", long_text]
    out = augmenter.augment(batch, seed=0)
    assert out[:5] == batch[:5]
    assert isinstance(out[5], str) and out[5].strip()
