"""What a new user still trips over, second pass (issue 39): a directory where a file is expected, an
``hf:`` corpus offline, texts a user reads, progress and labels, and misleading messages. Each test
is named for what the user sees; the item number is in the section's title."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.test_new_user import TINY, cli, tiny_sets

# the one-line commands and the tiny settings are the first pass's (tests/reliability/test_new_user.py)



# --- 4: a directory where a file is expected ------------------------------------------------------

def test_a_directory_as_sts_file_or_encode_input_says_it_is_a_directory(saved_model, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    for argv in (["eval", str(saved_model), "--sts-file", str(folder)],
                 ["eval", str(saved_model), "--classification-file", str(folder)],
                 ["encode", str(saved_model), "--in", str(folder), "--out", str(tmp_path / "v.npy")],
                 ["augment", "--aug", "clear_word_deletion", "--in", str(folder), "--out", str(tmp_path / "a.jsonl")]):
        code, out, err = cli(argv)
        assert code == 2 and err.count("\n") == 1, (argv, err)
        assert f"{folder}: is a directory" in err and "not found" not in err, (argv, err)


def test_a_directory_as_an_sts_file_to_select_on_says_it_is_a_directory(tmp_path):
    from cselab.evaluate.dev import build_metric
    from cselab.evaluate.formats import MissingDataError

    with pytest.raises(MissingDataError, match="is a directory, not a file"):
        build_metric(f"sts:{tmp_path}", None)


# --- 5: an hf: corpus the Hub cannot serve fails at once -------------------------------------------

@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Not offline by the environment, but no connection (a laptop on a train), and nothing cached."""
    from huggingface_hub import constants

    import cselab.sources as source

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))

    def unreachable(address, timeout=None, **kwargs):
        raise OSError(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(source.socket, "create_connection", unreachable)


def test_an_hf_corpus_offline_fails_at_once_in_one_line(no_network, monkeypatch, tmp_path, caplog):
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the datasets library was asked"))
    started = time.monotonic()
    code, out, err = cli(["train", "--corpus", "hf:no-org/no-corpus", "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "1"])
    assert time.monotonic() - started < 5
    assert code == 2 and err.count("\n") == 1 and "WARNING" not in err + caplog.text, err
    assert "hf:no-org/no-corpus: not in the Hugging Face cache, and the Hub is unreachable" in err
    assert "hf download no-org/no-corpus --repo-type dataset" in err
    assert not (tmp_path / "run").exists()


def test_an_hf_corpus_is_checked_where_it_is_read_too(no_network):
    from cselab.data.corpus import CorpusError, iter_corpus

    with pytest.raises(CorpusError, match="hf:someone/lines:train: not in the Hugging Face cache"):
        next(iter_corpus("hf:someone/lines:train"))


def test_a_cached_hf_dataset_is_left_to_the_datasets_library(no_network, tmp_path):
    from cselab.sources import dataset_source_problem

    (tmp_path / "hub" / "datasets--someone--lines" / "snapshots" / "abc").mkdir(parents=True)
    (tmp_path / "datasets" / "other___prepared").mkdir(parents=True)
    assert dataset_source_problem("someone/lines") is None and dataset_source_problem("other/prepared") is None
    assert "the Hub is unreachable" in dataset_source_problem("someone/else")


def test_a_library_that_prints_its_own_lines_is_not_printed_twice():
    from cselab.cli import not_printed_already

    library = logging.getLogger("some_library_with_a_handler")
    library.addHandler(logging.NullHandler())
    try:
        record = logging.LogRecord("some_library_with_a_handler.http", logging.WARNING, __file__, 1, "retry", None,
                                   None)
        assert not not_printed_already(record)
        assert not_printed_already(logging.LogRecord("cselab.train", logging.WARNING, __file__, 1, "x", None, None))
    finally:
        library.handlers.clear()


# --- 6: text a user reads --------------------------------------------------------------------------

def test_transfer_dev_names_both_of_its_tasks(senteval_dir):
    from cselab.evaluate.dev import build_metric

    metric = build_metric("transfer_dev", senteval_dir)
    assert metric.describe() == "SST-2 + MRPC dev accuracy (fast probes)"


def test_own_files_alone_are_not_headed_as_the_papers_test_protocol(saved_model, tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a dog runs .\ta dog is running .\t4.8\na cat sleeps .\tthe market fell .\t0.2\n"
                     "a man sings .\ta man is singing .\t4.5\n")
    code, out, err = cli(["eval", str(saved_model), "--sts-file", str(pairs), "--quiet", "--no-cache"])
    assert code == 0, err
    assert "# cselab evaluation (your own data)" in out
    assert "papers" not in out and "Split test" not in out and "split test" not in out


def test_the_papers_heading_has_its_apostrophe(saved_model, senteval_dir):
    code, out, err = cli(["eval", str(saved_model), "--tasks", "STSB", "--data-dir", str(senteval_dir), "--quiet",
                          "--no-cache"])
    assert code == 0, err
    assert "# cselab evaluation (test: the papers' protocol)" in out and "(split test)" in out


def test_constant_gold_scores_are_refused_with_the_reason(saved_model, tmp_path):
    pairs = tmp_path / "same.tsv"
    pairs.write_text("a dog runs .\ta dog is running .\t3\na cat sleeps .\tthe market fell .\t3\n")
    code, out, err = cli(["eval", str(saved_model), "--sts-file", str(pairs), "--quiet", "--no-cache"])
    assert code == 2 and err.count("\n") == 1
    assert f"{pairs}: every pair has the score 3; a correlation needs scores that differ" in err


def test_an_undefined_correlation_says_why_under_the_table():
    from cselab.evaluate.report import markdown

    result = {"model": "m", "pooler": "cls", "split": "test", "seed": 1111, "date": "today", "data_dir": "/d",
              "tasks": {"STSBenchmark": {"score": float("nan")}}, "avg": float("nan"), "transfer_mode": "test"}
    table = markdown([result])
    assert "| m (cls) | - | - |" in table
    assert "-: the correlation is undefined: the model gave every pair of that task the same similarity." in table


def test_the_docs_say_what_a_line_that_is_not_utf8_does(tmp_path, small_corpus):
    docs = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    corpus_bullet = docs.split("* **Corpus**")[1].split("* **Views**")[0]
    assert "invalid UTF-8" not in corpus_bullet and "stops the run" in corpus_bullet
    latin = tmp_path / "latin.txt"
    latin.write_bytes(small_corpus.read_bytes() + "caf\xe9 au lait\n".encode("latin-1"))
    code, out, err = cli(["train", "--corpus", str(latin), "--output-dir", str(tmp_path / "run"), "--max-steps",
                          "1", *tiny_sets()])
    quoted = corpus_bullet.split("(`corpus.txt:3: ")[1].split(";")[0]  # the message the docs quote
    assert code == 2 and f"{latin}:41: {quoted.split(' (byte')[0]}" in err, err
    assert "(byte 0xE9 at byte 4 of the line)" in err


# --- 11: progress and labels -----------------------------------------------------------------------

def test_tokenising_a_corpus_the_first_time_is_said(small_corpus, capsys, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))  # a first time: no earlier test's token cache

    from cselab.data.indexed import read_corpus
    from cselab.data.token_cache import token_ids
    from cselab.sources import resolve_model_path

    corpus, _ = read_corpus(str(small_corpus))
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    token_ids(corpus, tokenizer)
    assert "tokenising 40 lines once (cached for later runs in" in capsys.readouterr().err
    token_ids(corpus, tokenizer)  # cached: nothing to say
    assert "tokenising" not in capsys.readouterr().err


def test_a_packed_runs_throughput_is_in_blocks(tmp_path, small_corpus):
    from cselab.cli import format_summary

    code, out, err = cli(["pretrain", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "2", *tiny_sets(**{"data.validation_fraction": "0",
                                                            "model.max_seq_len": "16"})])
    assert code == 0, err
    assert "blocks/s (packed blocks of tokens, not sentences)" in out and "sentences/s" not in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["throughput_unit"] == "block"
    assert "blocks/s" in (tmp_path / "run" / "README.md").read_text()
    older = {k: v for k, v in summary.items() if k != "throughput_unit"}  # written before the key: sentences
    assert "sentences/s" in format_summary({**older, "throughput_unit": "sentence"})


def test_the_evaluation_bar_names_every_task_mrpc_included(saved_model, senteval_dir, capsys):
    from cselab.evaluate.models import load_model
    from cselab.evaluate.runner import evaluate

    evaluate(load_model(str(saved_model)), senteval_dir, "SST2,MRPC", split="dev", progress=True)
    bar = capsys.readouterr().err
    assert "SST-2" in bar and "MRPC" in bar


def test_a_line_said_during_a_sweep_starts_on_a_line_of_its_own():
    import torch
    from tqdm import tqdm

    from cselab.train.rank import RankContext

    screen = io.StringIO()  # a terminal shows stdout and stderr on one screen
    with contextlib.redirect_stdout(screen), contextlib.redirect_stderr(screen):
        bar = tqdm(total=3, desc="sweep", file=sys.stderr)
        bar.update(1)
        RankContext(torch.device("cpu"), Path(".")).say("STS-B dev before training: 37.58")
        bar.close()
    shown = screen.getvalue()
    before = shown[:shown.index("STS-B dev before training")]
    assert before.endswith(("\r", "\n")) and before.rstrip("\r").rstrip(" ").endswith(("\r", "\n")), repr(shown)


# --- 10: a model worse than its start says so ------------------------------------------------------

def worse_summary(**extra) -> dict:
    return {"recipe": "simcse", "steps": 30, "total_steps": 30, "finished": True, "output_dir": "out",
            "corpus": {"kept": 100, "skipped": {}}, "first_loss": 1.0, "final_loss": 0.5, "select_on": ["stsb_dev"],
            "selected_by": "stsb_dev", "selection_label": "STS-B dev", "best_stsb_dev": 28.35, "best_step": 30,
            "base_stsb_dev": 37.58, "base_model": "minilm", "precision": {"precision": "fp32", "reason": "forced"},
            "device": "cpu", "sentences_per_second": 10.0, "wall_seconds": 5.0, **extra}


def test_the_summary_says_when_training_made_the_model_worse_and_names_the_base():
    from cselab.cli import format_summary
    from cselab.train.summary import worse_than_base

    summary = worse_summary()
    assert worse_than_base(summary, "stsb_dev")
    assert not worse_than_base({**summary, "best_stsb_dev": 40.0}, "stsb_dev")
    assert not worse_than_base({**summary, "selected_by": "last_step"}, "stsb_dev")
    text = format_summary({**summary, "worse_than_base": True})
    assert ("warning         the best model is worse than before training (28.35 against 37.58): the base model, "
            "minilm, scores higher") in text
    assert "warning" not in format_summary({**summary, "best_stsb_dev": 40.0, "worse_than_base": False})


def test_a_finished_run_that_got_worse_says_so_in_its_summary_and_card(tmp_path, small_corpus):
    from cselab.config import load_config
    from cselab.model.card import write_run_cards
    from cselab.train.loop import train

    run = tmp_path / "run"
    overrides = [f"{k}={v}" for k, v in TINY.items()] + [f"data.corpus={small_corpus}", "optim.max_steps=2",
                                                         f"train.output_dir={run}"]
    summary = train(load_config("simcse", overrides), progress=False)
    assert summary["worse_than_base"] is False and summary["base_model"] is None  # no selection; random start
    summary.update(worse_summary(output_dir=str(run), worse_than_base=True, base_model="minilm"))
    (run / "summary.json").write_text(json.dumps(summary))
    config = json.loads((run / "train_config.json").read_text())
    config["train"]["eval_steps"] = 10
    (run / "train_config.json").write_text(json.dumps(config))
    write_run_cards(run)
    assert "Training made it worse than its start: `minilm` scores higher." in (run / "README.md").read_text()


# --- 14: messages that mislead ---------------------------------------------------------------------

def test_a_refused_resume_names_the_old_and_new_values(tmp_path, small_corpus):
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "1", *tiny_sets(**{"train.save_steps": "1", "optim.lr": "1e-3"})])
    assert code == 0, err
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "1", *tiny_sets(**{"train.save_steps": "1", "optim.lr": "1e-4"})])
    assert code == 2 and err.count("\n") == 1
    assert "was made with a different optim.lr (0.001 then, 0.0001 now)" in err, err


def test_describe_differences_cuts_a_long_value():
    from cselab.train.checkpoint import describe_differences

    saved = {"objective": [{"name": "infonce", "temperature": 0.05, "extra": "x" * 200}]}
    text = describe_differences(saved, {"objective": [{"name": "focal"}]}, ["objective"])
    assert text.startswith('objective ([{"name": "infonce"') and '..." then' not in text and "... then" in text
    assert text.endswith('[{"name": "focal"}] now)')


@pytest.mark.parametrize("folder", ["run", "run/checkpoints"])
def test_eval_on_a_run_still_training_says_to_wait_not_to_train_again(tmp_path, folder):
    import os
    import socket

    run = tmp_path / "run"
    (run / "checkpoints" / "step-00000002").mkdir(parents=True)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a b .\tc d .\t1\ne f .\tg h .\t2\n")
    (run / "train_config.json").write_text("{}")
    (run / "metrics.jsonl").write_text("")
    lock = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-01-01 10:00:00"}
    (run / ".cselab-train.lock").write_text(json.dumps(lock))
    code, out, err = cli(["eval", str(tmp_path / folder), "--sts-file", str(pairs)])
    assert code == 2 and err.count("\n") == 1
    assert f"it is still training, pid {os.getpid()} on {socket.gethostname()}" in err and "again" not in err, err
    lock["pid"] = 2 ** 22 + 12345  # no such process: the run died
    (run / ".cselab-train.lock").write_text(json.dumps(lock))
    code, out, err = cli(["eval", str(tmp_path / folder), "--sts-file", str(pairs)])
    assert code == 2 and "run its train command again to finish" in err, err


# --- 11c: the bar names every metric an evaluation scores ------------------------------------------

def test_the_bar_names_every_metric_an_evaluation_scores(tmp_path, small_corpus, senteval_dir):
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "2", *tiny_sets(**{"train.eval_steps": "2", "data.dev_dir": str(senteval_dir),
                                                            "train.select_on": "[stsb_dev,transfer_dev]"})])
    assert code == 0, err
    assert "evaluating STS-B dev + transfer dev..." in err  # AugCSE's transfer probes run under their name too
