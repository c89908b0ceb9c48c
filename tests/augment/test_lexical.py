"""CLEAR, EDA, crop and repetition rules: the paper's counts, placeholders and determinism."""
from collections import Counter

import pytest

from cselab.augment import build_augmenter
from cselab.augment.lexical import reorder_plan, span_deletion_flags
from cselab.augment.tokenize import tokenize

LONG = " ".join(f"w{i}" for i in range(40)) + "."  # 41 distinct tokens


def test_clear_word_deletion_deletes_70_percent_and_collapses_placeholders():
    out = build_augmenter("clear_word_deletion").augment([LONG], seed=3)[0]
    tokens = tokenize(out)
    kept = [t for t in tokens if t != "[DEL]"]
    assert len(kept) == 41 - round(0.7 * 41)
    assert all(not (a == b == "[DEL]") for a, b in zip(tokens, tokens[1:], strict=False))  # runs merged
    assert "[DEL]" in tokens
    # kept tokens keep their order
    original = tokenize(LONG)
    assert [original.index(t) for t in kept] == sorted(original.index(t) for t in kept)


def test_clear_word_deletion_placeholder_options():
    removed = build_augmenter("clear_word_deletion", placeholder=None).augment([LONG], seed=3)[0]
    assert "[DEL]" not in removed and len(tokenize(removed)) == 41 - round(0.7 * 41)
    masked = build_augmenter("clear_word_deletion", placeholder="<del>", collapse=False).augment([LONG], seed=3)[0]
    assert len(tokenize(masked.replace("<del>", " X "))) == 41  # one placeholder per deleted token


def test_clear_span_deletion_deletes_spans_of_5_percent():
    text = " ".join(f"w{i}" for i in range(100))
    out = build_augmenter("clear_span_deletion", placeholder=None).augment([text], seed=1)[0]
    kept = tokenize(out)
    assert 100 - 25 <= len(kept) < 100  # 5 spans of 5 tokens, which may overlap
    gaps = sum(1 for a, b in zip(kept, kept[1:], strict=False) if int(b[1:]) != int(a[1:]) + 1)
    assert gaps + (kept[0] != "w0") + (kept[-1] != "w99") <= 5


def test_clear_reorder_swaps_spans_keeping_every_token():
    text = " ".join(f"w{i}" for i in range(100))
    out = build_augmenter("clear_reorder").augment([text], seed=2)[0]
    assert Counter(tokenize(out)) == Counter(tokenize(text)) and out != text
    moved = sum(1 for i, t in enumerate(tokenize(out)) if t != f"w{i}")
    assert 0 < moved <= 10 * 5  # 5 pairs of 5-token spans


# Sentences of several lengths, as the wiki sample has them: the paper's spans were set for 512 tokens.
WORDS = "the old miller said that his young daughter could spin straw into gold for the king".split()


def sentence_of(length: int, variant: int) -> str:
    return " ".join(WORDS[(i + variant) % len(WORDS)] for i in range(length)) + "."


def plan_shares(length: int, seeds: int = 200) -> tuple[float, float]:
    """Mean deleted share (span deletion) and moved share (reordering) over sentences of ``length``
    words (plus the full stop), each rule's own plan seeded as the augmenter seeds it."""
    import random

    from cselab.augment.base import sentence_seed

    deletion = build_augmenter("clear_span_deletion", placeholder=None)
    reorder = build_augmenter("clear_reorder")
    deleted, moved = [], []
    for variant in range(seeds):
        sentence = sentence_of(length, variant)
        units = tokenize(sentence)
        kept = deletion.plan(units, random.Random(sentence_seed(variant, sentence)))
        deleted.append(1 - len(kept) / len(units))
        order = reorder.plan(units, random.Random(sentence_seed(variant, sentence)))
        moved.append(sum(item != i for i, item in enumerate(order)) / len(units))
    return sum(deleted) / len(deleted), sum(moved) / len(moved)


@pytest.mark.parametrize("length", [*range(6, 13), 20, 40, 100])
def test_span_deletion_and_reordering_keep_the_papers_share_at_every_length(length):
    """About 25% of a sentence's units deleted and 50% moved, on short sentences as on long ones
    (before: 5 one-unit spans of an 8-unit sentence, and reordering moving every unit)."""
    deleted, moved = plan_shares(length)
    assert 0.20 <= deleted <= 0.30, deleted
    assert 0.40 <= moved <= 0.60, moved


def test_span_deletion_spans_and_reordering_pairs():
    """At most 5 spans, each at least one unit; on a long input the paper's 5 spans of 5%."""
    import random

    for n, seed in [(8, 0), (13, 1), (100, 2), (512, 3)]:
        flags = span_deletion_flags(n, 5, 0.05, random.Random(seed))
        runs = [len(run) for run in bytes(flags).split(b"\x00") if run]
        assert 1 <= len(runs) <= 5 and sum(runs) <= n - 1
        plan = reorder_plan(n, 5, 0.05, random.Random(seed))
        assert sorted(plan) == list(range(n))
    flags = span_deletion_flags(512, 5, 0.05, random.Random(4))
    assert sum(flags) == 128  # 25% of 512, as 5 spans of ~26 (maybe adjacent ones read as one run)
    assert reorder_plan(512, 5, 0.05, random.Random(4)) != list(range(512))
    assert sum(i != item for i, item in enumerate(reorder_plan(512, 5, 0.05, random.Random(4)))) == 256


def test_eda_random_swap_and_deletion_and_crop():
    swap = build_augmenter("eda_random_swap").augment([LONG], seed=0)[0]
    assert Counter(tokenize(swap)) == Counter(tokenize(LONG)) and swap != LONG
    deletion = build_augmenter("eda_random_deletion", p=0.5).augment([LONG], seed=0)[0]
    assert 0 < len(tokenize(deletion)) < 41
    assert len(tokenize(build_augmenter("eda_random_deletion", p=1.0).augment([LONG], seed=0)[0])) == 1
    crop = tokenize(build_augmenter("random_crop", ratio=0.25).augment([LONG], seed=0)[0])
    assert len(crop) == 41 - 10
    original = tokenize(LONG)
    start = next(i for i, (a, b) in enumerate(zip(original, crop + [None], strict=False)) if a != b)
    assert crop == original[:start] + original[start + 10:]  # one contiguous span


def test_word_repetition_duplicates_tokens_in_place():
    aug = build_augmenter("word_repetition")
    words = LONG[:-1]  # no final '.': a doubled '.' would glue into one '..' token
    outs = aug.augment([f"{words} x{i}" for i in range(30)], seed=0)
    changed = [o for o, i in zip(outs, range(30), strict=True) if o != f"{words} x{i}"]
    assert changed
    for out in changed:
        tokens = tokenize(out)
        deduped = [t for k, t in enumerate(tokens) if k == 0 or t != tokens[k - 1]]
        assert deduped == tokenize(words) + [deduped[-1]]
        assert len(tokens) - len(deduped) <= max(2, int(0.32 * 41))


@pytest.mark.parametrize("name", ["clear_word_deletion", "clear_span_deletion", "clear_reorder", "eda_random_swap",
                                  "eda_random_deletion", "random_crop", "word_repetition"])
def test_deterministic_and_independent_of_batch(name, sample_sentences):
    SENTENCES = sample_sentences
    aug = build_augmenter(name)
    alone = [aug.augment([s], seed=7)[0] for s in SENTENCES]
    assert aug.augment(SENTENCES, seed=7) == alone
    assert aug.augment(list(reversed(SENTENCES)), seed=7) == list(reversed(alone))
    assert aug.augment(SENTENCES, seed=8) != alone or name == "word_repetition"
    assert aug.augment(["", "   "], seed=1) == ["", "   "]


def test_single_token_is_left_alone_by_deletions():
    for name in ["clear_word_deletion", "clear_span_deletion", "clear_reorder", "eda_random_deletion", "random_crop"]:
        assert build_augmenter(name).augment(["Hello"], seed=0) == ["Hello"]


def test_bad_parameters_give_clear_errors():
    with pytest.raises(ValueError, match="clear_word_deletion: ratio"):
        build_augmenter("clear_word_deletion", ratio=1.5)
    with pytest.raises(ValueError, match="clear_span_deletion: spans"):
        build_augmenter("clear_span_deletion", spans=0)


def test_wordnet_rules(wordnet_ready):
    sentence = "The happy child bought a new car and a large house."
    subs = build_augmenter("clear_synonym_substitution").augment([sentence], seed=0)[0]
    assert subs != sentence and len(tokenize(subs)) >= len(tokenize(sentence))
    eda = build_augmenter("eda_synonym_replacement").augment([sentence], seed=0)[0]
    assert eda != sentence
    inserted = build_augmenter("eda_random_insertion").augment([sentence], seed=0)[0]
    assert len(tokenize(inserted)) > len(tokenize(sentence))
    assert build_augmenter("eda_random_insertion").augment(["of the and"], seed=0) == ["of the and"]


# --- CLEAR on a model's tokens (level: token, the clear-* recipes) ----------------------------------

# Words WordPiece cuts into several pieces ("unbelievably" -> un ##bel ##ie ##va ##bly) among whole ones.
PIECES = ("The unbelievably talented photographers repeatedly overexposed their photographs near "
          "Constantinople, but nobody noticed the irregularities until afterwards.")


@pytest.fixture(scope="module")
def splitter():
    from cselab.augment.tokenize import DEFAULT_TOKENIZER, load_splitter

    return load_splitter(DEFAULT_TOKENIZER, ("[DEL]",))


def piece_texts(splitter, text):
    return [piece.text for piece in splitter.split([text])[0]]


def test_token_level_counts_the_tokenizers_pieces_not_words(splitter):
    pieces = piece_texts(splitter, PIECES)
    assert len(pieces) > len(tokenize(PIECES)) + 5  # many words are several pieces
    out = build_augmenter("clear_word_deletion", level="token").augment([PIECES], seed=0)[0]
    kept = [t for t in piece_texts(splitter, out) if t != "[DEL]"]
    # round(0.7 n) of the n pieces deleted; a kept piece that lost its left neighbour is written as
    # a word start and may be cut again (##ie -> ie): within a few pieces of 30%.
    assert abs(len(kept) - (len(pieces) - round(0.7 * len(pieces)))) <= 3
    words = build_augmenter("clear_word_deletion", level="word").augment([PIECES], seed=0)[0]
    n = len(tokenize(PIECES))
    assert len([t for t in tokenize(words) if t != "[DEL]"]) == n - round(0.7 * n)


@pytest.mark.parametrize("seed", range(5))
def test_token_deletion_ratio_within_tolerance_and_placeholders_merged(splitter, seed):
    sentences = [PIECES, LONG, "a b c d e f g h i j", "Don't stop believing, São Paulo's café!"]
    for name, params in [("clear_word_deletion", {}), ("clear_span_deletion", {}),
                         ("clear_word_deletion", {"ratio": 0.3})]:
        for sentence, out in zip(sentences, build_augmenter(name, level="token", **params).augment(sentences, seed),
                                 strict=True):
            pieces = piece_texts(splitter, out)
            assert "[DEL]" in pieces and out != sentence
            assert not any(a == b == "[DEL]" for a, b in zip(pieces, pieces[1:], strict=False)), out
            if name == "clear_word_deletion":
                n = len(piece_texts(splitter, sentence))
                kept = len([p for p in pieces if p != "[DEL]"])
                assert abs(kept - (n - round(params.get("ratio", 0.7) * n))) <= max(2, 0.1 * n), (sentence, out)


def test_token_deletion_merges_with_a_placeholder_already_there(splitter):
    deletion = build_augmenter("clear_word_deletion", level="token", ratio=0.5)
    text = "one [DEL] two three [DEL] four five six seven eight nine ten"
    for seed in range(20):
        pieces = piece_texts(splitter, deletion.augment([text], seed)[0])
        assert not any(a == b == "[DEL]" for a, b in zip(pieces, pieces[1:], strict=False))


def test_token_reordering_keeps_the_multiset_of_tokens(splitter):
    reorder = build_augmenter("clear_reorder", level="token", span_ratio=0.1)
    whole_words = " ".join(f"word{i}" if i % 3 else "the" for i in range(60))
    for seed in range(5):
        out = reorder.augment([whole_words], seed)[0]
        assert out != whole_words
        assert Counter(piece_texts(splitter, out)) == Counter(piece_texts(splitter, whole_words))
        # Pieces of longer words move alone: the same characters, in another order.
        moved = reorder.augment([PIECES], seed)[0]
        assert sorted(moved.replace(" ", "")) == sorted(PIECES.replace(" ", ""))


@pytest.mark.parametrize("name", ["clear_word_deletion", "clear_span_deletion", "clear_reorder"])
def test_token_level_is_deterministic_per_seed_and_independent_of_the_batch(name, sample_sentences):
    aug = build_augmenter(name, level="token")
    alone = [aug.augment([s], seed=7)[0] for s in sample_sentences]
    assert aug.augment(sample_sentences, seed=7) == alone
    assert aug.augment(list(reversed(sample_sentences)), seed=7) == list(reversed(alone))
    assert build_augmenter(name, level="token").augment(sample_sentences, seed=7) == alone  # a fresh instance
    assert aug.augment(sample_sentences, seed=8) != alone
    assert aug.augment(["", "   ", "Hello"], seed=1) == ["", "   ", "Hello"]


def test_placeholder_stays_one_token_for_the_encoder(tiny_encoder):
    assert tiny_encoder.add_special_tokens(("[DEL]",)) == ["[DEL]"]
    deletion = build_augmenter("clear_word_deletion", level="token")
    deletion.use_tokenizer(tiny_encoder.tokenizer)  # as the training loop does
    out = deletion.augment([PIECES], seed=1)[0]
    ids = tiny_encoder.tokenizer(out, add_special_tokens=False)["input_ids"]
    tokens = tiny_encoder.tokenizer.convert_ids_to_tokens(ids)
    assert tokens.count("[DEL]") == out.count("[DEL]") > 0
    assert "del" not in tokens  # never cut into "[", "del", "]"
    assert deletion.splitter().tokenizer is tiny_encoder.tokenizer  # it has [DEL] already: used as it is


def test_use_tokenizer_never_changes_the_encoders_tokenizer(tiny_encoder):
    vocabulary = len(tiny_encoder.tokenizer)
    reorder = build_augmenter("clear_reorder", level="token")
    reorder.use_tokenizer(tiny_encoder.tokenizer)  # lacks [DEL]: the splitter adds it to a copy
    assert len(tiny_encoder.tokenizer) == vocabulary and "[DEL]" not in tiny_encoder.tokenizer.get_vocab()
    assert "[DEL]" in reorder.splitter().tokenizer.get_vocab()


def test_word_level_ignores_the_tokenizer_and_token_level_rejects_bad_values():
    assert build_augmenter("clear_word_deletion", tokenizer="/no/such/dir").augment([LONG], 0)[0] != LONG
    with pytest.raises(ValueError, match="clear_reorder: level"):
        build_augmenter("clear_reorder", level="subword")
    with pytest.raises(ValueError, match="/no/such/dir"):
        build_augmenter("clear_reorder", level="token", tokenizer="/no/such/dir")  # when built, not in a worker


def test_token_level_substitution_replaces_whole_words_only(wordnet_ready, splitter):
    subs = build_augmenter("clear_synonym_substitution", level="token")
    text = "The unbelievably happy child bought a new car and a large house."
    changed = 0
    for seed in range(10):
        out = subs.augment([text], seed)[0]
        changed += out != text
        assert "unbelievably" in out  # its pieces (un, ##bel, ...) are not words of their own
    assert changed >= 8


def test_the_views_hand_the_encoders_tokenizer_to_every_clear_step(tiny_encoder):
    from cselab.config import load_config
    from cselab.data.views import ViewBuilder

    views = ViewBuilder(load_config("clear-subs-del-span").views, ["a sentence", "another one"], seed=0)
    tiny_encoder.add_special_tokens(views.special_tokens)
    views.use_tokenizer(tiny_encoder.tokenizer)  # what the training loop does once the encoder has [DEL]
    steps = [a for a in views.augmenters if getattr(a, "level", None) == "token"]
    assert len(steps) == 4  # substitution and span deletion, for the anchor and the positive
    assert all(step.splitter().tokenizer is tiny_encoder.tokenizer for step in steps)
