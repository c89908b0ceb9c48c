"""What a new user trips over (issue 34): recipe names beside folders of the same name, the
``data.max_sentences=null`` hint, a model name the Hub cannot serve, the bar during evaluation,
``cselab encode``'s checks, and the summary's loss and before/after lines."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from cselab.cli import main
from cselab.config import BUILTIN_CAP, ConfigError, load_config
from tests.conftest import TINY_BERT

TINY = {"model.from_config": json.dumps(TINY_BERT), "train.num_workers": "0", "train.device": "cpu",
        "train.precision": "fp32", "train.eval_steps": "0", "train.compile": "false", "optim.batch_size": "4",
        "train.log_steps": "1"}


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def tiny_sets(**extra) -> list[str]:
    return [item for key, value in {**TINY, **extra}.items() for item in ("--set", f"{key}={value}")]


@pytest.fixture
def small_corpus(tmp_path) -> Path:
    words = "the cat dog bird river garden house letter song map apple ball sees likes reads red old".split()
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(6)) for i in range(40)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


# --- 1: a folder named like a recipe never shadows it ---------------------------------------------

def test_folders_named_like_recipes_do_not_shadow_them(tmp_path, monkeypatch, small_corpus):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "focal").mkdir()
    (tmp_path / "simcse").mkdir()
    (tmp_path / "simcse" / "stray.txt").write_text("not a recipe")
    assert load_config("una").recipe == "una"  # una.yaml inherits simcse: a shipped name, not ./simcse
    assert load_config("focal").objective[0]["name"] == "focal"
    code, out, err = cli(["train", "--recipe", "simcse", "--print-config"])
    assert code == 0 and json.loads(out)["recipe"] == "simcse", err


def test_training_into_a_folder_named_like_a_recipe_runs_and_resumes(tmp_path, monkeypatch, small_corpus):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "focal").mkdir()
    argv = ["train", "--output-dir", "simcse", "--corpus", str(small_corpus), *tiny_sets()]
    code, out, err = cli([*argv, "--max-steps", "3"])
    assert code == 0, err
    code, out, err = cli([*argv, "--max-steps", "3"])  # the same output dir again: it resumes
    assert code == 0, err
    assert "resuming from simcse/checkpoints/step-00000003" in out
    steps = [json.loads(line)["step"] for line in (tmp_path / "simcse" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    code, out, err = cli(["train", "--recipe", "focal", "--output-dir", "f", "--corpus", str(small_corpus),
                          "--max-steps", "1", *tiny_sets()])
    assert code == 0, err


@pytest.mark.parametrize(("recipe", "expected"), [("simcse/", "is a folder, not a recipe file"),
                                                  ("missing.yaml", "file not found"),
                                                  ("simcsee", "did you mean 'simcse'?"),
                                                  ("focall", "did you mean 'focal'?")])
def test_recipe_paths_and_typos(tmp_path, monkeypatch, recipe, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "simcse").mkdir()
    with pytest.raises(ConfigError, match=expected):
        load_config(recipe)


def test_an_existing_file_is_a_recipe_path_and_inherit_names_stay_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").write_text("inherit: una\noptim:\n  lr: 7.0e-6\n")  # no suffix, but a file
    (tmp_path / "una").mkdir()  # beside the recipe file: a folder, so `inherit: una` is the shipped recipe
    config = load_config("mine")
    assert config.optim.lr == 7.0e-6 and config.views.negative != "none"


# --- 2: data.max_sentences=null trains on every sentence ------------------------------------------

def test_max_sentences_null_means_every_sentence_of_the_builtin_corpus():
    from cselab.data.indexed import read_corpus

    default = load_config("simcse")
    assert default.data.max_sentences == BUILTIN_CAP  # --print-config shows the cap in effect
    every = load_config("simcse", ["data.max_sentences=null"])
    sentences, stats = read_corpus(every.data.corpus, every.data.column, every.data.max_sentences)
    assert len(sentences) > BUILTIN_CAP and stats.sample_note() is None
    sampled, stats = read_corpus(default.data.corpus, default.data.column, default.data.max_sentences)
    assert len(sampled) == BUILTIN_CAP and "--set data.max_sentences=null for all" in stats.sample_note()
    with pytest.raises(ConfigError, match="data.max_sentences: must be >= 2, null"):
        load_config("simcse", ["data.max_sentences=some"])
