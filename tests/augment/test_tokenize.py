from hypothesis import given
from hypothesis import strategies as st

from cselab.augment.tokenize import detokenize, is_word, match_case, tokenize


def test_words_punctuation_and_placeholders_are_tokens():
    assert tokenize("Hello, world! It's state-of-the-art (3.5%) [DEL] ok.") == [
        "Hello", ",", "world", "!", "It's", "state-of-the-art", "(", "3.5", "%)", "[DEL]", "ok", "."]


def test_detokenize_glues_punctuation_like_prose():
    for text in ["Hello, world! (This is) a test.", 'He said "no" -- it costs $3.5 today.', "a [DEL] b [DEL].",
                 "Wait... what?!"]:
        assert detokenize(tokenize(text)) == text


def test_detokenize_after_reordering_still_readable():
    assert detokenize(["dog", ",", "the", "(", "cat", ")", "."]) == "dog, the (cat)."


@given(st.text())
def test_tokenize_drops_only_whitespace(text):
    tokens = tokenize(text)
    assert "".join(tokens) == "".join(text.split())
    assert all(t and not any(c.isspace() for c in t) for t in tokens)


def test_is_word_and_match_case():
    assert is_word("dog") and is_word("état") and not is_word(",") and not is_word("42")
    assert match_case("automobile", "Car") == "Automobile"
    assert match_case("automobile", "CAR") == "AUTOMOBILE"
    assert match_case("automobile", "car") == "automobile"
