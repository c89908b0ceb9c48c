"""Each unique sentence is encoded once per run; a second run reads the cache and encodes nothing."""
from __future__ import annotations

import numpy as np
import pytest

from cselab.evaluate import evaluate
from cselab.evaluate.embeddings import EmbeddingStore
from cselab.evaluate.models import load_model


class CountingEncoder:
    def __init__(self):
        self.seen: list[str] = []

    def encode(self, sentences):
        self.seen += sentences
        return np.array([[len(s), s.count("a"), 1.0] for s in sentences], dtype=np.float32)


def test_store_encodes_shared_sentences_once_and_caches(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("x")
    counting = CountingEncoder()
    store = EmbeddingStore(counting.encode, "model-key", tmp_path / "cache")
    first = store.embed("task1", [data], ["a", "b", "c"])
    store.embed("task2", [data], ["b", "c", "d"])
    assert sorted(counting.seen) == ["a", "b", "c", "d"]
    cache_files = sorted(p.name.split("-")[0] for p in (tmp_path / "cache" / "model-key").glob("*.npy"))
    assert cache_files == ["task1", "task2"]
    again = CountingEncoder()
    reloaded = EmbeddingStore(again.encode, "model-key", tmp_path / "cache").embed("task1", [data], ["a", "b", "c"])
    assert again.seen == []
    np.testing.assert_array_equal(reloaded, first)
    data.write_text("changed")  # the data key follows the file's bytes
    EmbeddingStore(again.encode, "model-key", tmp_path / "cache").embed("task1", [data], ["a", "b", "c"])
    assert again.seen == ["a", "b", "c"]


def test_corrupt_cache_file_is_recomputed(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("x")
    store = EmbeddingStore(CountingEncoder().encode, "k", tmp_path / "cache")
    path = store.cache_path("t", [data])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npy file")
    counting = CountingEncoder()
    EmbeddingStore(counting.encode, "k", tmp_path / "cache").embed("t", [data], ["a"])
    assert counting.seen == ["a"]
    assert np.load(path, allow_pickle=False).shape == (1, 3)


def test_second_run_of_a_saved_model_encodes_nothing(tiny_encoder, senteval_dir, tmp_path):
    tiny_encoder.save(tmp_path / "model")
    model = load_model(str(tmp_path / "model"))
    assert model.cache_key is not None and model.pooler == "cls"
    first = evaluate(model, senteval_dir, tasks="sts,align", cache_dir=tmp_path / "cache", progress=False)
    assert first["embedding_stats"]["encoded"] > 0 and first["embedding_stats"]["from_memory"] > 0  # align reuses STS-B
    second = evaluate(load_model(str(tmp_path / "model")), senteval_dir, tasks="sts,align",
                      cache_dir=tmp_path / "cache", progress=False)
    assert second["embedding_stats"]["encoded"] == 0
    assert second["avg"] == pytest.approx(first["avg"])
    other_pooler = load_model(str(tmp_path / "model"), pooler="avg")
    assert other_pooler.cache_key != model.cache_key


def test_interrupted_run_resumes_from_finished_tasks(tiny_encoder, senteval_dir, tmp_path):
    tiny_encoder.save(tmp_path / "model")
    model = load_model(str(tmp_path / "model"))
    calls = []
    original = model.encode

    def encode_then_die(sentences):
        calls.append(len(sentences))
        if len(calls) == 2:
            raise KeyboardInterrupt  # the user stops the run during the second task
        return original(sentences)

    model.encode = encode_then_die
    with pytest.raises(KeyboardInterrupt):
        evaluate(model, senteval_dir, tasks="STS12,STS13", cache_dir=tmp_path / "cache", progress=False)
    resumed = evaluate(load_model(str(tmp_path / "model")), senteval_dir, tasks="STS12,STS13",
                       cache_dir=tmp_path / "cache", progress=False)
    assert resumed["embedding_stats"]["from_cache"] == calls[0]  # STS12 was not encoded again
    assert resumed["embedding_stats"]["encoded"] > 0  # STS13 was


def test_model_fingerprint_ignores_run_files_but_not_weights(tmp_path):
    from cselab.evaluate.models import weights_fingerprint

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    before = weights_fingerprint(tmp_path)
    for name in ("summary.json", "train_config.json", "versions.json", "eval-dev.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "checkpoints" / "step-5").mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-5" / "state.json").write_text("{}")
    assert weights_fingerprint(tmp_path) == before
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert weights_fingerprint(tmp_path) != before
