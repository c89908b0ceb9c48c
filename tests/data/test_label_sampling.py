"""AugCSE's label views are drawn once per sentence (Tang et al. 2022, section 4.2 and footnote 6): the
same augmentation type and text at every step a sentence is in, in epoch 1 as in epoch 4, whatever its
batch, its position in it or the number of processes; ``views.label_sampling: per_step`` draws again
at every step."""
from __future__ import annotations

import random

import pytest

from cselab.config import load_config
from cselab.data.plan import StepPlan
from cselab.data.views import ViewBuilder

LABELS = "views.label=[eda_random_swap, eda_random_deletion, random_crop, word_repetition]"


def corpus(n: int = 96) -> list[str]:
    rng = random.Random(3)
    words = "the a cat dog runs sits quickly slowly under over mat park river old young red blue".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(6, 12))) for _ in range(n)]


def views_of(sampling: str, sentences: list[str]) -> ViewBuilder:
    config = load_config("augcse", [LABELS, "objective[1].num_labels=5", f"views.label_sampling={sampling}"])
    return ViewBuilder(config.views, sentences, seed=42)


def label_views_by_sentence(builder: ViewBuilder, plan: StepPlan, sentences: list[str], epoch: int,
                            processes: int = 1) -> dict[str, tuple[int, str]]:
    """Each sentence's (label, text) over one epoch, each step's batch split among ``processes``."""
    seen = {}
    for step in range(epoch * plan.steps_per_epoch, (epoch + 1) * plan.steps_per_epoch):
        _, indices = plan[step]
        share = len(indices) // processes
        for rank in range(processes):
            batch = [sentences[i] for i in indices[rank * share:(rank + 1) * share]]
            views = builder(step, batch)
            seen.update({s: (label, text) for s, label, text in zip(batch, views.labels, views.label_texts,
                                                                    strict=True)})
    return seen


def test_a_sentence_gets_the_same_augmentation_in_epoch_1_and_epoch_4():
    sentences = corpus()
    builder = views_of("per_sentence", sentences)
    plan = StepPlan(len(sentences), 16, epochs=4, seed=42)
    first = label_views_by_sentence(builder, plan, sentences, epoch=0)
    fourth = label_views_by_sentence(builder, plan, sentences, epoch=3)
    assert len(first) == len(sentences) and first == fourth
    assert len({label for label, _ in first.values()}) >= 4  # the types are still drawn, one per sentence
    # Other batches, another process count and another plan seed: the same draws.
    other_plan = StepPlan(len(sentences), 8, epochs=1, seed=7)
    assert label_views_by_sentence(builder, other_plan, sentences, epoch=0, processes=2) == first


def test_per_step_sampling_draws_again_at_every_step():
    sentences = corpus()
    builder = views_of("per_step", sentences)
    plan = StepPlan(len(sentences), 16, epochs=4, seed=42)
    first = label_views_by_sentence(builder, plan, sentences, epoch=0)
    fourth = label_views_by_sentence(builder, plan, sentences, epoch=3)
    assert sum(first[s] != fourth[s] for s in sentences) > len(sentences) // 3


def test_label_sampling_is_checked_by_name():
    from cselab.config import ConfigError

    with pytest.raises(ConfigError, match="views.label_sampling: 'per_epoch' is not one of per_sentence, per_step"):
        load_config("augcse", ["views.label_sampling=per_epoch"])
