"""The seq2seq paraphraser, run on a tiny randomly initialised BART saved to disk (no Hub)."""
from __future__ import annotations

import pytest
import torch

from cselab.augment import build_augmenter
from cselab.augment.base import AugmenterUnavailable


@pytest.fixture(scope="module")
def tiny_seq2seq(tmp_path_factory) -> str:
    """A 1+1-layer, 16-wide BART with the MiniLM (BERT) tokenizer's vocabulary, saved as a model dir."""
    import torch
    from transformers import AutoTokenizer, BartConfig, BartForConditionalGeneration

    from cselab.sources import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    config = BartConfig(vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                        max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                        bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                        decoder_start_token_id=tokenizer.cls_token_id, forced_bos_token_id=None,
                        forced_eos_token_id=None)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-bart")
    BartForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


SENTENCES = ["The cat sat on the mat.", "", "A second, longer sentence about dogs.", "Hi"]


def test_beam_search_one_string_per_input(tiny_seq2seq):
    augmenter = build_augmenter("paraphrase", model=tiny_seq2seq, num_beams=2, max_length=12, batch_size=2)
    out = augmenter.augment(SENTENCES, seed=0)
    assert len(out) == len(SENTENCES) and all(isinstance(s, str) for s in out)
    assert out[1] == ""  # blank input is not sent to the model
    assert out == augmenter.augment(SENTENCES, seed=0)
    assert any(a != b for a, b in zip(SENTENCES, out, strict=True))


def test_sampling_is_seeded_and_leaves_global_rng_alone(tiny_seq2seq):
    import torch

    augmenter = build_augmenter("paraphrase", model=tiny_seq2seq, do_sample=True, num_beams=1,
                                num_return_sequences=3, pick="random", top_k=0, max_length=12)
    state = torch.get_rng_state()
    first = augmenter.augment(SENTENCES, seed=5)
    assert torch.equal(state, torch.get_rng_state())
    assert first == augmenter.augment(SENTENCES, seed=5)
    assert first != augmenter.augment(SENTENCES, seed=6)
    assert len(first) == len(SENTENCES) and all(isinstance(s, str) for s in first)


def test_bad_parameters_and_missing_model(tiny_seq2seq, tmp_path):
    with pytest.raises(ValueError, match="num_return_sequences"):
        build_augmenter("paraphrase", model=tiny_seq2seq, num_beams=2, num_return_sequences=3)
    with pytest.raises(ValueError, match="pick"):
        build_augmenter("paraphrase", model=tiny_seq2seq, pick="best")
    with pytest.raises(AugmenterUnavailable, match="could not be loaded"):
        build_augmenter("paraphrase", model=str(tmp_path / "no-such-model"))


def test_a_positives_cache_prefers_the_paraphraser_when_its_model_loads(tiny_seq2seq, tmp_path, monkeypatch):
    """una-paraphrase's PEGASUS-when-available list: the first entry that runs builds the cache."""
    from cselab.augment.translate import BackTranslation

    def never(self, *args, **kwargs):
        raise AssertionError("back_translation was built although the paraphraser runs")

    monkeypatch.setattr(BackTranslation, "__init__", never)
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache-home"))
    corpus = [s for s in SENTENCES if s.strip()]
    paraphraser = {"name": "paraphrase", "model": tiny_seq2seq, "num_beams": 2, "max_length": 12}
    cached = build_augmenter("cached", augmenter=[paraphraser, "back_translation"]).fit(corpus)
    assert cached.cache_file.name.startswith("paraphrase-")
    expected = build_augmenter("paraphrase", model=tiny_seq2seq, num_beams=2, max_length=12).augment(corpus, 0)
    assert cached.augment(corpus, seed=3) == expected


class _Views(torch.utils.data.Dataset):
    """One item: the paraphrases made inside a DataLoader worker, and the device they were made on."""

    def __init__(self, augmenter):
        self.augmenter = augmenter

    def __len__(self):
        return 1

    def __getitem__(self, index):
        return self.augmenter.augment(SENTENCES, seed=0), str(self.augmenter._run_device())


def test_a_gpu_paraphraser_never_puts_a_model_on_cuda_inside_a_forked_loader_worker(tiny_seq2seq, monkeypatch):
    """device=cuda (a stand-in GPU: this machine has none): the model is loaded on the CPU, and a
    forked DataLoader worker generates there; only the main process would load a CUDA copy. Before,
    the constructor put the model on CUDA and the first generate in a worker raised "Cannot
    re-initialize CUDA in forked subprocess"."""
    from cselab.augment import paraphrase

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    loaded = []
    real_load = paraphrase.load_seq2seq

    def recording_load(name, device="cpu"):
        loaded.append(device)
        if device != "cpu":
            raise AssertionError(f"a model was loaded on {device}")
        return real_load(name, device)

    monkeypatch.setattr(paraphrase, "load_seq2seq", recording_load)
    augmenter = build_augmenter("paraphrase", model=tiny_seq2seq, num_beams=2, max_length=12, device="cuda")
    assert loaded == ["cpu"] and augmenter.device.type == "cuda" and augmenter._run_device().type == "cuda"
    loader = torch.utils.data.DataLoader(_Views(augmenter), batch_size=None, num_workers=1,
                                         multiprocessing_context="fork")
    [(paraphrases, device)] = list(loader)
    assert device == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert paraphrases == build_augmenter("paraphrase", model=tiny_seq2seq, num_beams=2, max_length=12,
                                          device="cpu").augment(SENTENCES, seed=0)
