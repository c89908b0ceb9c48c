"""ESimCSE's word repetition (augment/lexical.py: word_repetition) against the paper's count rule and the
authors' code (caskcsg/sentemb ESimCSE/train.py:461-530), and its sub-word form, made by the collator on
the token ids after truncation (data/collate.py: edit_token_ids)."""
from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from cselab.augment import build_augmenter
from cselab.config import ConfigError, load_config
from cselab.data.collate import Collator
from cselab.data.views import ViewBuilder

LONG = ("the old teacher carefully carries an enormous hand drawn map of the winding river through the quiet "
        "garden while the children follow her slowly past the small houses and the singing birds at night")


def subword(tokenizer, **params):
    augmenter = build_augmenter("word_repetition", unit="subword", **params)
    augmenter.use_tokenizer(tokenizer)
    return augmenter


def duplicated(plan: list[int]) -> list[int]:
    return [i for i, n in Counter(plan).items() if n == 2]


def repeats_in_place(anchor: list[int], positive: list[int]) -> bool:
    """Whether ``positive`` is ``anchor`` with some of its inner pieces (not the first or the last)
    written twice in place: each anchor piece once or twice, in order, nothing else."""
    reachable = {(0, 0)}
    for i, piece in enumerate(anchor):
        times = (1, 2) if 0 < i < len(anchor) - 1 else (1,)
        reachable = {(i + 1, j + t) for _, j in reachable for t in times if positive[j:j + t] == [piece] * t}
    return (len(anchor), len(positive)) in reachable


def test_the_paper_rule_on_sub_words(tiny_encoder):
    """dup_len uniform in [0, max(2, int(0.32 N))] (both ends), N the sentence's pieces ([CLS]/[SEP] not
    counted), at most N; positions uniform without replacement among the pieces; each repeated in place."""
    tokenizer = tiny_encoder.tokenizer
    augmenter = subword(tokenizer)
    for text, pieces in (("birds sing", 2), ("a cat sees the red ball in the garden today", 10)):
        ids = tokenizer(text)["input_ids"]
        assert len(ids) == pieces + 2
        counts, positions = Counter(), Counter()
        rng = random.Random(0)
        for _ in range(3000):
            plan = augmenter.token_plan(ids, rng) or list(range(len(ids)))
            assert sorted(plan) == plan and sorted(set(plan)) == list(range(len(ids)))  # in place, nothing lost
            assert max(Counter(plan).values()) <= 2  # without replacement
            counts[len(plan) - len(ids)] += 1
            positions.update(duplicated(plan))
        top = min(pieces, max(2, int(0.32 * pieces)))
        assert set(counts) == set(range(top + 1))  # every count of the range, none outside it
        assert set(positions) == set(range(1, pieces + 1))  # every piece, never [CLS] (0) nor [SEP]


def authors_bpe(input_ids: list[int], dup_rate: float, rng: random.Random) -> list[int]:
    """train.py:516-525 (dup_type=bpe) with a generator in place of the module's own."""
    input_len = len(input_ids)
    if int(dup_rate * input_len) > 0:
        add_len = rng.randrange(min(10, int(dup_rate * input_len)))
        dup = sorted(rng.sample(range(1, input_len - 1), add_len))
        new_input_ids = []
        for i, _id in enumerate(input_ids):
            if i in dup:
                new_input_ids.append(_id)
            new_input_ids.append(_id)
        return new_input_ids
    return input_ids


def test_the_code_rule_is_the_authors_bpe_repetition(tiny_encoder):
    tokenizer = tiny_encoder.tokenizer
    augmenter = subword(tokenizer, count="code")
    words = LONG.split()
    for n in (1, 3, 5, 9, 20, len(words)):
        ids = tokenizer(" ".join(words[:n]), truncation=True, max_length=32)["input_ids"]
        for seed in range(50):
            plan = augmenter.token_plan(ids, random.Random(seed))
            ours = ids if plan is None else [ids[i] for i in plan]
            assert ours == authors_bpe(ids, 0.32, random.Random(seed))
    # Up to 4 pieces (L <= 6): never changed; at L = 32 up to 9 repeats (41 tokens).
    short = tokenizer("a cat sees it")["input_ids"]
    assert all(augmenter.token_plan(short, random.Random(s)) is None for s in range(100))
    full = tokenizer(LONG, truncation=True, max_length=32)["input_ids"]
    lengths = {len(augmenter.token_plan(full, random.Random(s)) or full) for s in range(500)}
    assert lengths == set(range(32, 42))


def test_the_code_rule_on_words_is_the_authors_word_repetition():
    """train.py:465-476 (dup_type=word): randrange(min(10, n, max(2, int(rate n)))) words, never the last."""
    augmenter = build_augmenter("word_repetition", count="code")
    words = LONG.split()
    for n in (1, 2, 4, 12, len(words)):
        for seed in range(50):
            rng = random.Random(seed)
            add_len = rng.randrange(min(10, n, max(2, int(0.32 * n))))
            dup = rng.sample(range(0, n - 1), add_len)
            expected = [w for i, word in enumerate(words[:n]) for w in ([word, word] if i in dup else [word])]
            assert (augmenter.augment_tokens(words[:n], random.Random(seed)) or words[:n]) == expected


def test_after_truncation_the_positive_is_longer_than_its_anchor(tiny_encoder):
    """The collator repeats pieces of the truncated rows: a sentence cut at max_seq_len keeps its longer
    positive (whole-word repetition in the text, before truncation, loses it), re-padded, mask and
    token counts following."""
    sentences = [f"{LONG} {i}" for i in range(12)] + ["birds sing", "a cat sees the red ball"]
    config = load_config("esimcse", [])
    views = ViewBuilder(config.views, sentences, seed=0)
    views.use_tokenizer(tiny_encoder.tokenizer)
    batch = Collator(tiny_encoder.tokenize, views)((3, sentences))
    ids, mask = batch.features["input_ids"], batch.features["attention_mask"]
    anchors, positives = ids[batch.roles["anchor"]], ids[batch.roles["positive"]]
    lengths = mask.sum(dim=1)
    anchor_lengths, positive_lengths = lengths[batch.roles["anchor"]], lengths[batch.roles["positive"]]
    assert (anchor_lengths[:12] == 32).all()  # truncated at max_seq_len
    assert (positive_lengths[:12] > 32).sum() >= 8 and positive_lengths.max() <= 32 + 9
    assert ids.shape[1] == int(lengths.max()) and batch.real_tokens == int(lengths.sum())
    for anchor, positive, a, p in zip(anchors, positives, anchor_lengths, positive_lengths, strict=True):
        assert (positive[p:] == tiny_encoder.tokenizer.pad_token_id).all()
        assert repeats_in_place(anchor[:a].tolist(), positive[:p].tolist())
    # The same sentences repeated as words in the text first: truncation cuts the extra length away.
    text_views = ViewBuilder(load_config("esimcse", ["views.positive_params.unit=word"]).views, sentences, seed=0)
    text_batch = Collator(tiny_encoder.tokenize, text_views)((3, sentences))
    text_lengths = text_batch.features["attention_mask"].sum(dim=1)[text_batch.roles["positive"]]
    assert (text_lengths[:12] == 32).all()


def test_each_sentence_has_its_own_seed_and_rows_left_to_dropout_stay(tiny_encoder):
    sentences = [LONG, LONG, "the teacher reads a long letter to the children at night in the garden"]
    config = load_config("esimcse", [])
    views = ViewBuilder(config.views, sentences, seed=0)
    views.use_tokenizer(tiny_encoder.tokenizer)
    collate = Collator(tiny_encoder.tokenize, views)
    positive = collate((5, sentences)).roles["positive"]
    rows = [collate((step, sentences)).features["input_ids"][positive] for step in (5, 5, 6)]
    assert torch.equal(rows[0], rows[1])  # the same step and sentence: the same edit
    assert torch.equal(rows[0][0], rows[0][1])  # two copies of one sentence in a batch alike
    assert not torch.equal(rows[0], rows[2])  # another step, another draw
    # views.positive_prob 0: every positive is the anchor (its dropout view), unedited.
    none = ViewBuilder(load_config("esimcse", ["views.positive_prob=0.0"]).views, sentences, seed=0)
    none.use_tokenizer(tiny_encoder.tokenizer)
    batch = Collator(tiny_encoder.tokenize, none)((5, sentences))
    ids = batch.features["input_ids"]
    assert torch.equal(ids[batch.roles["anchor"]], ids[batch.roles["positive"]])


@pytest.mark.parametrize("override, key", [
    ("views.anchor=word_repetition", "views.anchor"),
    ("views.negative=word_repetition", "views.negative"),
    ("views.label=[word_repetition]", "views.label"),
    ("views.positive=sequence", "views.positive"),
])
def test_the_token_edit_is_refused_where_only_text_serves(override, key):
    extra = {"views.anchor": ["views.anchor_params={unit: subword}"],
             "views.negative": ["views.negative_params={unit: subword}"],
             "views.label": ["views.label_params={word_repetition: {unit: subword}}"],
             "views.positive": ["views.positive_params={steps: [{name: word_repetition, unit: subword}, "
                                "{name: random_crop}]}"]}[key]
    config = load_config("simcse", [override, *extra])
    with pytest.raises(ConfigError, match=rf"^{key}: word_repetition .*only views.positive takes it"):
        ViewBuilder(config.views, ["a b c"], seed=0)


def test_the_sub_word_form_has_no_text_output_and_the_word_form_is_unchanged():
    with pytest.raises(ConfigError, match="no text output"):
        build_augmenter("word_repetition", unit="subword").augment(["a b c"], 0)
    for bad in ({"unit": "piece"}, {"count": "both"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            build_augmenter("word_repetition", **bad)
    # The default (unit word, count paper) draws as before: randint(0, max(2, int(0.32 n))) then sample(range(n)).
    words = LONG.split()
    rng = random.Random(11)
    count = min(len(words), rng.randint(0, max(2, int(0.32 * len(words)))))
    chosen = set(rng.sample(range(len(words)), count))
    expected = [w for i, word in enumerate(words) for w in ([word, word] if i in chosen else [word])]
    assert build_augmenter("word_repetition").augment_tokens(words, random.Random(11)) == expected
