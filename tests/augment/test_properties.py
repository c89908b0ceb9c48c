"""Property tests over every registered augmenter that is cheap enough (hypothesis).

Any Unicode string (control characters, emoji, non-Latin scripts), empty and whitespace-only
strings, single tokens and a 10,000-token string: no exception, one string out per string in,
the same output for the same seed whatever else is in the batch, and blank input unchanged.
Augmenters whose optional dependency is missing are skipped; neural ones (translation,
paraphrase) are skipped as too slow; spaCy-parsing ones run with fewer examples.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cselab.augment import AUGMENTERS, build_augmenter, load_all
from cselab.augment.base import AugmenterUnavailable

load_all()

NEURAL_MODULES = ("cselab.augment.translate", "cselab.augment.paraphrase")
PARSE_MODULES = ("cselab.augment.sda", "cselab.augment.augcse")
FIT_CORPUS = [f"the {a} {b} likes a {c} in the garden" for a in ("old", "young", "tall") for b in ("man", "dog", "cat")
              for c in ("ball", "song", "book")]


def cost(name: str) -> str:
    factory = AUGMENTERS.get(name)
    declared = getattr(factory, "cost", None)
    if declared:
        return declared
    module = getattr(factory, "__module__", "")
    return "neural" if module in NEURAL_MODULES else "parse" if module in PARSE_MODULES else "cheap"


def special_params(name: str, tmp_dir) -> dict:
    if name == "sequence":
        return {"steps": [{"name": "random_crop"}, {"name": "word_repetition"}]}
    if name == "one_of":
        return {"choices": ["random_crop", {"name": "eda_random_swap"}], "weights": [1, 2]}
    if name == "with_probability":
        return {"p": 0.5, "augmenter": {"name": "random_crop"}}
    if name == "cached":
        path = tmp_dir / "cache.jsonl"
        record = {"original": "a b c", "augmented": "a c", "augmentation": "x", "changed": True}
        path.write_text(json.dumps(record) + "\n")
        return {"path": str(path), "augmenter": {"name": "eda_random_swap"}}
    return {}


_built: dict[str, object] = {}


@pytest.fixture
def augmenter(request, tmp_path_factory):
    name = request.param
    if cost(name) == "neural":
        pytest.skip(f"{name}: neural augmenter, too slow for property tests")
    if name not in _built:
        try:
            aug = build_augmenter(name, **special_params(name, tmp_path_factory.mktemp(name)))
        except (AugmenterUnavailable, ImportError, OSError) as exc:
            pytest.skip(f"{name}: optional dependency missing ({exc})")
        except TypeError as exc:
            pytest.skip(f"{name}: needs parameters this test does not know ({exc})")
        if callable(getattr(aug, "fit", None)):
            aug.fit(FIT_CORPUS)
        _built[name] = aug
    return _built[name]


NAMES = AUGMENTERS.names()

texts = st.one_of(
    st.text(max_size=200),  # any Unicode, incl. control characters and emoji
    st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", max_size=10),  # whitespace only
    st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=12),  # a single token
    st.sampled_from(["Der schnelle braune Fuchs springt über den faulen Hund.", "東京は日本の首都です。",
                     "Москва — столица России.", "مرحبا بالعالم", "I ❤️ NLP 🤖🤖 !!", "a\x00b\x07c \x1b[31mred",
                     "The cat sat on the mat.", "He didn't go, but she will not stay either.", "[DEL] [MASK]"]),
    st.lists(st.sampled_from(["the", "dog", "ran", "quickly", "happy", "car", ",", ".", "not", "is", "John", "3"]),
             min_size=1, max_size=40).map(" ".join),
)


def check(aug, batch: list[str], seed: int) -> None:
    out = aug.augment(batch, seed)
    assert isinstance(out, list) and len(out) == len(batch)
    assert all(isinstance(o, str) for o in out)
    assert aug.augment(batch, seed) == out  # deterministic
    for text, result in zip(batch, out, strict=True):
        if not text.strip():
            assert result == text, "blank input must come back unchanged"
    # Same (seed, sentence) -> same output, whatever the rest of the batch.
    assert aug.augment(batch[:1], seed) == out[:1]
    assert aug.augment(list(reversed(batch)), seed) == list(reversed(out))


@pytest.mark.parametrize("augmenter", [n for n in NAMES if cost(n) == "cheap"], indirect=True)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_cheap_augmenters_never_fail(augmenter, batch, seed):
    check(augmenter, batch, seed)


@pytest.mark.parametrize("augmenter", [n for n in NAMES if cost(n) == "parse"], indirect=True)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(texts, min_size=1, max_size=2), seed=st.integers(0, 2**31 - 1))
def test_parsing_augmenters_never_fail(augmenter, batch, seed):
    check(augmenter, batch, seed)


@pytest.mark.parametrize("augmenter", [n for n in NAMES if cost(n) == "cheap"], indirect=True)
def test_ten_thousand_tokens(augmenter):
    words = ["alpha", "happy", "car", "runs", ",", "quickly", "the", "house", "."]
    text = " ".join(words[i % len(words)] for i in range(10_000))
    out = augmenter.augment([text, "", "One"], seed=1)
    assert len(out) == 3 and isinstance(out[0], str) and out[1] == ""
    assert augmenter.augment([text], seed=1)[0] == out[0]
