"""A synthetic Zipfian corpus and a UNA augmenter fitted on it (generated data only)."""
from __future__ import annotations

import random

import pytest


def zipf_corpus(num_sentences: int, vocab_size: int = 600, seed: int = 0) -> list[str]:
    """Sentences of 3-18 words drawn from a Zipf(1.1) vocabulary, with some punctuation and capitals."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    seen = set()
    while len(words) < vocab_size:
        word = "".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    weights = [1 / (k + 1) ** 1.1 for k in range(vocab_size)]
    sentences = []
    for _ in range(num_sentences):
        tokens = rng.choices(words, weights, k=rng.randint(3, 18))
        tokens[0] = tokens[0].capitalize()
        if rng.random() < 0.3:
            tokens.insert(rng.randrange(1, len(tokens) + 1), ",")
        sentences.append(" ".join(tokens).replace(" ,", ",") + rng.choice([".", ".", "!", "?"]))
    return sentences


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    return zipf_corpus(2000)


@pytest.fixture(scope="session")
def fitted(corpus):
    from cselab.augment import build_augmenter

    return build_augmenter("una", p=0.5, radius=40).fit(corpus)
