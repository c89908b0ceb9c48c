"""A fast word tokenizer and detokenizer shared by the rule-based augmenters.

Tokens are words (letters/digits/underscore, keeping inner apostrophes, hyphens and dots, so
"don't", "state-of-the-art", "3.5" and "U.S" stay whole), runs of other non-space characters
(punctuation, emoji, symbols), and bracketed placeholder tokens such as ``[DEL]`` or ``[MASK]``.
Detokenizing joins with spaces, then glues closing punctuation to the word before it and
opening brackets to the word after, so ``detokenize(tokenize(s))`` equals ``s`` for ordinary
single-spaced prose. Both are one precompiled regular expression each: no per-call objects.

:class:`SubwordSplitter` cuts sentences into the pieces of a model's own tokenizer instead (what
CLEAR's augmentations work on), each piece with its character span, and writes a rearranged
sequence of pieces back as text that the same tokenizer cuts into the same pieces again.
"""
from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass

from cselab.errors import first_line

_TOKEN = re.compile(r"\[[A-Z]{2,10}\]|\w+(?:['’\-.]\w+)*|[^\w\s]+")
_WORD = re.compile(r"[^\W\d_]")  # a token with at least one letter
# No space before closing punctuation; no space after opening brackets or currency signs.
_GLUE = re.compile(r" (?=[.,;:!?%)\]}…»])|(?<=[(\[{«$£€]) ")

_QUOTED = re.compile(r'" ([^"]*?) "')


def tokenize(text: str) -> list[str]:
    """Words, punctuation runs and ``[PLACEHOLDER]`` tokens; whitespace is dropped."""
    return _TOKEN.findall(text)


def word_spans(text: str) -> set[tuple[int, int]]:
    """(start, end) of every token ``tokenize`` finds: where whole words (and punctuation runs) are."""
    return {match.span() for match in _TOKEN.finditer(text)}


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


# --- a model tokenizer's pieces ----------------------------------------------------------------

#: The offline default base model's tokenizer (all-MiniLM-L6-v2: bert-base-uncased's WordPiece vocabulary).
DEFAULT_TOKENIZER = "minilm"


@dataclass(frozen=True)
class Piece:
    """One token of a model's tokenizer, as the characters of the sentence it covers."""

    index: int  # position in the sentence's piece sequence
    start: int
    end: int
    text: str  # sentence[start:end]: the original characters (case and accents kept)


class SubwordSplitter:
    """A model's tokenizer (a fast one: it reports character offsets) with placeholder tokens kept whole.

    ``split`` gives each sentence's pieces; ``join`` writes a sequence of slots back as text. A slot is
    ``(index, text)``: a piece kept in place of piece ``index`` (its own text, or a replacement such as
    a synonym), or ``(None, text)`` for an inserted token such as ``[DEL]``. Two slots that were
    neighbours in the sentence keep the characters between them (none inside a word, a space between
    words); any other pair is separated by one space, so every slot stays a token of its own when the
    encoder tokenizes the text again. (A piece that lost its left neighbour becomes a word start:
    WordPiece's ``##ing`` comes back as ``ing``.)
    """

    def __init__(self, tokenizer, placeholders: tuple[str, ...] = ()):
        if not getattr(tokenizer, "is_fast", False):
            raise ValueError(f"token-level augmentation needs a fast tokenizer (character offsets); "
                             f"{type(tokenizer).__name__} is not one")
        missing = [token for token in placeholders if token not in tokenizer.get_vocab()]
        if missing:  # a copy: the caller's tokenizer (the encoder's) is never changed here
            tokenizer = copy.deepcopy(tokenizer)
            tokenizer.add_tokens(missing, special_tokens=True)
        self.tokenizer = tokenizer

    def split(self, sentences: list[str]) -> list[list[Piece]]:
        encoded = self.tokenizer(list(sentences), add_special_tokens=False, return_offsets_mapping=True,
                                 return_attention_mask=False, return_token_type_ids=False, verbose=False)
        return [_pieces(sentence, offsets) for sentence, offsets in zip(sentences, encoded["offset_mapping"],
                                                                       strict=True)]

    @staticmethod
    def join(sentence: str, pieces: list[Piece], slots: list[tuple[int | None, str]]) -> str:
        parts = []
        previous = None
        for index, text in slots:
            if parts:
                neighbours = previous is not None and index == previous + 1
                parts.append(sentence[pieces[previous].end:pieces[index].start] if neighbours else " ")
            parts.append(text)
            previous = index
        return "".join(parts)


def _pieces(sentence: str, offsets) -> list[Piece]:
    """Pieces with their spans; tokens that share characters (a byte-level BPE split of one character)
    become one piece, so no character is ever written twice."""
    spans: list[list[int]] = []
    for start, end in offsets:
        if end <= start:
            continue  # zero-width: nothing of the sentence to move or delete
        if spans and start < spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end])
    return [Piece(i, start, end, sentence[start:end]) for i, (start, end) in enumerate(spans)]


@functools.lru_cache(maxsize=4)
def load_splitter(name_or_path: str, placeholders: tuple[str, ...]) -> SubwordSplitter:
    """A splitter over a tokenizer loaded by name, once per process (augmenters of a run share it)."""
    from transformers import AutoTokenizer

    path = name_or_path
    if name_or_path == DEFAULT_TOKENIZER:
        from cselab.sources import resolve_model_path  # the one place that knows where MiniLM lives

        path = resolve_model_path(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"tokenizer {name_or_path!r} could not be loaded ({type(exc).__name__}: "
                         f"{first_line(exc, 200, empty='')})") from None
    return SubwordSplitter(tokenizer, placeholders)
