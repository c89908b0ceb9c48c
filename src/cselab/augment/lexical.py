"""Token-level augmentations: CLEAR's four, EDA's four, random crop and ESimCSE's word repetition.

CLEAR (Wu et al., 2020, "CLEAR: Contrastive Learning for Sentence Representation"), with the
paper's hyper-parameters as defaults: word deletion of 70% of the tokens, span deletion of 5
spans of 5% of the length, reordering of 5 pairs of ~5%-long spans, substitution of 30% of the
tokens by synonyms. Deleted tokens become a ``[DEL]`` placeholder and consecutive placeholders
are merged into one (CLEAR Sec. 3.2); ``placeholder=None`` removes deleted tokens instead.
CLEAR works on subword tokens; here the unit is the word token of ``cselab.augment.tokenize``.

EDA (Wei and Zou, 2019, "EDA: Easy Data Augmentation Techniques..."): synonym replacement,
random insertion, random swap and random deletion with alpha = 0.1 (n = max(1, int(alpha * len))
changes; deletion with probability alpha per token, keeping one token when all would go).
EDA lower-cases and strips punctuation first; here punctuation tokens are kept and take part.

Random crop (SimCSE's Table 2 "crop", nlpaug's ``RandomWordAug(action="crop")``): delete one
contiguous span of ``ratio`` of the tokens. Word repetition (Wu et al., 2021, ESimCSE):
duplicate ``randint(0, max(2, int(0.32 * len)))`` randomly chosen tokens in place.

Every rule leaves sentences it cannot change (empty, too short) untouched, and never deletes
every token.
"""
from __future__ import annotations

from cselab.augment.base import TokenAugmenter, check_positive_int, check_ratio, register_augmenter
from cselab.augment.wordnet import WordNetSubstitution, common_lemmas, reader, substitutable, substitute

DEL = "[DEL]"


def _apply_deletions(tokens: list[str], deleted: bytearray, placeholder: str | None, collapse: bool) -> list[str]:
    """Drop or mask the tokens whose ``deleted`` flag is 1."""
    out = []
    previous_deleted = False
    for token, gone in zip(tokens, deleted, strict=True):
        if gone:
            if placeholder and not (collapse and previous_deleted):
                out.append(placeholder)
            previous_deleted = True
        else:
            out.append(token)
            previous_deleted = False
    return out


# --- CLEAR -----------------------------------------------------------------------------------


@register_augmenter
class ClearWordDeletion(TokenAugmenter):
    name = "clear_word_deletion"
    tag = "altering"
    description = "CLEAR word deletion: 70% of tokens deleted, each run of deletions -> one [DEL]"

    def __init__(self, ratio: float = 0.7, placeholder: str | None = DEL, collapse: bool = True):
        super().__init__()
        self.ratio = check_ratio(self.name, "ratio", ratio)
        self.placeholder = placeholder or None
        self.collapse = bool(collapse)
        self.special_tokens = (self.placeholder,) if self.placeholder else ()

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        if n < 2:
            return None
        k = min(n - 1, max(1, round(self.ratio * n)))  # never delete every token
        deleted = bytearray(n)
        for i in rng.sample(range(n), k):
            deleted[i] = 1
        return _apply_deletions(tokens, deleted, self.placeholder, self.collapse)


@register_augmenter
class ClearSpanDeletion(TokenAugmenter):
    name = "clear_span_deletion"
    tag = "possibly-altering"
    description = "CLEAR span deletion: 5 spans of 5% of the length deleted, each -> one [DEL]"

    def __init__(self, spans: int = 5, span_ratio: float = 0.05, placeholder: str | None = DEL, collapse: bool = True):
        super().__init__()
        self.spans = check_positive_int(self.name, "spans", spans, minimum=1)
        self.span_ratio = check_ratio(self.name, "span_ratio", span_ratio)
        self.placeholder = placeholder or None
        self.collapse = bool(collapse)
        self.special_tokens = (self.placeholder,) if self.placeholder else ()

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        length = max(1, round(self.span_ratio * n))
        spans = min(self.spans, (n - 1) // length)  # keep at least one token
        if spans < 1:
            return None
        deleted = bytearray(n)
        for _ in range(spans):  # spans may overlap, as independent draws do
            start = rng.randrange(n - length + 1)
            deleted[start:start + length] = b"\x01" * length
        return _apply_deletions(tokens, deleted, self.placeholder, self.collapse)


@register_augmenter
class ClearReorder(TokenAugmenter):
    name = "clear_reorder"
    tag = "possibly-altering"
    description = "CLEAR reordering: 5 pairs of non-overlapping ~5%-long spans swapped pairwise"

    def __init__(self, pairs: int = 5, span_ratio: float = 0.05):
        super().__init__()
        self.pairs = check_positive_int(self.name, "pairs", pairs, minimum=1)
        self.span_ratio = check_ratio(self.name, "span_ratio", span_ratio)

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        length = max(1, round(self.span_ratio * n))
        pairs = min(self.pairs, n // (2 * length))
        if pairs < 1:
            return None
        m = 2 * pairs
        # m non-overlapping spans of equal length: choose m of the (free + m) slots in order.
        free = n - m * length
        slots = sorted(rng.sample(range(free + m), m))
        starts = [slot - j + j * length for j, slot in enumerate(slots)]
        order = list(range(m))
        rng.shuffle(order)
        out = list(tokens)
        for a, b in zip(order[0::2], order[1::2], strict=True):
            sa, sb = starts[a], starts[b]
            out[sa:sa + length], out[sb:sb + length] = tokens[sb:sb + length], tokens[sa:sa + length]
        return out


@register_augmenter
class ClearSynonymSubstitution(WordNetSubstitution):
    name = "clear_synonym_substitution"
    tag = "possibly-altering"
    description = "CLEAR substitution: 30% of tokens replaced by WordNet synonyms (where they have any)"
    relation = "synonyms"

    def __init__(self, ratio: float = 0.3, max_changes: int | None = None, pos: str | None = None,
                 senses: int | None = None):
        super().__init__(ratio=ratio, max_changes=max_changes, pos=pos, senses=senses)


# --- EDA -------------------------------------------------------------------------------------


def _eda_count(alpha: float, n: int) -> int:
    return max(1, int(alpha * n))


@register_augmenter
class EdaSynonymReplacement(WordNetSubstitution):
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


@register_augmenter
class WordRepetition(TokenAugmenter):
    name = "word_repetition"
    tag = "meaning-preserving"
    description = "ESimCSE word repetition: randint(0, max(2, int(0.32 n))) random tokens duplicated"

    def __init__(self, dup_rate: float = 0.32):
        super().__init__()
        self.dup_rate = check_ratio(self.name, "dup_rate", dup_rate)

    def augment_tokens(self, tokens, rng):
        n = len(tokens)
        count = min(n, rng.randint(0, max(2, int(self.dup_rate * n))))
        if count == 0:
            return None
        chosen = set(rng.sample(range(n), count))
        out = []
        for i, token in enumerate(tokens):
            out.append(token)
            if i in chosen:
                out.append(token)
        return out
