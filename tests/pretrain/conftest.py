"""Pre-training tests: a tiny BERT, a corpus of a few dozen generated lines, and a private cache."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests.conftest import TINY_BERT

SUBJECTS = ["the old man", "a child", "our teacher", "the bird", "my neighbour", "a stranger", "the farmer"]
VERBS = ["finds", "paints", "follows", "remembers", "carries", "describes", "builds"]
OBJECTS = ["a small house", "the quiet river", "an unbelievably extraordinary lantern", "the glimmering garden",
           "a forgotten letter", "the zorblaxian map", "an apple"]


def minilm_tokenizer():
    """The tokenizer the recipes use (bert-base-uncased's WordPiece vocabulary)."""
    from transformers import AutoTokenizer

    from cselab.sources import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path("minilm"))


def year_tokens(tokenizer, count: int) -> list[str]:
    """``count`` years that are single tokens of the vocabulary: each line carries its own, so a
    line's presence in a batch can be read off the token ids."""
    vocabulary = tokenizer.get_vocab()
    years = [str(y) for y in range(1750, 2030) if str(y) in vocabulary]
    assert len(years) >= count
    return years[:count]


def write_lines(path: Path, count: int = 60, seed: int = 0, blank_every: int = 0) -> list[str]:
    """``count`` generated lines, line i mentioning year_tokens()[i]; a blank line after every
    ``blank_every`` lines (documents) when set."""
    rng = random.Random(seed)
    years = year_tokens(minilm_tokenizer(), count)
    lines = [f"In {year} {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}." for year in years]
    text = "".join(line + "\n" + ("\n" if blank_every and (i + 1) % blank_every == 0 else "")
                   for i, line in enumerate(lines))
    path.write_text(text, encoding="utf-8")
    return lines


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    """Line index and token-id caches in the test's own directory."""
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def lines_file(tmp_path) -> Path:
    path = tmp_path / "lines.txt"
    write_lines(path)
    return path


def pretrain_overrides(corpus: Path, out_dir: Path, **extra) -> list[str]:
    """mlm-pretrain on the tiny BERT: max_seq_len 16, batch 4, fp32, no workers, 10% held out."""
    settings = {"model.from_config": json.dumps(TINY_BERT), "model.max_seq_len": 16, "data.corpus": str(corpus),
                "data.validation_fraction": 0.1, "optim.batch_size": 4, "optim.lr": "1e-3", "optim.epochs": 20,
                "optim.max_steps": 8, "train.precision": "fp32", "train.eval_steps": 4, "train.save_steps": 3,
                "train.log_steps": 1, "train.num_workers": 0, "train.seed": 3, "train.output_dir": str(out_dir)}
    settings.update(extra)
    return [f"{key}={value}" for key, value in settings.items()]


def pretrain_config(corpus: Path, out_dir: Path, recipe: str = "mlm-pretrain", **extra):
    from cselab.config import load_config

    return load_config(recipe, pretrain_overrides(corpus, out_dir, **extra))
