"""Shared fixtures: a tiny randomly initialised BERT and the optional ../shared data."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"

TINY_BERT = {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "max_position_embeddings": 64}


def save_tiny_generator(directory: Path) -> Path:
    """A masked language model of TINY_BERT's shape (random weights, its own seed) with the MiniLM
    tokenizer's vocabulary, saved as a Hugging Face directory: the offline stand-in for DiffCSE's
    generator (the rtd term's ``generator``)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from cselab.sources import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    shape = {key: value for key, value in TINY_BERT.items() if key != "model_type"}
    with torch.random.fork_rng():
        torch.manual_seed(7)
        model = BertForMaskedLM(BertConfig(**shape, vocab_size=len(tokenizer)))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread():
    """Torch on one thread in tests: tiny models gain nothing from a pool, and on a shared 2-core
    machine the pool's threads only wait on each other; subprocess tests match it."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """$CSELAB_CACHE in a temporary directory: tests never read or fill the user's ~/.cache/cselab
    (augmentation caches, token and index caches, the precision probe)."""
    import os

    previous = os.environ.get("CSELAB_CACHE")
    os.environ["CSELAB_CACHE"] = str(tmp_path_factory.mktemp("cselab-cache"))
    yield
    if previous is None:
        os.environ.pop("CSELAB_CACHE", None)
    else:
        os.environ["CSELAB_CACHE"] = previous


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the repository; tests that need it are skipped without it."""
    if not SHARED.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED


@pytest.fixture
def tiny_encoder():
    """A 2-layer, 32-wide BERT with the MiniLM tokenizer's vocabulary, randomly initialised."""
    import torch

    from cselab.model.encoder import SentenceEncoder

    torch.manual_seed(0)
    return SentenceEncoder.from_config(TINY_BERT, "minilm", pooler="cls", max_seq_len=32)


@pytest.fixture
def saved_model(tiny_encoder, tmp_path) -> Path:
    """The tiny encoder saved as a model directory."""
    return tiny_encoder.save(tmp_path / "tiny-model")


@pytest.fixture
def senteval_dir(tmp_path) -> Path:
    """A generated SentEval directory (tests/evaluate/senteval_files.py)."""
    from tests.evaluate.senteval_files import make_senteval

    return make_senteval(tmp_path / "senteval")


@pytest.fixture
def tiny_corpus(tmp_path) -> Path:
    """A small generated corpus file (never lines of ../shared)."""
    import random

    rng = random.Random(0)
    subjects = ["the cat", "a dog", "my neighbour", "the old man", "a child", "the teacher", "our team", "the bird"]
    verbs = ["sees", "likes", "paints", "finds", "follows", "builds", "reads", "carries"]
    objects = ["a red ball", "the river", "a small house", "the letter", "an apple", "the garden", "a song", "the map"]
    lines = [f"{rng.choice(subjects).capitalize()} {rng.choice(verbs)} {rng.choice(objects)} "
             f"{rng.choice(['today', 'again', 'slowly', 'at night', ''])}".strip() + "."
             for _ in range(300)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def free_port() -> int:
    """A TCP port nobody listens on now, for a torchrun rendezvous (fixed ports collide when two test
    runs share the machine)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def offline_home(tmp_path, monkeypatch) -> Path:
    """An empty home (no cselab data, an empty Hugging Face cache), the Hub offline, cwd inside it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CSELAB_DATA", "CSELAB_WIKI1M"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hf-hub"))
    monkeypatch.chdir(home)
    return home
