"""BERT's masking statistics on a fixed seed: 15% of the tokens (or of the words, with whole-word
masking), then 80% [MASK] / 10% a random token / 10% unchanged, never a special token or padding."""
from __future__ import annotations

import random

import pytest
import torch

from cselab.losses.masking import IGNORE, MlmMasking, word_continuation_table
from tests.pretrain.conftest import minilm_tokenizer

# Made-up words that WordPiece cuts into several pieces, and ordinary one-piece words.
SYLLABLES = ["zor", "blax", "quen", "vim", "tral", "op", "kesh", "dru"]
WORDS = ["the", "river", "house", "finds", "small", "letter", "garden", "again"]


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


@pytest.fixture(scope="module")
def batch(tokenizer):
    """1500 sentences of 6-14 words, half of them made-up multi-piece words, padded to one tensor."""
    rng = random.Random(0)

    def word() -> str:
        return rng.choice(WORDS) if rng.random() < 0.5 else "".join(rng.sample(SYLLABLES, rng.randint(2, 3)))

    sentences = [" ".join(word() for _ in range(rng.randint(6, 14))) for _ in range(1500)]
    encoded = tokenizer(sentences, padding=True, return_tensors="pt")
    word_ids = [encoded.word_ids(i) for i in range(len(sentences))]  # the tokenizer's own word split
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}, word_ids


def selection(masked) -> torch.Tensor:
    shape = masked.features["input_ids"].shape
    selected = torch.zeros(shape[0] * shape[1], dtype=torch.bool)
    selected[masked.positions] = True
    return selected.view(shape)


def replacement_shares(tokenizer, original: torch.Tensor, masked_ids: torch.Tensor,
                       selected: torch.Tensor) -> tuple[float, float, float]:
    chosen, before = masked_ids[selected], original[selected]
    as_mask = (chosen == tokenizer.mask_token_id).float().mean().item()
    unchanged = (chosen == before).float().mean().item()
    return as_mask, 1 - as_mask - unchanged, unchanged


def protected(tokenizer, features) -> torch.Tensor:
    ids = features["input_ids"]
    return torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) | (features["attention_mask"] == 0)


def test_token_masking_is_15_percent_then_80_10_10(tokenizer, batch):
    features, _ = batch
    masked = MlmMasking(tokenizer)(features, seed=11)
    selected, special = selection(masked), protected(tokenizer, features)
    assert not selected[special].any()
    assert torch.equal(masked.features["input_ids"][special], features["input_ids"][special])
    eligible = int((~special).sum())
    assert eligible > 30_000
    assert selected.sum().item() / eligible == pytest.approx(0.15, abs=0.01)
    shares = replacement_shares(tokenizer, features["input_ids"], masked.features["input_ids"], selected)
    assert shares == pytest.approx((0.8, 0.1, 0.1), abs=0.025)
    assert torch.equal(masked.labels, features["input_ids"].reshape(-1)[masked.positions])


def test_whole_word_masking_selects_15_percent_of_words_whole_then_80_10_10(tokenizer, batch):
    features, word_ids = batch
    masked = MlmMasking(tokenizer, whole_word=True)(features, seed=11)
    selected, special = selection(masked), protected(tokenizer, features)
    assert not selected[special].any()
    assert torch.equal(masked.features["input_ids"][special], features["input_ids"][special])
    words = chosen_words = 0
    multi_piece_chosen = 0
    for row, ids in enumerate(word_ids):
        pieces: dict[int, list[int]] = {}
        for column, word in enumerate(ids):
            if word is not None:
                pieces.setdefault(word, []).append(column)
        for columns in pieces.values():
            flags = {bool(selected[row, c]) for c in columns}
            assert len(flags) == 1, f"row {row}: a word partly selected"  # all of a word's pieces or none
            words += 1
            chosen_words += flags.pop()
            multi_piece_chosen += len(columns) > 1 and bool(selected[row, columns[0]])
    assert words > 10_000
    assert chosen_words / words == pytest.approx(0.15, abs=0.01)
    assert multi_piece_chosen > 300  # the test really covers words of several pieces
    eligible = int((~special).sum())
    assert selected.sum().item() / eligible == pytest.approx(0.15, abs=0.02)
    shares = replacement_shares(tokenizer, features["input_ids"], masked.features["input_ids"], selected)
    assert shares == pytest.approx((0.8, 0.1, 0.1), abs=0.025)
    assert torch.equal(masked.labels, features["input_ids"].reshape(-1)[masked.positions])
    assert IGNORE not in masked.labels


def test_whole_word_masks_depend_on_the_seed_only(tokenizer, batch):
    features, _ = batch
    masking = MlmMasking(tokenizer, whole_word=True)
    first = masking(features, seed=5)
    torch.manual_seed(123)  # the global RNG plays no part
    again, other = masking(features, seed=5), masking(features, seed=6)
    assert torch.equal(first.features["input_ids"], again.features["input_ids"])
    assert torch.equal(first.positions, again.positions)
    assert not torch.equal(first.positions, other.positions)


def test_a_block_that_starts_inside_a_word_masks_that_part_on_its_own(tokenizer):
    """Packed blocks may begin with a '##' piece: it forms a word with the pieces after it, never
    with the [CLS] before it, so it can still be selected."""
    rest = tokenizer.convert_tokens_to_ids(["##bla", "##x", "river"])
    ids = torch.tensor([[tokenizer.cls_token_id, *rest, tokenizer.sep_token_id]] * 2000)
    features = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    selected = selection(MlmMasking(tokenizer, whole_word=True)(features, seed=2))
    assert not selected[:, [0, 4]].any()
    assert torch.equal(selected[:, 1], selected[:, 2])  # "##bla ##x": one word
    assert selected[:, 1].float().mean().item() == pytest.approx(0.15, abs=0.03)
    assert (selected[:, 1] != selected[:, 3]).any()  # "river" is a word of its own


def test_word_pieces_are_told_apart_by_the_vocabulary(tokenizer):
    table = word_continuation_table(tokenizer)
    assert table[tokenizer.convert_tokens_to_ids("##bla")] and not table[tokenizer.convert_tokens_to_ids("river")]
