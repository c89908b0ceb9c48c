"""Sequence packing for MLM pre-training: the corpus as blocks of ``max_seq_len`` tokens, no padding.

A sentence of ~13 tokens padded to a batch's longest leaves most of each row to padding. Packed,
the training lines' token ids (``data/token_cache.py``: tokenised once, cached) are laid end to
end in corpus order and cut into blocks of ``max_seq_len`` minus the special tokens; the collator
frames each block as ``[CLS] ... [SEP]`` (the tokenizer's own special tokens). Every id of every
training line is in exactly one block, in order: a line longer than the room left in a block
continues in the next one, and nothing is dropped. Only the last block (of each document, with
``documents``) may be shorter. With ``documents`` a block never spans two documents (blank lines
in the corpus file separate them, as in BERT's pre-training data).

A step is ``batch_size`` blocks, chosen by the usual seeded :class:`~cselab.data.plan.StepPlan`
over block numbers: the step number alone is still the data position, so a resumed run reads and
masks exactly the blocks the interrupted one would have.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch

from cselab.data.collate import Batch, Preparer, TokenPasses, count_tokens
from cselab.data.token_cache import TokenIds, padded
from cselab.losses.base import TokenBatch
from cselab.model.encoder import special_frame


class PackedBlocks(Sequence[np.ndarray]):
    """The token stream of ``lines`` (corpus line numbers, sorted) in blocks of at most ``block_tokens`` ids.

    Block b is the stream's positions ``[block_begins[b], block_ends[b])``; ``line_begins`` and
    ``line_ends`` place each line in the stream.
    """

    def __init__(self, tokens: TokenIds, lines: np.ndarray, block_tokens: int, documents: bool = False):
        if block_tokens < 1:
            raise ValueError("block_tokens must be >= 1")
        self.tokens, self.block_tokens, self.documents = tokens, block_tokens, documents
        self.lines = np.asarray(lines, dtype=np.int64)
        lengths = tokens.lengths()[self.lines]
        self.line_ends = np.cumsum(lengths)
        self.line_begins = self.line_ends - lengths
        first_of_document = np.zeros(len(self.lines), dtype=bool)
        first_of_document[:1] = True
        if documents:
            # Document numbers of the whole corpus: a held-out first line still starts its document.
            document = np.cumsum(tokens.document_starts)[self.lines]
            first_of_document[1:] = document[1:] != document[:-1]
        document_begins = self.line_begins[first_of_document]
        total = int(self.line_ends[-1]) if len(self.lines) else 0
        document_ends = np.append(document_begins[1:], total) if len(document_begins) else document_begins
        blocks = -(-(document_ends - document_begins) // block_tokens)  # per document, rounded up
        within = np.arange(blocks.sum()) - np.repeat(np.cumsum(blocks) - blocks, blocks)
        self.block_begins = np.repeat(document_begins, blocks) + within * block_tokens
        self.block_ends = np.minimum(self.block_begins + block_tokens, np.repeat(document_ends, blocks))

    def __len__(self) -> int:
        return len(self.block_begins)

    def __getitem__(self, b: int) -> np.ndarray:  # type: ignore[override]
        begin, end = int(self.block_begins[b]), int(self.block_ends[b])
        row = int(np.searchsorted(self.line_ends, begin, side="right"))  # the line holding position begin
        pieces = []
        while begin < end:
            taken = min(end, int(self.line_ends[row])) - begin
            first = int(self.tokens.starts[self.lines[row]]) + begin - int(self.line_begins[row])
            pieces.append(self.tokens.ids[first:first + taken])
            begin += taken
            row += 1
        return np.concatenate(pieces).astype(np.int64)

    def approximate_lengths(self) -> np.ndarray:
        return self.block_ends - self.block_begins

    def fingerprint(self) -> str:
        """Identity of the blocks: the corpus and tokenizer (the cache key), the lines, the cut."""
        digest = hashlib.sha256(f"{self.tokens.key}|{self.block_tokens}|{self.documents}".encode())
        digest.update(self.lines.tobytes())
        return digest.hexdigest()


class PackedCollator:
    """(step, blocks) -> Batch: each block framed by the tokenizer's special tokens, made into each token
    pass's input (MLM's masks) with the step's seed, as ``Collator`` does with sentences."""

    def __init__(self, tokenizer, passes: dict[str, Preparer], seed: int, rank: int = 0):
        self.seed, self.pad_id = seed, tokenizer.pad_token_id
        self.prefix, self.suffix = special_frame(tokenizer)
        self.passes = TokenPasses(passes, seed, rank)

    def tensors(self, blocks: list[np.ndarray]) -> dict[str, torch.Tensor]:
        return padded([self.prefix + block.tolist() + self.suffix for block in blocks], self.pad_id)

    def token_batch(self, name: str, blocks: list[np.ndarray], seed: int) -> TokenBatch:
        return self.passes.make(name, self.tensors(blocks), seed)

    def __call__(self, item: tuple[int, list[np.ndarray]] | tuple[int, list[np.ndarray], np.ndarray]) -> Batch:
        step, blocks = item[0], item[1]  # (the blocks' numbers, when given, are not needed)
        features = self.tensors(blocks)
        batch = Batch(step=step, num_sentences=len(blocks), tokens=self.passes.for_step(step, features))
        count_tokens(batch, features)
        return batch


def block_tokens(tokenizer, max_seq_len: int) -> int:
    """Ids of corpus text per block: the sequence length less the special tokens framing a block."""
    prefix, suffix = special_frame(tokenizer)
    return max_seq_len - len(prefix) - len(suffix)
