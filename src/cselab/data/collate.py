"""Batches: one padded tensor batch per step.

Every view of a step is tokenised together (dynamic padding) so the encoder runs once per step;
``roles`` says which rows are anchors, positives, negatives and label views. An objective with an
MLM term also gets its masked tokens here, so all per-step data work runs in the loader's workers.
Which sentences a step takes is the plan's (``data/plan.py``), read by ``data/step_dataset.py``. A
packed pre-training run steps through token blocks instead of sentences, with the same plan and
batches (``data/packing.py: PackedCollator``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cselab.data.masking import MaskedBatch, MlmMasking
from cselab.data.step_dataset import StepItem
from cselab.data.token_cache import SentenceTokenizer
from cselab.data.views import StepViews, ViewBuilder, step_seed
from cselab.losses.base import ON_DEMAND, VIEW_ROLES

MASKING_ROLE = 5  # step_seed role of the MLM masks (0-4 and 10+ are the views'; 1000 + rank other processes')


def masking_role(rank: int) -> int:
    """Each process masks its own rows with its own seed (rank 0 keeps the single-process one)."""
    return MASKING_ROLE if rank == 0 else 1000 + rank


@dataclass
class Batch:
    """One step's tensors. ``features`` holds every contrastive view (rows by ``roles``); token
    counts are host integers, counted here so the training step never reads them off the device."""

    step: int
    num_sentences: int
    features: dict[str, torch.Tensor] = field(default_factory=dict)
    roles: dict[str, slice] = field(default_factory=dict)
    labels: torch.Tensor | None = None  # augmentation type per anchor (AugCSE's discriminator)
    masked: MaskedBatch | None = None  # the MLM term's input
    views: StepViews | None = None  # the texts behind the rows (for inspection and tests)
    real_tokens: int = 0
    padded_tokens: int = 0

    def pin_memory(self) -> Batch:
        """Page-locked tensors (the loader calls this when training on a GPU): the step's copies to the
        device are then truly asynchronous."""
        self.features = {k: v.pin_memory() for k, v in self.features.items()}
        if self.labels is not None:
            self.labels = self.labels.pin_memory()
        if self.masked is not None:
            self.masked = MaskedBatch({k: v.pin_memory() for k, v in self.masked.features.items()},
                                      self.masked.positions.pin_memory(), self.masked.labels.pin_memory())
        return self


class Collator:
    """Views, tokenisation and MLM masking, in the worker: (step, sentences[, line numbers]) -> Batch.

    ``encode_views``: whether any objective term reads the contrastive views (an MLM-only objective
    does not); ``masking``: the MLM masker, when a term predicts masked tokens; ``cached``: reads
    the ids of rows that are corpus lines from the corpus's token cache (given the line numbers).
    """

    def __init__(self, tokenize, view_builder: ViewBuilder, encode_views: bool = True,
                 masking: MlmMasking | None = None, rank: int = 0, reads: frozenset[str] = frozenset(),
                 cached: SentenceTokenizer | None = None):
        self.tokenize, self.cached = tokenize, cached
        self.view_builder = view_builder
        self.encode_views = encode_views
        # The roles' functions themselves (not their names): a data-loader worker started by spawn has
        # only what was pickled with the collator, not the registrations made in the parent process.
        # ``reads``: the input fields some term needs or wants; a role made on demand is made when read.
        self.roles = [(role, VIEW_ROLES.get(role)) for role in VIEW_ROLES if role not in ON_DEMAND or role in reads]
        self.masking = masking
        self.masking_role = masking_role(rank)

    def features(self, texts: list[str], lines: list[int | None] | None) -> dict[str, torch.Tensor]:
        if self.cached is None or lines is None:
            return dict(self.tokenize(texts))
        return self.cached(texts, lines)

    def masked(self, sentences: list[str], seed: int, lines: list[int | None] | None = None) -> MaskedBatch:
        """The sentences tokenised and masked for the MLM term (its pass reads no views)."""
        return self.masking(self.features(sentences, lines), seed)

    def __call__(self, item: StepItem) -> Batch:
        step, sentences = item[0], item[1]
        corpus_lines = [int(i) for i in item[2]] if len(item) > 2 else None
        batch = Batch(step=step, num_sentences=len(sentences))
        if self.encode_views:
            views = self.view_builder(step, sentences)
            texts, roles = [], {}
            lines: list[int | None] = []
            for role, make_texts in self.roles:  # the roles' rows in their declared order (losses/base.py)
                rows = make_texts(views)
                if rows is not None:
                    roles[role] = slice(len(texts), len(texts) + len(rows))
                    texts.extend(rows)
                    if corpus_lines is not None:  # row i of a role stands for sentence i: unchanged, it is that line
                        lines.extend(line if text == sentence else None
                                     for text, sentence, line in zip(rows, sentences, corpus_lines, strict=True))
            batch.features = self.features(texts, None if corpus_lines is None else lines)
            batch.roles, batch.views = roles, views
            mask = batch.features["attention_mask"].numpy()
            batch.real_tokens, batch.padded_tokens = int(mask.sum()), mask.size
            if views.labels is not None:
                batch.labels = torch.tensor(views.labels)
        if self.masking is not None:
            # The original sentences (CLEAR augments both contrastive views; MLM reads the originals).
            batch.masked = self.masked(sentences, step_seed(self.view_builder.seed, step, self.masking_role),
                                       corpus_lines)
            if not self.encode_views:  # MLM alone: its pass is the step's only one, its tokens the work done
                mask = batch.masked.features["attention_mask"].numpy()
                batch.real_tokens, batch.padded_tokens = int(mask.sum()), mask.size
        return batch
