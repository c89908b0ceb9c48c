"""Sentence-view training reads unchanged corpus lines' ids from the token cache: the batches are the
tokenizer's own, exactly, and only texts an augmenter changed are tokenised at the step."""
from __future__ import annotations

import random

import pytest
import torch

from cselab.config import load_config
from cselab.data.collate import Collator
from cselab.data.token_cache import SentenceTokenizer, token_ids
from cselab.data.views import ViewBuilder

WORDS = "the a river old house red quickly paints garden letter of under bright".split()


def lines(count: int, seed: int = 0) -> list[str]:
    """Lines of 1 to 60 words: some overflow a 32-token row and are truncated."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 60))).capitalize() + "." for _ in range(count)]


class Recording:
    """The tokenizer, remembering which texts it was asked to tokenise."""

    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    def __call__(self, texts, **kwargs):
        self.seen.extend(texts)
        return self.tokenizer(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def recorded_views(recipe: str, corpus: list[str], encoder) -> tuple[ViewBuilder, SentenceTokenizer, Recording]:
    """The recipe's views, and a cache-reading tokenizer whose tokenizer records what it is asked."""
    recording = Recording(encoder.tokenizer)
    cached = SentenceTokenizer(recording, encoder.max_seq_len, token_ids(corpus, encoder.tokenizer))
    recording.seen.clear()  # the special tokens' probe
    return ViewBuilder(load_config(recipe, []).views, corpus, seed=0), cached, recording


def same(got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> bool:
    return got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in expected)


@pytest.mark.parametrize("special", [False, True])
def test_rows_from_the_cache_equal_the_tokenizers_batch(tiny_encoder, special):
    """Cached and new rows mixed, long lines truncated, placeholder tokens (CLEAR's) kept whole."""
    if special:
        tiny_encoder.add_special_tokens(("[DEL]",))
    corpus = lines(40)
    tokenizer = tiny_encoder.tokenizer
    cached = SentenceTokenizer(tokenizer, tiny_encoder.max_seq_len, token_ids(corpus, tokenizer))
    rng = random.Random(1)
    picked = [rng.randrange(len(corpus)) for _ in range(24)]
    new = [f"{corpus[i]} [DEL] changed" if special else corpus[i][::-1] for i in picked[:8]]
    texts = new + [corpus[i] for i in picked[8:]]
    rows = [None] * 8 + picked[8:]
    assert same(cached(texts, rows), dict(tiny_encoder.tokenize(texts)))
    assert any(len(tiny_encoder.tokenizer(t)["input_ids"]) > tiny_encoder.max_seq_len for t in texts)  # truncation ran


def test_collator_tokenises_only_the_texts_an_augmenter_changed(tiny_encoder):
    """UNA's negatives are new texts; its anchors and dropout positives are corpus lines (from the cache)."""
    corpus = lines(64, seed=2)
    views, cached, recording = recorded_views("una", corpus, tiny_encoder)
    indices = list(range(0, 64, 4))
    sentences = [corpus[i] for i in indices]
    with_cache = Collator(tiny_encoder.tokenize, views, cached=cached, encode_negatives_twice=True)(
        (0, sentences, indices))
    without = Collator(tiny_encoder.tokenize, views, encode_negatives_twice=True)((0, sentences))
    assert same(with_cache.features, without.features) and with_cache.roles == without.roles
    changed = [n for n, s in zip(with_cache.views.negatives, sentences, strict=True) if n != s]
    assert changed and recording.seen == changed + changed  # the negatives' two views, nothing else


def test_mlm_rows_come_from_the_cache(tiny_encoder):
    from cselab.data.masking import MlmMasking

    corpus = lines(20, seed=3)
    views, cached, recording = recorded_views("simcse", corpus, tiny_encoder)
    masking = MlmMasking(tiny_encoder.tokenizer)
    indices = [3, 5, 8, 13]
    sentences = [corpus[i] for i in indices]
    got = Collator(tiny_encoder.tokenize, views, masking=masking, cached=cached)((7, sentences, indices))
    expected = Collator(tiny_encoder.tokenize, views, masking=masking)((7, sentences))
    assert same(got.features, expected.features) and same(got.masked.features, expected.masked.features)
    assert torch.equal(got.masked.labels, expected.masked.labels) and recording.seen == []


def test_tokenizers_padding_on_the_left_are_not_rebuilt(tiny_encoder):
    tiny_encoder.tokenizer.padding_side = "left"
    assert not SentenceTokenizer.fits(tiny_encoder.tokenizer)


def test_training_with_and_without_the_cache_is_the_same_run(tiny_corpus, tmp_path):
    """UNA (cached anchors, new negatives) trained both ways: the same losses; the cache was written."""
    import json
    import os
    from pathlib import Path

    from cselab.train.loop import train
    from tests.conftest import TINY_BERT

    def losses(cache: bool) -> list[float]:
        out = tmp_path / str(cache)
        train(load_config("una", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}",
                                  "optim.batch_size=16", "optim.max_steps=4", "train.eval_steps=0", "train.log_steps=1",
                                  "train.save_steps=0", "train.precision=fp32", f"train.output_dir={out}",
                                  f"data.cache_token_ids={str(cache).lower()}"]), progress=False)
        return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]

    cache_dir = Path(os.environ["CSELAB_CACHE"]) / "token-ids"
    def cached_files() -> set[Path]:
        return set(cache_dir.glob("*.ids.npy")) if cache_dir.is_dir() else set()

    before = cached_files()
    tokenised_each_step = losses(False)
    assert cached_files() == before  # off: nothing cached
    assert losses(True) == tokenised_each_step
    assert cached_files() - before  # on: this corpus was tokenised into the cache
