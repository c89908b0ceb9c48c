"""Token-level augmentations: CLEAR's four, EDA's four, random crop and ESimCSE's word repetition.

CLEAR (Wu et al., 2020, "CLEAR: Contrastive Learning for Sentence Representation", Sec. 3.3 and
Figure 2), with the paper's hyper-parameters (Sec. 4.1) as defaults: word deletion of 70% of the
tokens, span deletion of 5 spans of 5% of the length, reordering of 5 pairs of ~5%-long spans,
substitution of 30% of the tokens by synonyms. The span rules keep the paper's proportions at every
length (25% of the units deleted, 50% moved, on average): set for 512-token inputs, "5 spans of 5%"
on an 8-token sentence would otherwise be 5 one-token spans, and "5 pairs" would move every token.
Deleted tokens become a ``[DEL]`` placeholder and consecutive placeholders are merged into one ("we
eliminate the consecutive token [DEL] into one token"); ``placeholder=None`` removes deleted tokens
instead.

The unit (``level``): CLEAR augments the tokenised sequence. ``level="token"`` (the clear-* recipes)
uses the pieces of a model's tokenizer (``tokenizer``: a name or path, ``minilm`` by default; the
training loop hands over the encoder's own through ``use_tokenizer``), so "70% of the tokens" counts
what the encoder reads. ``level="word"`` (the default of the augmenters themselves) uses the word
tokens of ``cselab.augment.tokenize``.

EDA (Wei and Zou, 2019, "EDA: Easy Data Augmentation Techniques..."): synonym replacement,
random insertion, random swap and random deletion with alpha = 0.1 (n = max(1, int(alpha * len))
changes; deletion with probability alpha per token, keeping one token when all would go).
EDA lower-cases and strips punctuation first; here punctuation tokens are kept and take part.

Random crop (SimCSE's Table 2 "crop", nlpaug's ``RandomWordAug(action="crop")``): delete one
contiguous span of ``ratio`` of the tokens. Word repetition (Wu et al., COLING 2022, ESimCSE):
duplicate ``randint(0, max(2, int(0.32 * len)))`` randomly chosen words in place, or (``unit:
subword``) the encoder's pieces on its token ids after truncation, as the paper and its code do.

Every rule leaves sentences it cannot change (empty, too short) untouched, and never deletes
every token.
"""
from __future__ import annotations

import math
import random

from cselab import citations
from cselab.augment.base import (
    TokenAugmenter,
    check_positive_int,
    check_ratio,
    register_augmenter,
    sentence_seed,
)
from cselab.augment.tokenize import DEFAULT_TOKENIZER, Piece, SubwordSplitter, load_splitter, word_spans
from cselab.augment.wordnet import WordNetSubstitution, common_lemmas, reader, substitutable, substitute
from cselab.errors import ConfigError

DEL = "[DEL]"
LEVELS = ("token", "word")

# A plan says what an augmented sequence is made of: an int keeps that unit of the input, a str is
# an inserted placeholder. The same plan applies to words or to a model's pieces.
PlanItem = int | str


def deletion_plan(units: list[str], deleted: bytearray, placeholder: str | None, collapse: bool) -> list[PlanItem]:
    """Keep the units whose ``deleted`` flag is 0; each deleted one becomes ``placeholder`` (or goes).
    With ``collapse``, no two placeholders end up side by side, counting any the input already had."""
    plan: list[PlanItem] = []
    last_was_placeholder = False
    for i, gone in enumerate(deleted):
        if gone and not placeholder:
            continue
        is_placeholder = bool(gone) or units[i] == placeholder
        if collapse and is_placeholder and last_was_placeholder:
            continue
        plan.append(placeholder if gone else i)
        last_was_placeholder = is_placeholder
    return plan


def word_deletion_flags(n: int, ratio: float, rng: random.Random) -> bytearray | None:
    """round(ratio * n) units chosen uniformly (at least one, never all of them)."""
    if n < 2:
        return None
    deleted = bytearray(n)
    for i in rng.sample(range(n), min(n - 1, max(1, round(ratio * n)))):
        deleted[i] = 1
    return deleted


def stochastic_count(expected: float, rng: random.Random) -> int:
    """floor(expected), plus one with the probability of its fractional part: the mean is ``expected``
    at every length (round() would make a 6-unit sentence lose 2 units of 1.5, a third, every time)."""
    whole = math.floor(expected)
    return whole + (rng.random() < expected - whole)


def split_evenly(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` units in ``parts`` lengths that differ by at most one, the longer ones in random places."""
    base, extra = divmod(total, parts)
    lengths = [base + 1] * extra + [base] * (parts - extra)
    rng.shuffle(lengths)
    return lengths


def place_spans(n: int, lengths: list[int], rng: random.Random) -> list[int]:
    """The starts of non-overlapping spans of ``lengths`` (in this order) among ``n`` units, placed
    uniformly: choose len(lengths) of the (free + len(lengths)) slots, in order."""
    free = n - sum(lengths)
    starts, used = [], 0
    for j, slot in enumerate(sorted(rng.sample(range(free + len(lengths)), len(lengths)))):
        starts.append(slot - j + used)
        used += lengths[j]
    return starts


def span_deletion_flags(n: int, spans: int, span_ratio: float, rng: random.Random) -> bytearray | None:
    """``spans`` x ``span_ratio`` of the units deleted (on average; at least one, never all), in at most
    ``spans`` non-overlapping spans of near-equal length, each at least one unit. On a long input these
    are the paper's spans of ``span_ratio`` each; on a sentence, fewer and shorter spans keep the share."""
    if n < 2:
        return None
    total = min(n - 1, max(1, stochastic_count(spans * span_ratio * n, rng)))
    lengths = split_evenly(total, min(spans, total), rng)
    deleted = bytearray(n)
    for start, length in zip(place_spans(n, lengths, rng), lengths, strict=True):
        deleted[start:start + length] = b"\x01" * length
    return deleted


def reorder_plan(n: int, pairs: int, span_ratio: float, rng: random.Random) -> list[PlanItem] | None:
    """Up to ``pairs`` pairs of non-overlapping spans, the two spans of a pair of equal length, swapped
    pairwise: 2 x ``pairs`` x ``span_ratio`` of the units moved (on average; at least one pair, at most
    every unit). On a long input these are the paper's spans of ``span_ratio`` each."""
    if n < 2:
        return None
    per_side = min(n // 2, max(1, stochastic_count(pairs * span_ratio * n, rng)))
    pair_lengths = split_evenly(per_side, min(pairs, per_side), rng)
    spans = [pair for pair in range(len(pair_lengths)) for _ in range(2)]
    rng.shuffle(spans)  # the order of the spans along the sentence: which two make a pair is random
    lengths = [pair_lengths[pair] for pair in spans]
    first: dict[int, int] = {}
    plan: list[PlanItem] = list(range(n))
    for pair, start, length in zip(spans, place_spans(n, lengths, rng), lengths, strict=True):
        if pair not in first:
            first[pair] = start
            continue
        a = first[pair]
        plan[a:a + length], plan[start:start + length] = plan[start:start + length], plan[a:a + length]
    return plan


# --- CLEAR -----------------------------------------------------------------------------------


class TokenLevel:
    """The ``level`` / ``tokenizer`` parameters of CLEAR's rules: which units a rule counts and moves."""

    special_tokens: tuple[str, ...] = ()

    def _set_level(self, level: str, tokenizer: str) -> None:
        if level not in LEVELS:
            raise ValueError(f"augmenter {self.name}: level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.tokenizer = tokenizer
        # Loaded now, so a tokenizer that cannot load fails when the recipe is read, not in a data worker.
        self._splitter = load_splitter(tokenizer, self._kept_whole()) if level == "token" else None

    def _kept_whole(self) -> tuple[str, ...]:
        """Placeholders cut as one piece: this rule's own and the [DEL] an earlier CLEAR step wrote."""
        return tuple(dict.fromkeys((DEL, *self.special_tokens)))

    def use_tokenizer(self, tokenizer) -> None:
        """Count and move the pieces of this tokenizer (the training loop gives the encoder's own)."""
        if self.level == "token":
            self._splitter = SubwordSplitter(tokenizer, self._kept_whole())

    def splitter(self) -> SubwordSplitter:
        if self._splitter is None:
            raise RuntimeError(f"augmenter {self.name}: level {self.level!r} cuts no model tokens")
        return self._splitter

    def augment_pieces(self, sentence: str, pieces: list[Piece], rng: random.Random) -> str:
        raise NotImplementedError

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        if self.level == "word":
            return super().augment(sentences, seed)
        splitter = self.splitter()
        rng = self._rng
        out = []
        for sentence, pieces in zip(sentences, splitter.split(sentences), strict=True):
            rng.seed(sentence_seed(seed, sentence))  # as every augmenter: per (seed, sentence)
            out.append(self.augment_pieces(sentence, pieces, rng) if pieces else sentence)
        return out


class ClearRule(TokenLevel, TokenAugmenter):
    """A CLEAR rule written once as a plan over units, applied to a model's pieces or to words."""
    citation = citations.CLEAR

    def plan(self, units: list[str], rng: random.Random) -> list[PlanItem] | None:
        """What the augmented sequence is made of (see ``PlanItem``); None when the rule cannot apply."""
        raise NotImplementedError

    def augment_tokens(self, tokens, rng):  # the word level
        plan = self.plan(tokens, rng)
        return None if plan is None else [tokens[item] if isinstance(item, int) else item for item in plan]

    def augment_pieces(self, sentence, pieces, rng):
        plan = self.plan([piece.text for piece in pieces], rng)
        if plan is None or plan == list(range(len(pieces))):
            return sentence
        slots = [(item, pieces[item].text) if isinstance(item, int) else (None, item) for item in plan]
        return SubwordSplitter.join(sentence, pieces, slots)


@register_augmenter
class ClearWordDeletion(ClearRule):
    name = "clear_word_deletion"
    tag = "altering"
    description = "CLEAR word deletion: 70% of tokens deleted, each run of deletions -> one [DEL]"

    def __init__(self, ratio: float = 0.7, placeholder: str | None = DEL, collapse: bool = True, level: str = "word",
                 tokenizer: str = DEFAULT_TOKENIZER):
        super().__init__()
        self.ratio = check_ratio(self.name, "ratio", ratio)
        self.placeholder = placeholder or None
        self.collapse = bool(collapse)
        self.special_tokens = (self.placeholder,) if self.placeholder else ()
        self._set_level(level, tokenizer)

    def plan(self, units, rng):
        deleted = word_deletion_flags(len(units), self.ratio, rng)
        return None if deleted is None else deletion_plan(units, deleted, self.placeholder, self.collapse)


@register_augmenter
class ClearSpanDeletion(ClearRule):
    name = "clear_span_deletion"
    tag = "possibly-altering"
    description = "CLEAR span deletion: 25% of the units in at most 5 spans (5% each when long), each -> one [DEL]"
    output_revision = 1  # 1: the paper's share at every length (earlier: 5 one-unit spans on a short sentence)

    def __init__(self, spans: int = 5, span_ratio: float = 0.05, placeholder: str | None = DEL, collapse: bool = True,
                 level: str = "word", tokenizer: str = DEFAULT_TOKENIZER):
        super().__init__()
        self.spans = check_positive_int(self.name, "spans", spans, minimum=1)
        self.span_ratio = check_ratio(self.name, "span_ratio", span_ratio)
        self.placeholder = placeholder or None
        self.collapse = bool(collapse)
        self.special_tokens = (self.placeholder,) if self.placeholder else ()
        self._set_level(level, tokenizer)

    def plan(self, units, rng):
        deleted = span_deletion_flags(len(units), self.spans, self.span_ratio, rng)
        return None if deleted is None else deletion_plan(units, deleted, self.placeholder, self.collapse)


@register_augmenter
class ClearReorder(ClearRule):
    name = "clear_reorder"
    tag = "possibly-altering"
    description = "CLEAR reordering: 50% of the units moved, in at most 5 pairs of spans (~5% each) swapped"
    output_revision = 1  # 1: the paper's share at every length (earlier: every unit moved on a short sentence)

    def __init__(self, pairs: int = 5, span_ratio: float = 0.05, level: str = "word",
                 tokenizer: str = DEFAULT_TOKENIZER):
        super().__init__()
        self.pairs = check_positive_int(self.name, "pairs", pairs, minimum=1)
        self.span_ratio = check_ratio(self.name, "span_ratio", span_ratio)
        self._set_level(level, tokenizer)

    def plan(self, units, rng):
        return reorder_plan(len(units), self.pairs, self.span_ratio, rng)


@register_augmenter
class ClearSynonymSubstitution(TokenLevel, WordNetSubstitution):
    """``ratio`` of the units (at least one) replaced by WordNet synonyms, among those that have any.
    At the token level only pieces that are whole words qualify: ``un`` of ``unbelievably`` is not
    the word "un"."""
    citation = citations.CLEAR

    name = "clear_synonym_substitution"
    tag = "possibly-altering"
    description = "CLEAR substitution: 30% of tokens replaced by WordNet synonyms (where they have any)"
    relation = "synonyms"

    def __init__(self, ratio: float = 0.3, max_changes: int | None = None, pos: str | None = None,
                 senses: int | None = None, level: str = "word", tokenizer: str = DEFAULT_TOKENIZER):
        super().__init__(ratio=ratio, max_changes=max_changes, pos=pos, senses=senses)
        self._set_level(level, tokenizer)

    def augment_pieces(self, sentence, pieces, rng):
        words = word_spans(sentence)
        # A piece inside a longer word is offered as "", which has no synonyms.
        offered = [piece.text if (piece.start, piece.end) in words else "" for piece in pieces]
        replaced = self.augment_tokens(offered, rng)  # the same count rule as words: ratio of all units
        if replaced is None:
            return sentence
        slots = [(piece.index, new if new != old else piece.text)
                 for piece, old, new in zip(pieces, offered, replaced, strict=True)]
        return SubwordSplitter.join(sentence, pieces, slots)


# --- EDA -------------------------------------------------------------------------------------


def _eda_count(alpha: float, n: int) -> int:
    return max(1, int(alpha * n))


@register_augmenter
class EdaSynonymReplacement(WordNetSubstitution):
    citation = citations.EDA
    name = "eda_synonym_replacement"
    tag = "meaning-preserving"
    description = "EDA synonym replacement: max(1, int(0.1 n)) non-stop words -> WordNet synonyms"
    relation = "synonyms"

    def __init__(self, alpha: float = 0.1, senses: int | None = None):
        super().__init__(ratio=alpha, senses=senses)
        self.alpha = self.ratio

    def augment_tokens(self, tokens, rng):
        return substitute(tokens, rng, self.candidates, _eda_count(self.alpha, len(tokens)))


@register_augmenter
class EdaRandomInsertion(TokenAugmenter):
    citation = citations.EDA
    name = "eda_random_insertion"
    tag = "possibly-altering"
    description = "EDA random insertion: a synonym of a random word inserted at a random place, n times"

    def __init__(self, alpha: float = 0.1, tries: int = 10):
        super().__init__()
        self.alpha = check_ratio(self.name, "alpha", alpha)
        self.tries = check_positive_int(self.name, "tries", tries, minimum=1)
        reader()  # fail early, with the install hint, when WordNet is missing

    def augment_tokens(self, tokens, rng):
        out = None
        for _ in range(_eda_count(self.alpha, len(tokens))):
            source = out or tokens
            for _ in range(self.tries):  # EDA gives up on a word after 10 tries
                word = source[rng.randrange(len(source))]
                options = common_lemmas("synonyms", word.lower(), None) if substitutable(word) else ()
                if options:
                    if out is None:
                        out = list(tokens)
                    out.insert(rng.randrange(len(out) + 1), options[rng.randrange(len(options))])
                    break
        return out


@register_augmenter
class EdaRandomSwap(TokenAugmenter):
    citation = citations.EDA
    name = "eda_random_swap"
    tag = "possibly-altering"
    description = "EDA random swap: two random tokens swapped, max(1, int(0.1 n)) times"

    def __init__(self, alpha: float = 0.1):
        super().__init__()
        self.alpha = check_ratio(self.name, "alpha", alpha)

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        if n < 2:
            return None
        out = list(tokens)
        for _ in range(_eda_count(self.alpha, n)):
            i = rng.randrange(n)
            j = rng.randrange(n - 1)
            j += j >= i  # a different position, without EDA's retry loop
            out[i], out[j] = out[j], out[i]
        return out


@register_augmenter
class EdaRandomDeletion(TokenAugmenter):
    citation = citations.EDA
    name = "eda_random_deletion"
    tag = "possibly-altering"
    description = "EDA random deletion: each token deleted with probability 0.1 (one always kept)"

    def __init__(self, p: float = 0.1):
        super().__init__()
        self.p = check_ratio(self.name, "p", p)

    def augment_tokens(self, tokens, rng):
        if len(tokens) < 2:
            return None
        random_ = rng.random
        p = self.p
        out = [token for token in tokens if random_() >= p]
        if not out:
            return [tokens[rng.randrange(len(tokens))]]
        return out


# --- crop and repetition ----------------------------------------------------------------------


@register_augmenter
class RandomCrop(TokenAugmenter):
    name = "random_crop"
    tag = "possibly-altering"
    description = "random crop: one contiguous span of 10% of the tokens deleted"

    def __init__(self, ratio: float = 0.1):
        super().__init__()
        self.ratio = check_ratio(self.name, "ratio", ratio, allow_one=False)

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        if n < 2:
            return None
        length = min(n - 1, max(1, round(self.ratio * n)))
        start = rng.randrange(n - length + 1)
        return tokens[:start] + tokens[start + length:]


UNITS = ("word", "subword")
COUNT_RULES = ("paper", "code")


@register_augmenter
class WordRepetition(TokenAugmenter):
    """ESimCSE's word repetition (Wu et al., COLING 2022, Sec. 3.1): some units of the sentence are
    written twice, in place, at positions drawn uniformly without replacement.

    ``unit``: ``word`` (the default) repeats the word tokens of ``cselab.augment.tokenize`` in the text,
    before the encoder's tokenizer and its truncation; ``subword`` repeats the encoder's own pieces on
    its token ids after truncation (the paper's sub-words; the authors' ``dup_type=bpe``), so the
    positive of a sentence cut at ``max_seq_len`` is still longer than its anchor (up to 9 pieces at
    32). The collator makes that edit (``edits_token_ids``); its text is the sentence, unchanged.

    ``count``, with n the units of the sentence (``subword``: its pieces, [CLS]/[SEP] not counted) and
    L = n + the special tokens (``subword``) or n (``word``):
    - ``paper``: randint(0, max(2, int(dup_rate * n))) units (both ends included), at most n, at any
      of the n positions (the paper's dup_len range);
    - ``code``: randrange(min(10, int(dup_rate * L))) units (the upper end excluded, none when
      int(dup_rate * L) is 0), at the positions of the sentence's pieces (``subword``, the authors'
      ``train.py:516-518``); ``word``: randrange(min(10, n, max(2, int(dup_rate * n)))) words, never
      the last (their ``dup_type=word``, ``train.py:468-469``).
    A ``subword`` row never grows past the tokenizer's ``model_max_length``.
    """

    citation = citations.ESIMCSE
    name = "word_repetition"
    tag = "meaning-preserving"
    description = ("ESimCSE word repetition: randint(0, max(2, int(0.32 n))) random words (unit: subword: the "
                   "encoder's pieces, after truncation) duplicated in place")

    def __init__(self, dup_rate: float = 0.32, unit: str = "word", count: str = "paper"):
        super().__init__()
        self.dup_rate = check_ratio(self.name, "dup_rate", dup_rate)
        if unit not in UNITS:
            raise ValueError(f"augmenter {self.name}: unit must be one of {', '.join(UNITS)}, got {unit!r}")
        if count not in COUNT_RULES:
            raise ValueError(f"augmenter {self.name}: count must be one of {', '.join(COUNT_RULES)}, got {count!r}")
        self.unit, self.count = unit, count
        self.edits_token_ids = unit == "subword"
        self._frame: tuple[int, int] | None = None  # special tokens the tokenizer puts before and after a sentence
        self._max_length: int | None = None

    def use_tokenizer(self, tokenizer) -> None:
        """The encoder's tokenizer: how many special tokens frame a sentence, and its longest input."""
        if not self.edits_token_ids:
            return
        from cselab.model.encoder import special_frame  # torch's module: only when training gives a tokenizer

        before, after = special_frame(tokenizer)
        self._frame = (len(before), len(after))
        limit = getattr(tokenizer, "model_max_length", None)
        self._max_length = limit if isinstance(limit, int) and 0 < limit < 1_000_000 else None

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        if self.edits_token_ids:
            raise ConfigError(f"augmenter {self.name}: unit subword edits the encoder's token ids in training "
                              f"(views.positive); it has no text output (use unit: word)")
        return super().augment(sentences, seed)

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        if self.count == "code":
            count = rng.randrange(min(10, n, max(2, int(self.dup_rate * n)))) if n else 0
            chosen = set(rng.sample(range(n - 1), count))
        else:
            chosen = set(rng.sample(range(n), self._paper_count(n, rng)))
        if not chosen:
            return None
        return [tokens[i] for i in _doubled(n, chosen)]

    def _paper_count(self, n: int, rng: random.Random) -> int:
        """How many of ``n`` units to repeat, by the paper's rule: uniform on [0, max(2, int(rate * n))]."""
        return min(n, rng.randint(0, max(2, int(self.dup_rate * n))))

    def token_plan(self, ids: list[int], rng: random.Random) -> list[int] | None:
        if self._frame is None:
            raise RuntimeError(f"augmenter {self.name}: unit subword needs the encoder's tokenizer (use_tokenizer)")
        before, after = self._frame
        pieces = range(before, max(before, len(ids) - after))  # the sentence's own pieces
        n = len(pieces)
        if self.count == "code":
            top = min(10, int(self.dup_rate * len(ids)))
            count = min(n, rng.randrange(top)) if top > 0 else 0
        else:
            count = self._paper_count(n, rng)
        if self._max_length is not None:
            count = max(0, min(count, self._max_length - len(ids)))
        if count == 0:
            return None
        return _doubled(len(ids), set(rng.sample(pieces, count)))


def _doubled(n: int, chosen: set[int]) -> list[int]:
    """The positions 0..n-1 in order, each of ``chosen`` twice."""
    return [i for i in range(n) for _ in range(2 if i in chosen else 1)]
