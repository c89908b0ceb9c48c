"""Batches: one padded tensor batch per step.

Every view of a step is tokenised together (dynamic padding) so the encoder runs once per step;
``roles`` says which rows are anchors, positives, negatives and label views. An augmenter that edits
token ids rather than text (ESimCSE's sub-word repetition, ``Augmenter.edits_token_ids``) edits its
role's rows here, after tokenisation and truncation, and the batch is padded again. The token-level passes
the objective reads (``losses/base.py: TOKEN_PASSES``, e.g. MLM's masking) make their tokens here too,
from the step's original sentences, so all per-step data work runs in the loader's workers. Which
sentences a step takes is the plan's (``data/plan.py``), read by ``data/step_dataset.py``. A packed
pre-training run steps through token blocks instead of sentences, with the same plan and batches
(``data/packing.py: PackedCollator``).
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from cselab.augment.base import sentence_seed
from cselab.data.seeds import step_seed, token_pass_stream
from cselab.data.step_dataset import StepItem
from cselab.data.token_cache import SentenceTokenizer
from cselab.data.views import StepViews, TokenEdit, ViewBuilder
from cselab.losses.base import ON_DEMAND, VIEW_ROLES, TokenBatch

#: A token pass's collator side (``TokenPass.preparer``): (tokenised sentences, seed) -> its TokenBatch.
Preparer = Callable[[dict[str, torch.Tensor], int], TokenBatch]


@dataclass
class Batch:
    """One step's tensors. ``features`` holds every contrastive view (rows by ``roles``); token
    counts are host integers, counted here so the training step never reads them off the device."""

    step: int
    num_sentences: int
    features: dict[str, torch.Tensor] = field(default_factory=dict)
    roles: dict[str, slice] = field(default_factory=dict)
    labels: torch.Tensor | None = None  # augmentation type per anchor (AugCSE's discriminator)
    tokens: dict[str, TokenBatch] = field(default_factory=dict)  # each token pass's input, by pass name
    views: StepViews | None = None  # the texts behind the rows (for inspection and tests)
    real_tokens: int = 0
    padded_tokens: int = 0

    @property
    def masked(self) -> TokenBatch | None:
        """The MLM pass's input (its tokens masked), on steps of a run that masks."""
        return self.tokens.get("masked")

    def pin_memory(self) -> Batch:
        """Page-locked tensors (the loader calls this when training on a GPU): the step's copies to the
        device are then truly asynchronous."""
        self.features = {k: v.pin_memory() for k, v in self.features.items()}
        if self.labels is not None:
            self.labels = self.labels.pin_memory()
        self.tokens = {name: tokens.pin_memory() for name, tokens in self.tokens.items()}
        return self


class TokenPasses:
    """The collator side of a run's token passes: each one's preparer with its own seed stream
    (``data/seeds.py``), in the run's pass order."""

    def __init__(self, preparers: dict[str, Preparer] | None, seed: int, rank: int = 0):
        self.seed = seed
        self.streams = {name: (prepare, token_pass_stream(position, rank))
                        for position, (name, prepare) in enumerate((preparers or {}).items())}

    def __bool__(self) -> bool:
        return bool(self.streams)

    def make(self, name: str, features: dict[str, torch.Tensor], seed: int) -> TokenBatch:
        return self.streams[name][0](features, seed)

    def for_step(self, step: int, features: dict[str, torch.Tensor]) -> dict[str, TokenBatch]:
        """Every pass's tokens of the step's sentences (``features``: them tokenised)."""
        return {name: prepare(features, step_seed(self.seed, step, stream))
                for name, (prepare, stream) in self.streams.items()}


def count_tokens(batch: Batch, features: dict[str, torch.Tensor]) -> None:
    """The real and padded token counts of the features the step's main pass runs on."""
    mask = features["attention_mask"].numpy()
    batch.real_tokens, batch.padded_tokens = int(mask.sum()), mask.size


def edit_token_ids(features: dict[str, torch.Tensor], texts: list[str], roles: dict[str, slice],
                   edits: dict[str, TokenEdit], views: ViewBuilder) -> dict[str, torch.Tensor]:
    """The batch with the rows of each role in ``edits`` edited by its augmenter's ``token_plan`` (on the
    row's tokens as tokenised and truncated, each row with its sentence's own generator), every feature
    of a row taken along (ids, mask, segment ids), padded again to the longest row."""
    real = features["attention_mask"].bool()
    plans: dict[int, torch.Tensor] = {}
    rng = random.Random(0)
    for role, edit in edits.items():
        if role not in roles:
            continue
        for i in edit.rows:
            row = roles[role].start + i
            rng.seed(sentence_seed(edit.seed, texts[row]))
            plan = edit.augmenter.token_plan(features["input_ids"][row][real[row]].tolist(), rng)
            if plan is not None:
                plans[row] = torch.tensor(plan, dtype=torch.long)
    if not plans:
        return features
    width = max(features["input_ids"].shape[1], *(len(plan) for plan in plans.values()))

    def place(target: torch.Tensor, values: torch.Tensor) -> None:  # on the tokenizer's side, the pads on the other
        if views.pad_left:
            target[..., width - values.shape[-1]:] = values
        else:
            target[..., :values.shape[-1]] = values

    edited = {}
    for key, value in features.items():
        pad = views.padding.get(key, 0)
        edited[key] = value.new_full((value.shape[0], width), pad)
        place(edited[key], value)
        for row, plan in plans.items():
            edited[key][row] = pad
            place(edited[key][row], value[row][real[row]][plan])
    return edited


class Collator:
    """Views, tokenisation and the token passes, in the worker: (step, sentences[, line numbers]) -> Batch.

    ``encode_views``: whether any objective term reads the contrastive views (an MLM-only objective
    does not); ``passes``: each token pass's preparer by name (``TokenPass.preparer``), for the passes
    some term reads; ``cached``: reads the ids of rows that are corpus lines from the corpus's token
    cache (given the line numbers).
    """

    def __init__(self, tokenize, view_builder: ViewBuilder, encode_views: bool = True,
                 passes: dict[str, Preparer] | None = None, rank: int = 0, reads: frozenset[str] = frozenset(),
                 cached: SentenceTokenizer | None = None):
        self.tokenize, self.cached = tokenize, cached
        self.view_builder = view_builder
        self.encode_views = encode_views
        # The roles' functions themselves (not their names): a data-loader worker started by spawn has
        # only what was pickled with the collator, not the registrations made in the parent process.
        # ``reads``: the input fields some term needs or wants; a role made on demand is made when read.
        self.roles = [(role, VIEW_ROLES.get(role)) for role in VIEW_ROLES if role not in ON_DEMAND or role in reads]
        self.passes = TokenPasses(passes, view_builder.seed, rank)

    def features(self, texts: list[str], lines: list[int | None] | None) -> dict[str, torch.Tensor]:
        if self.cached is None or lines is None:
            return dict(self.tokenize(texts))
        return self.cached(texts, lines)

    def token_batch(self, name: str, sentences: list[str], seed: int,
                    lines: list[int | None] | None = None) -> TokenBatch:
        """The sentences tokenised and made into the token pass ``name``'s input with ``seed`` (the held-out
        lines' validation batches)."""
        return self.passes.make(name, self.features(sentences, lines), seed)

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
            if views.token_edits:  # after truncation (ESimCSE's repetition makes a positive longer than max_seq_len)
                batch.features = edit_token_ids(batch.features, texts, roles, views.token_edits, self.view_builder)
            batch.roles, batch.views = roles, views
            count_tokens(batch, batch.features)
            if views.labels is not None:
                batch.labels = torch.tensor(views.labels)
        if self.passes:
            # The original sentences (CLEAR augments both contrastive views; its MLM reads the originals).
            originals = self.features(sentences, corpus_lines)
            batch.tokens = self.passes.for_step(step, originals)
            if not self.encode_views:  # token passes alone: their run is the step's work
                count_tokens(batch, originals)
        return batch
