"""SentenceEncoder.encode: length-sorted batches returned in input order, each batch's vectors moved
to the host as it is done (memory flat in the number of sentences), tokenisation ahead in a thread."""
from __future__ import annotations

import random
import threading
import weakref

import numpy as np
import pytest
import torch

from cselab.model.encoder import SentenceEncoder


def sentences(count: int = 23) -> list[str]:
    rng = random.Random(1)
    words = "the cat dog bird child river garden house letter song map apple ball red small old sees likes".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 20))) for _ in range(count)]


def one_by_one(encoder: SentenceEncoder, texts: list[str]) -> np.ndarray:
    """Each sentence alone: no padding, no sorting."""
    return np.concatenate([encoder.encode([text], batch_size=1) for text in texts])


@pytest.mark.parametrize("batch_size", [1, 4, 100])
def test_input_order_and_values_equal_unsorted_encoding(tiny_encoder, batch_size):
    texts = sentences()
    batched = tiny_encoder.encode(texts, batch_size=batch_size)
    assert batched.dtype == np.float32 and batched.shape == (len(texts), tiny_encoder.output_size)
    np.testing.assert_allclose(batched, one_by_one(tiny_encoder, texts), atol=1e-5, rtol=1e-5)
    shuffled = list(range(len(texts)))
    random.Random(2).shuffle(shuffled)
    np.testing.assert_allclose(tiny_encoder.encode([texts[i] for i in shuffled], batch_size=batch_size),
                               batched[shuffled], atol=1e-5, rtol=1e-5)


def test_normalized_rows_and_an_empty_input(tiny_encoder):
    vectors = tiny_encoder.encode(sentences(), batch_size=5, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert tiny_encoder.encode([]).shape == (0, tiny_encoder.output_size)


def test_each_batch_leaves_the_device_before_the_next_two_run(tiny_encoder, monkeypatch):
    """A stand-in forward records every batch's output; when a batch runs, at most the previous one's
    output may still be held (its copy to the host may be under way): the rest were handed over."""
    original = SentenceEncoder.forward
    outputs: list[weakref.ref] = []
    held_at_each_call: list[int] = []

    def forward(self, features, use_mlp=None):
        held_at_each_call.append(sum(ref() is not None for ref in outputs))
        vectors = original(self, features, use_mlp)
        outputs.append(weakref.ref(vectors))
        return vectors

    monkeypatch.setattr(SentenceEncoder, "forward", forward)
    texts = sentences(40)
    vectors = tiny_encoder.encode(texts, batch_size=4)
    monkeypatch.undo()
    assert len(held_at_each_call) == 10 and max(held_at_each_call) <= 1, held_at_each_call
    np.testing.assert_allclose(vectors, tiny_encoder.encode(texts, batch_size=4), atol=0)


def test_tokenising_ahead_in_a_thread_gives_the_same_vectors(tiny_encoder, monkeypatch):
    texts = sentences(30)
    inline = tiny_encoder.encode(texts, batch_size=4)
    original_tokenize, original_forward = SentenceEncoder.tokenize, SentenceEncoder.forward
    events: list[tuple[str, str]] = []

    def tokenize(self, batch):
        events.append(("tokenize", threading.current_thread().name))
        return original_tokenize(self, batch)

    def forward(self, features, use_mlp=None):
        events.append(("forward", threading.current_thread().name))
        return original_forward(self, features, use_mlp)

    monkeypatch.setattr(SentenceEncoder, "prefetch_tokens", staticmethod(lambda device: True))
    monkeypatch.setattr(SentenceEncoder, "tokenize", tokenize)
    monkeypatch.setattr(SentenceEncoder, "forward", forward)
    ahead = tiny_encoder.encode(texts, batch_size=4)
    np.testing.assert_allclose(ahead, inline, atol=0)
    assert {name for kind, name in events if kind == "tokenize"} != {threading.current_thread().name}
    assert {name for kind, name in events if kind == "forward"} == {threading.current_thread().name}
    # Bounded: when batch k runs, at most batches up to k+1 have been tokenised (one ahead).
    for k, index in enumerate(i for i, (kind, _) in enumerate(events) if kind == "forward"):
        assert sum(kind == "tokenize" for kind, _ in events[:index]) <= k + 2


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none visible to PyTorch)")
def test_on_a_gpu_the_vectors_equal_the_cpus_and_device_memory_stays_at_one_batch(tiny_encoder):
    texts = sentences(20000)  # all their vectors: 20000 x 32 x 4 bytes = 2.56 MB; one batch's work is far less
    on_cpu = tiny_encoder.encode(texts[:500], batch_size=64)
    encoder = tiny_encoder.to("cuda")
    encoder.encode(texts[:64], batch_size=64)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    on_gpu = encoder.encode(texts, batch_size=64)
    extra = torch.cuda.max_memory_allocated() - before
    np.testing.assert_allclose(on_gpu[:500], on_cpu, atol=1e-4, rtol=1e-4)
    assert extra < len(texts) * encoder.output_size * 4, f"{extra} bytes: all the embeddings stayed on the GPU"
