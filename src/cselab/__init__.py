"""cselab: the Contrastive Sentence Embedding Lab.

>>> import cselab
>>> model = cselab.load("outputs/simcse")          # any cselab / sentence-transformers / HF encoder
>>> vectors = model.encode(["A man is playing a guitar.", "Someone plays music."])
"""
from __future__ import annotations

__version__ = "0.1.0"


def load(name_or_path: str, pooler: str = "auto", max_seq_len: int | None = None):
    """Load an encoder for ``encode(list[str]) -> ndarray``; ``minilm`` is the offline base model."""
    from cselab.model.encoder import SentenceEncoder

    return SentenceEncoder.from_pretrained(name_or_path, pooler=pooler, max_seq_len=max_seq_len)


__all__ = ["load", "__version__"]
