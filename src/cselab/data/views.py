"""Views: where each role of a training example comes from.

This is the one place where augmenters meet training. A recipe's ``views`` section says which
augmenter (if any) makes the positive, the hard negative and the discriminator label of each
anchor; each paper is a different view spec.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from cselab.config import ViewsConfig


@dataclass
class StepViews:
    anchors: list[str]  # the anchor texts as encoded (augmented when views.anchor is set)
    positives: list[str] | None = None  # None: dropout, the anchors encoded a second time
    negatives: list[str] | None = None  # hard negatives, one per anchor
    labels: list[int] | None = None  # augmentation type per anchor (discriminator target)
    label_texts: list[str] | None = None  # augmented texts whose type the labels give


def step_seed(seed: int, step: int, role: int) -> int:
    """A distinct, reproducible seed per (run, step, role), independent of worker scheduling."""
    return (seed * 1_000_003 + step * 31 + role) % (2**31 - 1)


class ViewBuilder:
    """Makes the views of one batch of anchors; runs in data-loader workers."""

    def __init__(self, views: ViewsConfig, corpus: list[str], seed: int):
        from cselab.augment import build_augmenter

        self.seed = seed
        self.negative_every = views.negative_every
        self.positive_prob = views.positive_prob
        self.anchor = None if views.anchor == "identity" else build_augmenter(views.anchor, **views.anchor_params)
        self.positive = (None if views.positive == "dropout"
                         else build_augmenter(views.positive, **views.positive_params))
        self.negative = None if views.negative == "none" else build_augmenter(views.negative, **views.negative_params)
        self.labelers = [build_augmenter(name, **views.label_params.get(name, {})) for name in views.label]
        for augmenter in (self.anchor, self.positive, self.negative, *self.labelers):
            fit = getattr(augmenter, "fit", None)
            if callable(fit):  # corpus-level statistics, e.g. UNA's TF-IDF
                fit(corpus)

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """Placeholder tokens any of the views may contain (the encoder adds them to its vocabulary)."""
        from cselab.augment.base import special_tokens

        return special_tokens(self.anchor, self.positive, self.negative, *self.labelers)

    def __call__(self, step: int, sentences: list[str]) -> StepViews:
        anchors = sentences if self.anchor is None else self.anchor.augment(sentences, step_seed(self.seed, step, 0))
        views = StepViews(anchors=anchors)
        if self.positive is not None:
            positives = self.positive.augment(sentences, step_seed(self.seed, step, 1))
            if self.positive_prob < 1:
                # Rows left out keep the anchor text: their positive is the dropout view.
                rng = random.Random(step_seed(self.seed, step, 4))
                positives = [p if rng.random() < self.positive_prob else a
                             for p, a in zip(positives, anchors, strict=True)]
            views.positives = positives
        if self.negative is not None and step % self.negative_every == 0:
            views.negatives = self.negative.augment(sentences, step_seed(self.seed, step, 2))
        if self.labelers:
            rng = random.Random(step_seed(self.seed, step, 3))
            choice = [rng.randrange(len(self.labelers)) for _ in sentences]
            texts = list(sentences)
            for k, labeler in enumerate(self.labelers):
                rows = [i for i, c in enumerate(choice) if c == k]
                if rows:
                    out = labeler.augment([sentences[i] for i in rows], step_seed(self.seed, step, 10 + k))
                    for i, text in zip(rows, out, strict=True):
                        texts[i] = text
            # Label 0 is "no augmentation": the text came back unchanged.
            views.labels = [choice[i] + 1 if texts[i] != sentences[i] else 0 for i in range(len(sentences))]
            views.label_texts = texts
        return views
