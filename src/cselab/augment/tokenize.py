"""A fast word tokenizer and detokenizer shared by the rule-based augmenters.

Tokens are words (letters/digits/underscore, keeping inner apostrophes, hyphens and dots, so
"don't", "state-of-the-art", "3.5" and "U.S" stay whole), runs of other non-space characters
(punctuation, emoji, symbols), and bracketed placeholder tokens such as ``[DEL]`` or ``[MASK]``.
Detokenizing joins with spaces, then glues closing punctuation to the word before it and
opening brackets to the word after, so ``detokenize(tokenize(s))`` equals ``s`` for ordinary
single-spaced prose. Both are one precompiled regular expression each: no per-call objects.
"""
from __future__ import annotations

import re

_TOKEN = re.compile(r"\[[A-Z]{2,10}\]|\w+(?:['’\-.]\w+)*|[^\w\s]+")
_WORD = re.compile(r"[^\W\d_]")  # a token with at least one letter
# No space before closing punctuation; no space after opening brackets or currency signs.
_GLUE = re.compile(r" (?=[.,;:!?%)\]}…»])|(?<=[(\[{«$£€]) ")

_QUOTED = re.compile(r'" ([^"]*?) "')


def tokenize(text: str) -> list[str]:
    """Words, punctuation runs and ``[PLACEHOLDER]`` tokens; whitespace is dropped."""
    return _TOKEN.findall(text)


def detokenize(tokens: list[str]) -> str:
    """Join tokens with single spaces, gluing punctuation the way English prose writes it."""
    text = _GLUE.sub("", " ".join(tokens))
    if '"' in text:  # straight quotes alternate: the 1st opens, the 2nd closes, and so on
        text = _QUOTED.sub(r'"\1"', text)
    return text


def is_word(token: str) -> bool:
    """True for tokens with a letter (candidates for synonym lookup); False for punctuation/numbers."""
    return _WORD.search(token) is not None


def match_case(replacement: str, original: str) -> str:
    """Give ``replacement`` the capitalisation pattern of ``original`` (Title, UPPER or as is)."""
    if original.isupper() and len(original) > 1:
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement
