"""UNA: TF-IDF-driven hard negative augmentation.

Shu, Gu, Yang & Lo, "Unsupervised hard Negative Augmentation for contrastive learning" (2023),
section 3, with the equations the text extraction lost restored from ``papers/NOTES.md``:

1. Fit TF-IDF on the training corpus, each sentence a document: tf(t, d) = count(t, d) / |d|
   (the authors' code uses log(1 + count / |d|): ``tf="log"``), idf(t) = log(N / df(t)). Each
   term's global importance is its maximum TF-IDF over the corpus; the vocabulary is sorted by it.
2. In a sentence, raw_i = tfidf_i - min_j tfidf_j and p_i = min(1, raw_i / sum_j raw_j * p * L):
   the replacement probabilities grow with importance and average p (the augmentation
   magnitude). If no p_i reaches 1, the highest-scoring term gets p = 1, so something changes.
3. A chosen term is replaced by a term sampled from the 2r + 1 terms around it (itself included)
   in the max-TF-IDF ordering, with probability proportional to their max TF-IDF, so the
   replacement carries a similar level of importance. If the result still equals the (lowercased)
   input, one random token is replaced by a different term of its window.

Output text is lowercased (the paper's only preprocessing is tokenisation and lowercasing); the
whitespace of the input is kept. ``term_choice="random"`` and ``replacement="random"`` are the
ablations of the paper's Table 2 (random step 2, random step 3).
"""
from __future__ import annotations

import bisect
import math
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cselab import citations
from cselab.augment.base import Augmenter, register_augmenter, sentence_seed
from cselab.errors import counted

# Words (with inner hyphens/apostrophes kept together) and single punctuation marks: "basic
# tokenisation". Punctuation marks are terms too, as in the authors' NLTK tokenisation; their
# TF-IDF is near zero, so they are rarely chosen.
TOKEN_PATTERN = r"\w+(?:['\u2019\-]\w+)*|[^\w\s]"
_TOKEN_RE = re.compile(TOKEN_PATTERN)

TF_MODES = ("ratio", "log")
TERM_CHOICES = ("tfidf", "random")
REPLACEMENTS = ("tfidf", "random")
# Sentences fitted per block when reducing counts to max TF-IDF: bounds the float temporaries.
_FIT_BLOCK = 200_000


def tokenize(text: str) -> list[tuple[int, int, str]]:
    """(start, end, term) of each token of the lowercased text."""
    return [(m.start(), m.end(), m.group()) for m in _TOKEN_RE.finditer(text)]


def term_frequency(counts: np.ndarray, lengths: np.ndarray, mode: str) -> np.ndarray:
    ratio = counts / lengths
    return np.log1p(ratio) if mode == "log" else ratio


@dataclass
class TfidfStatistics:
    """What UNA keeps of the corpus: idf, max TF-IDF per term, and the vocabulary sorted by it."""

    vocabulary: dict[str, int]  # term -> column
    idf: np.ndarray  # (V,) per column
    max_tfidf: np.ndarray  # (V,) per column
    terms_by_rank: list[str]  # rank 0 = highest max TF-IDF
    rank: np.ndarray  # (V,) column -> rank
    cumulative: np.ndarray  # (V + 1,) cumulative max TF-IDF in rank order, for window sampling
    num_documents: int
    tf_mode: str

    def __post_init__(self) -> None:
        # Plain lists for the per-token hot path: scalar indexing and bisect beat numpy on short sentences.
        self._idf = self.idf.tolist()
        self._rank = self.rank.tolist()
        self._cumulative = self.cumulative.tolist()
        self._negated_sorted = (-self.sorted_max_tfidf()).tolist()  # ascending, for bisect

    @property
    def size(self) -> int:
        return len(self.terms_by_rank)

    @property
    def unknown_idf(self) -> float:
        # A word never seen when fitting is as rare as can be: df = 1.
        return math.log(max(self.num_documents, 1))

    def sorted_max_tfidf(self) -> np.ndarray:
        return np.diff(self.cumulative)

    def idf_and_rank(self, term: str) -> tuple[float, int | None]:
        column = self.vocabulary.get(term)
        if column is None:
            return self.unknown_idf, None
        return self._idf[column], self._rank[column]

    def rank_of_score(self, score: float) -> int:
        """Where a term with this max TF-IDF would sit in the ordering (for unknown words)."""
        return min(self.size - 1, bisect.bisect_left(self._negated_sorted, -score))

    def window(self, rank: int, radius: int) -> tuple[int, int]:
        """[lo, hi) of the candidates of a rank: r positions below and above, itself included."""
        return max(0, rank - radius), min(self.size, rank + radius + 1)

    def sample_rank(self, rank: int, radius: int, u: float, exclude_self: bool = False) -> int:
        """A rank within ``radius`` of ``rank``, drawn with probability proportional to max TF-IDF.

        ``u`` is one uniform draw in [0, 1), inverted through the precomputed cumulative sums:
        O(log V) per sample. A window whose mass is zero (terms in every sentence) is sampled
        uniformly. ``exclude_self`` leaves the term itself out (the "must change" fallback).
        """
        c = self._cumulative
        lo, hi = self.window(rank, radius)
        own = c[rank + 1] - c[rank]
        mass = c[hi] - c[lo] - (own if exclude_self else 0.0)
        if mass > 0:
            offset = u * mass
            if exclude_self and offset >= c[rank] - c[lo]:
                offset += own  # skip the term's own slice
            picked = bisect.bisect_right(c, c[lo] + offset, lo, hi + 1) - 1
            picked = min(max(picked, lo), hi - 1)
            if not (exclude_self and picked == rank):
                return picked
        span = hi - lo - (1 if exclude_self else 0)
        picked = lo + int(u * max(span, 1))
        if exclude_self and picked >= rank:
            picked += 1
        return min(picked, hi - 1)


def fit_tfidf(texts, tf_mode: str = "ratio", progress: bool | None = None) -> TfidfStatistics:
    """TF-IDF statistics of ``texts`` (each a document), kept sparse: never vocab x documents dense."""
    from sklearn.feature_extraction.text import CountVectorizer
    from tqdm.auto import tqdm

    if tf_mode not in TF_MODES:
        raise ValueError(f"una: tf must be one of {', '.join(TF_MODES)}, got {tf_mode!r}")
    texts = texts if isinstance(texts, list) else list(texts)
    show = len(texts) >= 100_000 if progress is None else progress
    vectorizer = CountVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.int32)
    try:
        counts = vectorizer.fit_transform(tqdm(texts, desc="una: TF-IDF", unit="sentence", disable=not show,
                                               leave=False))
    except ValueError as exc:
        raise ValueError(f"una: cannot fit TF-IDF on {counted(len(texts), 'sentence')}: no tokens ({exc})") from None
    counts = counts.tocsr()
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    num_documents = int((lengths > 0).sum())
    num_terms = counts.shape[1]
    document_frequency = np.bincount(counts.indices, minlength=num_terms)
    idf = np.log(num_documents / document_frequency)
    max_tfidf = np.zeros(num_terms)
    for start in range(0, counts.shape[0], _FIT_BLOCK):
        block = counts[start:start + _FIT_BLOCK]
        row_lengths = np.repeat(lengths[start:start + _FIT_BLOCK], np.diff(block.indptr))
        scores = term_frequency(block.data, row_lengths, tf_mode) * idf[block.indices]
        np.maximum.at(max_tfidf, block.indices, scores)
    # Descending max TF-IDF; ties broken by term so the ordering does not depend on corpus order.
    columns_terms = vectorizer.get_feature_names_out()
    order = np.lexsort((columns_terms, -max_tfidf))
    rank = np.empty(num_terms, dtype=np.int64)
    rank[order] = np.arange(num_terms)
    cumulative = np.concatenate([[0.0], np.cumsum(max_tfidf[order])])
    vocabulary = {str(term): int(column) for term, column in vectorizer.vocabulary_.items()}
    return TfidfStatistics(vocabulary=vocabulary, idf=idf, max_tfidf=max_tfidf,
                           terms_by_rank=[str(t) for t in columns_terms[order]], rank=rank,
                           cumulative=cumulative, num_documents=num_documents, tf_mode=tf_mode)


def replacement_probabilities(scores: list[float], magnitude: float) -> list[float]:
    """Step 2 (the authors' formula): probabilities growing with TF-IDF, mean ``magnitude``, cap 1.

    raw_i = s_i - min(s); p_i = min(1, raw_i / sum(raw) * magnitude * L). When every score is the
    same (one token, or one repeated term) the raw weights are all zero; every position then gets
    ``magnitude``. If no p_i reaches 1, the (first) highest-scoring position gets 1.
    """
    if not scores:
        return []
    low = min(scores)
    raw = [s - low for s in scores]
    total = sum(raw)
    if total > 0:
        scale = magnitude * len(scores) / total
        probs = [min(1.0, r * scale) for r in raw]
    else:
        probs = [min(1.0, magnitude)] * len(scores)
    if max(probs) < 1:
        probs[scores.index(max(scores))] = 1.0
    return probs


@dataclass
class SentencePlan:
    """One sentence's tokens, their scores, probabilities and the positions chosen in step 2."""

    text: str  # lowercased
    tokens: list[tuple[int, int, str]]
    scores: list[float]
    probabilities: list[float]
    ranks: list[int]  # rank of each token's term in the max-TF-IDF ordering (unknown: by its score)
    chosen: list[int]  # token positions to replace


def _stream_seeds(seed: int, sentence: str) -> tuple[int, int, int]:
    """Seeds of the step-2, step-3 and fallback streams of one sentence.

    Per sentence (the project's convention: a sentence's output does not depend on the rest of
    the batch), and per step, so an ablation of one step leaves the other step's draws unchanged.
    """
    base = sentence_seed(seed, sentence)
    return base, (base ^ 0x5BD1E995) & 0xFFFFFFFF, (base ^ 0x27D4EB2F) & 0xFFFFFFFF


@register_augmenter
class UNAAugmenter(Augmenter):
    """UNA's negative generator; ``fit(corpus)`` first, then ``augment(sentences, seed)``.

    Parameters: ``p`` augmentation magnitude (mean replacement probability, paper default 0.5);
    ``radius`` r, the half-width of the replacement window in the max-TF-IDF ordering (4000);
    ``tf`` ratio (the paper's count / length) or log (the authors' code); ``term_choice`` and
    ``replacement`` tfidf (UNA) or random (the paper's Table 2 ablations); ``extra_fit_texts_from``
    a file whose texts join the corpus when fitting TF-IDF (UNA + paraphrasing: the ``cselab
    augment`` jsonl cache of the positives -- its "augmented" texts, only those of
    ``extra_fit_augmentation`` when set -- or a text file with one sentence a line);
    ``extra_fit_positives`` true: the run's positives join it instead (the training views hand the
    texts of ``views.positive: cached``, built for the whole corpus before the first step, to ``fit``).
    """
    citation = citations.UNA

    name = "una"
    tag = "altering"
    description = "UNA: replace important terms by terms of similar max TF-IDF (hard negatives; needs fit)"

    def __init__(self, p: float = 0.5, radius: int = 4000, tf: str = "ratio", term_choice: str = "tfidf",
                 replacement: str = "tfidf", extra_fit_texts_from: str | None = None,
                 extra_fit_augmentation: str | None = None, extra_fit_positives: bool = False):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise ValueError(f"una: p must be in (0, 1], got {p!r}")
        if isinstance(radius, bool) or not isinstance(radius, int) or radius < 1:
            raise ValueError(f"una: radius must be an integer >= 1, got {radius!r}")
        if tf not in TF_MODES:
            raise ValueError(f"una: tf must be one of {', '.join(TF_MODES)}, got {tf!r}")
        if term_choice not in TERM_CHOICES:
            raise ValueError(f"una: term_choice must be one of {', '.join(TERM_CHOICES)}, got {term_choice!r}")
        if replacement not in REPLACEMENTS:
            raise ValueError(f"una: replacement must be one of {', '.join(REPLACEMENTS)}, got {replacement!r}")
        self.p = float(p)
        self.radius = radius
        self.tf = tf
        self.term_choice = term_choice
        self.replacement = replacement
        self.extra_fit_texts_from = extra_fit_texts_from
        self.extra_fit_augmentation = extra_fit_augmentation
        if not isinstance(extra_fit_positives, bool):
            raise ValueError(f"una: extra_fit_positives must be true or false, got {extra_fit_positives!r}")
        self.extra_fit_positives = extra_fit_positives
        self.stats: TfidfStatistics | None = None

    def __repr__(self) -> str:
        return (f"UNAAugmenter(p={self.p}, radius={self.radius}, tf={self.tf!r}, term_choice={self.term_choice!r}, "
                f"replacement={self.replacement!r}, fitted={self.stats is not None})")

    # Step 1 ------------------------------------------------------------------------------------
    def fit(self, corpus: list[str], positives: list[str] | None = None) -> UNAAugmenter:
        """TF-IDF over ``corpus`` (plus ``extra_fit_texts_from``, plus ``positives`` with
        ``extra_fit_positives``); call once before ``augment``."""
        texts = list(corpus)
        if self.extra_fit_texts_from:
            texts += read_fit_texts(self.extra_fit_texts_from, self.extra_fit_augmentation)
        if self.extra_fit_positives:
            if positives is None:
                raise ValueError("una: extra_fit_positives needs the positives' texts: in training they come from "
                                 "views.positive: cached; elsewhere use extra_fit_texts_from with a file")
            texts += positives
        self.stats = fit_tfidf(texts, self.tf)
        return self

    def _require_fit(self) -> TfidfStatistics:
        if self.stats is None:
            raise RuntimeError("una: call fit(corpus) before augment (UNA needs the corpus's TF-IDF)")
        return self.stats

    # Step 2 ------------------------------------------------------------------------------------
    def plan(self, sentence: str, rng: random.Random) -> SentencePlan:
        """Score the tokens of ``sentence`` and choose which to replace (one draw per token)."""
        stats = self._require_fit()
        text = sentence.lower()
        tokens = tokenize(text)
        terms = [t for _, _, t in tokens]
        length = len(terms)
        counts: dict[str, int] = {}
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
        scores, ranks = [], []
        log_tf = self.tf == "log"
        for term in terms:
            idf, rank = stats.idf_and_rank(term)
            frequency = counts[term] / length
            score = (math.log1p(frequency) if log_tf else frequency) * idf
            scores.append(score)
            ranks.append(rank if rank is not None else stats.rank_of_score(score))
        draws = [rng.random() for _ in terms]
        if self.term_choice == "tfidf":
            probabilities = replacement_probabilities(scores, self.p)
        else:
            # Ablation (random step 2): every token equally likely; one random token always replaced.
            probabilities = [self.p] * length
            if length and self.p < 1:
                probabilities[rng.randrange(length)] = 1.0
        chosen = [i for i in range(length) if draws[i] < probabilities[i]]
        return SentencePlan(text, tokens, scores, probabilities, ranks, chosen)

    # Step 3 ------------------------------------------------------------------------------------
    def sample_replacement(self, rank: int, rng: random.Random) -> int:
        """The rank of a replacement for the term at ``rank``: near it by max TF-IDF, or uniform."""
        stats = self._require_fit()
        if self.replacement == "random":
            # Ablation (random step 3): any term of the vocabulary, uniformly.
            return rng.randrange(stats.size)
        return stats.sample_rank(rank, self.radius, rng.random())

    def augment_one(self, sentence: str, seed: int) -> str:
        stats = self._require_fit()
        choice_seed, replace_seed, fallback_seed = _stream_seeds(seed, sentence)
        plan = self.plan(sentence, random.Random(choice_seed))
        if not plan.tokens:
            return sentence  # nothing to replace: unchanged, as the augmenter contract says
        replace_rng = random.Random(replace_seed)
        terms = [t for _, _, t in plan.tokens]
        for position in plan.chosen:
            terms[position] = stats.terms_by_rank[self.sample_replacement(plan.ranks[position], replace_rng)]
        if all(new == old for new, (_, _, old) in zip(terms, plan.tokens, strict=True)):
            terms = self._force_one_change(plan, terms, random.Random(fallback_seed))
        return _rebuild(plan.text, plan.tokens, terms)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        return [self.augment_one(sentence, seed) for sentence in sentences]

    def _force_one_change(self, plan: SentencePlan, terms: list[str], rng: random.Random) -> list[str]:
        """Every sampled replacement was the term itself: replace one random token by another term."""
        stats = self._require_fit()
        position = rng.randrange(len(terms))
        old = terms[position]
        new = old
        if self.replacement == "random":
            for _ in range(8):
                new = stats.terms_by_rank[rng.randrange(stats.size)]
                if new != old:
                    break
        else:
            new = stats.terms_by_rank[stats.sample_rank(plan.ranks[position], self.radius, rng.random(),
                                                        exclude_self=True)]
        terms = list(terms)
        terms[position] = new
        return terms  # unchanged only when the vocabulary has a single term

    def explain(self, sentence: str, seed: int) -> dict:
        """The negative of ``sentence`` with each token's TF-IDF, replacement probability and rank."""
        negative = self.augment_one(sentence, seed)
        plan = self.plan(sentence, random.Random(_stream_seeds(seed, sentence)[0]))
        columns = zip(plan.tokens, plan.scores, plan.probabilities, plan.ranks, strict=True)
        return {"original": sentence, "negative": negative,
                "tokens": [{"term": t, "tfidf": round(s, 4), "p": round(p, 3), "rank": r, "chosen": i in plan.chosen}
                           for i, ((_, _, t), s, p, r) in enumerate(columns)]}


def _rebuild(text: str, tokens: list[tuple[int, int, str]], terms: list[str]) -> str:
    """The lowercased text with each token's span replaced by its (new) term; spacing kept.

    Tokens written without a space between them, e.g. "(sa)", get one where a replacement would
    glue two words into one ("(sa)" -> "1850 backed james", not "1850backedjames").
    """
    pieces, cursor, last = [], 0, ""
    for (start, end, _), term in zip(tokens, terms, strict=True):
        gap = text[cursor:start]
        if not gap and last and _is_word_char(last) and _is_word_char(term[0]):
            gap = " "
        pieces.append(gap)
        pieces.append(term)
        cursor, last = end, term[-1]
    pieces.append(text[cursor:])
    return "".join(pieces)


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def read_fit_texts(path: str, augmentation: str | None = None) -> list[str]:
    """Extra TF-IDF documents: the augmented texts of a ``cselab augment`` jsonl cache (optionally
    only those of one ``augmentation``), or the lines of any other text file."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(
            f"una: extra_fit_texts_from: {path} not found (write it before training, e.g. "
            f"`cselab augment --aug back_translation --in CORPUS --out {path}`)")
    if file.name.endswith(".jsonl"):
        from cselab.augment.cache import read_cache  # the one reader of augmentation caches

        return [text for outputs in read_cache(file, augmentation).values() for text in outputs]
    with open(file, encoding="utf-8", errors="replace") as handle:
        return [line.rstrip("\r\n") for line in handle if line.strip()]
