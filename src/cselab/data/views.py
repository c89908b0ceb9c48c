"""Views: where each role of a training example comes from.

This is the one place where augmenters meet training. A recipe's ``views`` section says which
augmenter (if any) makes the positive, the hard negative and the discriminator label of each
anchor; each paper is a different view spec.
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from cselab.augment.base import Augmenter, sentence_seed, special_tokens
from cselab.config import ViewsConfig
from cselab.config.validation import label_augmenters
from cselab.data.seeds import WHOLE_RUN, Stream, step_seed
from cselab.errors import ConfigError


@dataclass
class TokenEdit:
    """An augmenter's edit of a role's token ids, made by the collator once the rows are tokenised
    (``Augmenter.edits_token_ids``): each of ``rows`` (indices into the role) with the generator of
    ``sentence_seed(seed, its text)``, as text augmenters seed a sentence."""

    augmenter: Augmenter
    seed: int
    rows: list[int]


@dataclass
class StepViews:
    anchors: list[str]  # the anchor texts as encoded (augmented when views.anchor is set)
    positives: list[str] | None = None  # None: dropout, the anchors encoded a second time
    negatives: list[str] | None = None  # hard negatives, one per anchor
    labels: list[int] | None = None  # augmentation type per anchor (discriminator target)
    label_texts: list[str] | None = None  # augmented texts whose type the labels give
    token_edits: dict[str, TokenEdit] = field(default_factory=dict)  # by role: edits of its token ids


class ViewBuilder:
    """Makes the views of one batch of anchors; runs in data-loader workers."""

    def __init__(self, views: ViewsConfig, corpus: list[str], seed: int):
        self.seed = seed
        self.negative_every = views.negative_every
        self.positive_prob = views.positive_prob
        self.anchor = None if views.anchor == "identity" else _build("anchor", views.anchor, views.anchor_params)
        self.positive = None if views.positive == "dropout" else _build("positive", views.positive,
                                                                        views.positive_params)
        self.negative = None if views.negative == "none" else _build("negative", views.negative,
                                                                     views.negative_params)
        self.labelers = [_build(key, name, params) for key, name, params in label_augmenters(views)]
        self.label_sampling = views.label_sampling
        # The pad value of each tokenised feature, and the side (use_tokenizer): for edits of token ids.
        self.padding: dict[str, int] = {}
        self.pad_left = False
        refuse_token_edits(self.anchor, self.positive, self.negative, self.labelers)
        # Corpus-level work before the first step: UNA's TF-IDF, a cache of paraphrases built for the
        # whole corpus. The positives first: UNA + paraphrasing fits its TF-IDF on them too.
        for augmenter in (self.anchor, self.positive, *self.labelers):
            if augmenter is not None:
                augmenter.fit(corpus)
        if self.negative is not None and self.negative.extra_fit_positives:
            self.negative.fit(corpus, positives=self._positive_texts(views.positive))
        elif self.negative is not None:
            self.negative.fit(corpus)

    def _positive_texts(self, positive_name: str) -> list[str]:
        texts = None if self.positive is None else self.positive.augmented_texts()
        if texts is None:
            raise ConfigError(f"views.negative_params.extra_fit_positives: needs positives computed for the whole "
                              f"corpus (views.positive: cached), not {positive_name}")
        return texts

    @property
    def augmenters(self) -> list[Augmenter]:
        """Every augmenter of the views, those inside compositions included."""
        return [part for augmenter in (self.anchor, self.positive, self.negative, *self.labelers)
                for part in _parts(augmenter)]

    def use_tokenizer(self, tokenizer) -> None:
        """Augmenters that count a model's tokens (CLEAR's, at the token level) count the encoder's:
        call after the encoder has added ``special_tokens``."""
        for augmenter in self.augmenters:
            augmenter.use_tokenizer(tokenizer)
        # What the collator pads with when an edit of token ids changes the rows' lengths.
        self.padding = {"input_ids": tokenizer.pad_token_id or 0,
                        "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0) or 0}
        self.pad_left = tokenizer.padding_side == "left"

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """Placeholder tokens any of the views may contain (the encoder adds them to its vocabulary)."""
        return special_tokens(self.anchor, self.positive, self.negative, *self.labelers)

    def __call__(self, step: int, sentences: list[str]) -> StepViews:
        anchors = sentences if self.anchor is None else self.anchor.augment(sentences,
                                                                             step_seed(self.seed, step, Stream.ANCHOR))
        views = StepViews(anchors=anchors)
        if self.positive is not None:
            seed = step_seed(self.seed, step, Stream.POSITIVE)
            edits_ids = getattr(self.positive, "edits_token_ids", False)  # an object with augment() alone serves too
            # The text stays the sentence where the augmenter edits its token ids (the collator does).
            positives = list(sentences) if edits_ids else self.positive.augment(sentences, seed)
            kept = range(len(sentences))
            if self.positive_prob < 1:
                # Rows left out keep the anchor text: their positive is the dropout view.
                rng = random.Random(step_seed(self.seed, step, Stream.POSITIVE_SHARE))
                kept = [i for i in range(len(sentences)) if rng.random() < self.positive_prob]
                chosen = set(kept)
                positives = [p if i in chosen else a for i, (p, a) in enumerate(zip(positives, anchors, strict=True))]
            views.positives = positives
            if edits_ids:
                views.token_edits["positive"] = TokenEdit(self.positive, seed, list(kept))
        if self.negative is not None and step % self.negative_every == 0:
            views.negatives = self.negative.augment(sentences, step_seed(self.seed, step, Stream.NEGATIVE))
        if self.labelers:
            views.labels, views.label_texts = self.label_views(step, sentences)
        return views

    def label_views(self, step: int, sentences: list[str]) -> tuple[list[int], list[str]]:
        """Each sentence's augmentation type (0: its text came back unchanged) and augmented text.

        ``per_sentence`` (AugCSE, section 4.2 and footnote 6: one augmentation sampled per sentence, once):
        the type is drawn from the sentence's own seed and every augmenter's seed is the run's, so a
        sentence gets the same type and text at every step it is in, in every epoch, whatever the batch
        order or the number of processes (augmenters seed each sentence by its text: augment/base.py).
        ``per_step``: both are drawn again at every step."""
        once = self.label_sampling == "per_sentence"
        draw_step = WHOLE_RUN if once else step
        if once:
            choice_seed = step_seed(self.seed, WHOLE_RUN, Stream.LABEL_CHOICE)
            choice = [random.Random(sentence_seed(choice_seed, s)).randrange(len(self.labelers)) for s in sentences]
        else:
            rng = random.Random(step_seed(self.seed, step, Stream.LABEL_CHOICE))
            choice = [rng.randrange(len(self.labelers)) for _ in sentences]
        texts = list(sentences)
        for k, labeler in enumerate(self.labelers):
            rows = [i for i, c in enumerate(choice) if c == k]
            if rows:
                out = labeler.augment([sentences[i] for i in rows], step_seed(self.seed, draw_step, Stream.LABELER + k))
                for i, text in zip(rows, out, strict=True):
                    texts[i] = text
        return [choice[i] + 1 if texts[i] != sentences[i] else 0 for i in range(len(sentences))], texts


def refuse_token_edits(anchor: Augmenter | None, positive: Augmenter | None, negative: Augmenter | None,
                       labelers: list[Augmenter]) -> None:
    """An augmenter that edits token ids (``Augmenter.edits_token_ids``) serves as ``views.positive``
    alone: its edit is made on the positive's rows, which no other role or composition sees."""
    roles = [("views.anchor", anchor), ("views.negative", negative), *(("views.label", one) for one in labelers),
             *(("views.positive", part) for part in (positive.parts if positive is not None else ()))]
    for key, augmenter in roles:
        for part in _parts(augmenter):
            if getattr(part, "edits_token_ids", False):
                raise ConfigError(f"{key}: {part.name} (as set) edits the encoder's token ids after truncation; "
                                  f"only views.positive takes it, on its own")


def _build(role: str, name: str, params: dict):
    """The augmenter of one role; a value it refuses is the recipe's error, named by its key."""
    from cselab.augment import build_augmenter

    try:
        augmenter = build_augmenter(name, **params)
    except ValueError as exc:
        key = role if role.startswith("label") else f"{role}_params"  # label_params.NAME, label[i]
        raise ConfigError(f"views.{key}: {exc}") from None
    return augmenter


def _parts(augmenter: Augmenter | None) -> Iterator[Augmenter]:
    """``augmenter`` and, recursively, the augmenters it is made of (``Augmenter.parts``)."""
    if augmenter is None:
        return
    yield augmenter
    for part in augmenter.parts:
        yield from _parts(part)
