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
    with_cache = Collator(tiny_encoder.tokenize, views, cached=cached, reads=frozenset({"negative_positive"}))(
        (0, sentences, indices))
    without = Collator(tiny_encoder.tokenize, views, reads=frozenset({"negative_positive"}))((0, sentences))
    assert same(with_cache.features, without.features) and with_cache.roles == without.roles
    changed = [n for n, s in zip(with_cache.views.negatives, sentences, strict=True) if n != s]
    # Both of a negative's views are that one text: each is tokenised once, and nothing else is.
    assert changed and recording.seen == list(dict.fromkeys(changed))


def test_mlm_rows_come_from_the_cache(tiny_encoder):
    from cselab.losses.masking import MlmMasking

    corpus = lines(20, seed=3)
    views, cached, recording = recorded_views("simcse", corpus, tiny_encoder)
    masking = MlmMasking(tiny_encoder.tokenizer)
    indices = [3, 5, 8, 13]
    sentences = [corpus[i] for i in indices]
    got = Collator(tiny_encoder.tokenize, views, passes={"masked": masking}, cached=cached)((7, sentences, indices))
    expected = Collator(tiny_encoder.tokenize, views, passes={"masked": masking})((7, sentences))
    assert same(got.features, expected.features) and same(got.masked.features, expected.masked.features)
    assert torch.equal(got.masked.labels, expected.masked.labels) and recording.seen == []


def test_tokenizers_padding_on_the_left_are_not_rebuilt(tiny_encoder):
    tiny_encoder.tokenizer.padding_side = "left"
    assert not SentenceTokenizer.fits(tiny_encoder.tokenizer)


def test_tokenizers_with_non_zero_segment_ids_are_not_rebuilt(tiny_encoder):
    """Funnel gives its [CLS] segment id 2; rows rebuilt from the cache would say 0."""
    assert SentenceTokenizer.fits(tiny_encoder.tokenizer)
    tokenizer = tiny_encoder.tokenizer

    class SegmentTwoFirst:
        def __call__(self, text, **kwargs):
            encoded = dict(tokenizer(text, **kwargs))
            encoded["token_type_ids"] = [2] + [0] * (len(encoded["input_ids"]) - 1)
            return encoded

        def __getattr__(self, name):
            return getattr(tokenizer, name)

    assert not SentenceTokenizer.fits(SegmentTwoFirst())


def test_the_cache_key_names_the_cache_and_reader_versions(tiny_encoder, monkeypatch):
    """A change to the cache's layout or to how lines are read must not reuse ids written before it."""
    from cselab.data import token_cache

    corpus = lines(10, seed=4)
    first = token_ids(corpus, tiny_encoder.tokenizer).key
    monkeypatch.setattr(token_cache, "TOKEN_CACHE_VERSION", "test-layout")
    second = token_ids(corpus, tiny_encoder.tokenizer).key
    monkeypatch.setattr(token_cache, "READER_VERSION", "test-reader")
    third = token_ids(corpus, tiny_encoder.tokenizer).key
    assert len({first, second, third}) == 3


def test_ids_are_stored_wide_enough_for_the_largest_id(tiny_encoder, tmp_path):
    """An added token's id can lie past the vocabulary's size: the width follows the largest id."""
    from cselab.data.token_cache import TokenIds, _write

    tokenizer = tiny_encoder.tokenizer
    vocab = tokenizer.get_vocab()

    class FarAddedId:
        def get_vocab(self):
            return {**vocab, "[FAR]": 70_000}

        def __len__(self):
            return len(vocab) + 1  # the size alone would fit uint16

        def __call__(self, *args, **kwargs):
            return tokenizer(*args, **kwargs)

    corpus = lines(5, seed=5)
    _write(tmp_path, "narrow", corpus, tokenizer)
    _write(tmp_path, "wide", corpus, FarAddedId())
    assert TokenIds(tmp_path, "narrow").ids.dtype == "uint16"
    assert TokenIds(tmp_path, "wide").ids.dtype == "uint32"


def test_training_with_and_without_the_cache_is_the_same_run(tiny_corpus, tmp_path, monkeypatch):
    """UNA (cached anchors, new negatives) trained both ways: the same losses; the cache was written
    (into a cache of this test's own: another test may have cached this corpus already)."""
    import json

    from cselab.train.loop import train
    from tests.conftest import TINY_BERT

    def losses(cache: bool) -> list[float]:
        out = tmp_path / str(cache)
        train(load_config("una", [f"model.from_config={json.dumps(TINY_BERT)}", f"data.corpus={tiny_corpus}",
                                  "optim.batch_size=16", "optim.max_steps=4", "train.eval_steps=0", "train.log_steps=1",
                                  "train.save_steps=0", "train.precision=fp32", f"train.output_dir={out}",
                                  f"data.cache_token_ids={str(cache).lower()}"]), progress=False)
        return [json.loads(line)["loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]

    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    cache_dir = tmp_path / "cache" / "token-ids"
    def cached_files() -> set:
        return set(cache_dir.glob("*.ids.npy")) if cache_dir.is_dir() else set()

    before = cached_files()
    tokenised_each_step = losses(False)
    assert cached_files() == before  # off: nothing cached
    assert losses(True) == tokenised_each_step
    assert cached_files() - before  # on: this corpus was tokenised into the cache


class SlowTokenizer:
    """What the fingerprint reads of a slow (Python) tokenizer: no Rust backend, a vocabulary and the
    options it was built with, paths included (transformers 5's BertTokenizer is a fast one)."""

    def __init__(self, folder: str, **options):
        self.init_kwargs = {"name_or_path": folder, "vocab_file": f"{folder}/vocab.txt", "is_local": True,
                            "do_lower_case": True, "model_max_length": 512, **options}

    def get_vocab(self):
        return {"[PAD]": 0, "[UNK]": 1, "cafe": 2, "café": 3}


def test_a_slow_tokenizers_fingerprint_is_what_it_does_not_where_it_was_loaded():
    """The same vocabulary and options from two folders: one cache; another casing, accent rule or
    added token's flag (the vocabulary alone would not tell them apart): another cache."""
    from tokenizers import AddedToken

    from cselab.data.token_cache import tokenizer_fingerprint

    assert getattr(SlowTokenizer("/one"), "backend_tokenizer", None) is None
    one = tokenizer_fingerprint(SlowTokenizer("/one", mask_token=AddedToken("[MASK]", lstrip=True)))
    assert one == tokenizer_fingerprint(SlowTokenizer("/two", mask_token=AddedToken("[MASK]", lstrip=True),
                                                      is_local=False, max_length=32))
    others = [SlowTokenizer("/one", do_lower_case=False, mask_token=AddedToken("[MASK]", lstrip=True)),
              SlowTokenizer("/one", strip_accents=False, mask_token=AddedToken("[MASK]", lstrip=True)),
              SlowTokenizer("/one", mask_token=AddedToken("[MASK]", lstrip=False))]
    assert all(tokenizer_fingerprint(other) != one for other in others)
