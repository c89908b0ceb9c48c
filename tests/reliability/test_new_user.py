"""What a new user trips over (issue 34): recipe names beside folders of the same name, the
``data.max_sentences=null`` hint, a model name the Hub cannot serve, the bar during evaluation,
``cselab encode``'s checks, and the summary's loss and before/after lines."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

from cselab.cli import main
from cselab.config import ConfigError, load_config
from cselab.config.schema import BUILTIN_CAP
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


# --- 3: a model name the Hub cannot serve fails at once -------------------------------------------

@pytest.fixture
def hub_not_offline(monkeypatch):
    """The environment does not say offline (tests run with HF_HUB_OFFLINE=1); transformers must not be
    reached: a name that cannot be served is refused before it."""
    from huggingface_hub import constants
    from transformers import AutoTokenizer

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def asked(*args, **kwargs):
        raise AssertionError("transformers was asked for a model the Hub cannot serve")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", asked)


def test_an_unreachable_hub_is_said_at_once(hub_not_offline, monkeypatch, tmp_path, caplog):
    import socket
    import time

    import cselab.sources as source

    timeouts = []

    def unreachable(address, timeout=None, **kwargs):  # stands in for a machine without network
        timeouts.append(timeout)
        raise socket.gaierror(-3, "Temporary failure in name resolution")

    monkeypatch.setattr(source.socket, "create_connection", unreachable)
    sentences = tmp_path / "in.txt"
    sentences.write_text("a sentence\n")
    started = time.monotonic()
    code, out, err = cli(["encode", "no-such-org/no-such-model", "--in", str(sentences), "--out",
                          str(tmp_path / "e.npy")])
    assert time.monotonic() - started < 5
    assert code == 2 and err.count("\n") == 1 and "WARNING" not in err + caplog.text, err
    assert "the Hub is unreachable (no connection to huggingface.co" in err and "Temporary failure" in err
    assert "huggingface-cli download no-such-org/no-such-model" in err
    assert timeouts and all(t <= 3 for t in timeouts)  # a short connect, not huggingface_hub's retries


def test_hf_hub_offline_is_said_without_trying(monkeypatch, tmp_path):
    import cselab.sources as source

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(source.socket, "create_connection", lambda *a, **k: pytest.fail("connected although offline"))
    code, out, err = cli(["train", "--set", "model.name_or_path=bert-base-uncased-not-cached", "--max-steps", "1",
                          "--output-dir", str(tmp_path / "run"), "--corpus", "builtin:wordnet-glosses"])
    assert code == 2 and "the Hub is unreachable (HF_HUB_OFFLINE is set)" in err, err
    assert not (tmp_path / "run").exists()


def test_a_hanging_name_lookup_counts_as_unreachable(monkeypatch):
    import threading
    import time

    import cselab.sources as source

    released, errors = threading.Event(), []

    def hanging(*args, **kwargs):  # a resolver that hangs, then gives up as a real one does (issue 39 item 15)
        released.wait(30)
        raise TimeoutError("timed out")

    monkeypatch.setattr(source.socket, "create_connection", hanging)
    monkeypatch.setattr(threading, "excepthook", errors.append)
    started = time.monotonic()
    reason = source.unreachable_reason()
    assert time.monotonic() - started < source.CONNECT_SECONDS + 1 and reason.endswith("no answer")
    released.set()  # the attempt ends with the test, not during a later one
    for thread in [t for t in threading.enumerate() if t.name == source.CONNECT_THREAD]:
        thread.join(5)
    assert errors == []  # the attempt's thread raised nothing (pytest would warn of it in some later test)


def test_encode_refuses_an_unservable_name_before_importing_torch(tmp_path):
    import os
    import subprocess
    import sys

    sentences = tmp_path / "in.txt"
    sentences.write_text("a sentence\n")
    code = ("import sys; from cselab.cli import main; "
            f"code = main(['encode', 'no-such-org/no-such-model', '--in', {str(sentences)!r}, '--out', 'e.npy']); "
            "sys.exit(10 + code if 'torch' in sys.modules else code)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert done.returncode == 2 and "HF_HUB_OFFLINE is set" in done.stderr, (done.returncode, done.stderr)


# --- 4: what the path is, and what a model directory / corpus must hold ----------------------------

@pytest.mark.parametrize("kind", ["binary_file", "text_file", "safetensors_file", "stray_files_folder", "empty_folder",
                                  "report_folder", "checkpoints_folder", "unfinished_run_folder"])
def test_a_path_that_is_no_model_is_named_for_what_it_is(tmp_path, kind):
    from tests.reliability.test_fuzz_cli import MODEL_WORDS, make_path

    path = make_path(tmp_path, kind, "simcse", b"\x00\x01", ["weights.bin", "notes.txt"])
    sentences = tmp_path / "in.txt"
    sentences.write_text("a sentence\n")
    code, out, err = cli(["encode", str(path), "--in", str(sentences), "--out", str(tmp_path / "e.npy")])
    assert code == 2 and err.count("\n") == 1 and MODEL_WORDS[kind] in err, err
    assert "a model directory holds config.json" in err and "pickled" not in err


def test_a_checkpoints_folder_points_at_the_trained_model(tmp_path):
    from cselab.errors import ModelLoadError
    from cselab.sources import check_model_source

    (tmp_path / "run" / "checkpoints" / "step-00000002").mkdir(parents=True)
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match="a run's checkpoints folder; its trained model is the run's output"):
        check_model_source("run/checkpoints", str(tmp_path / "run" / "checkpoints"))


@pytest.mark.parametrize(("data", "expected"), [
    (b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4, "gzip data (name it .gz)"),
    (b"PK\x03\x04\x14\x00" + bytes(range(256)) * 4, "a zip archive"),
    (bytes(range(256)) * 8, "binary data, not text")])
def test_a_binary_corpus_is_called_binary_not_latin1(tmp_path, data, expected):
    from cselab.data.corpus import CorpusError
    from cselab.data.indexed import read_corpus

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(data)
    with pytest.raises(CorpusError, match="a corpus is UTF-8 text, one sentence a line") as error:
        read_corpus(str(corpus))
    assert expected in str(error.value) and "iconv" not in str(error.value)


def test_an_existing_file_as_output_dir_says_what_it_is(tmp_path, small_corpus):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine\n")
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(taken), "--max-steps", "1",
                          *tiny_sets()])
    assert code == 2 and f"train.output_dir: {taken} is an existing file, not a folder" in err, err
    assert taken.read_text() == "mine\n"


# --- 6: cselab encode's --out and --in ----------------------------------------------------------------

def test_encode_refuses_a_folder_as_out_and_an_empty_input(tmp_path):
    folder = tmp_path / "embeddings"
    folder.mkdir()
    sentences = tmp_path / "in.txt"
    sentences.write_text("a sentence\n")
    code, out, err = cli(["encode", "minilm", "--in", str(sentences), "--out", str(folder)])
    assert code == 2 and "is a folder; give the .npy file to write" in err, err
    assert not (tmp_path / "embeddings.npy").exists()
    sentences.write_text("")
    code, out, err = cli(["encode", "minilm", "--in", str(sentences), "--out", str(tmp_path / "e.npy")])
    assert code == 2 and "empty file, nothing to encode" in err, err
    assert not (tmp_path / "e.npy").exists()


# --- 5: the bar during evaluation ---------------------------------------------------------------------

def test_the_bar_says_when_it_evaluates_and_the_base_evaluation_is_announced(tmp_path, small_corpus, stsb_dev_dir):
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"),
                          "--max-steps", "4", *tiny_sets(**{"train.eval_steps": "2",
                                                            "data.dev_dir": str(stsb_dev_dir)})])
    assert code == 0, err
    assert "evaluating the starting model before training..." in out
    assert "evaluating STS-B dev..." in err  # the training bar's postfix while it evaluates


def test_the_speed_estimate_leaves_the_evaluation_out():
    import time

    from tqdm import tqdm

    from cselab.train.metrics import MetricsLog, RunClock
    from cselab.train.state import LoaderPosition

    shown = io.StringIO()
    bar = tqdm(total=10, file=shown, mininterval=0)
    bar.update(1)
    log = MetricsLog(1, LoaderPosition(), RunClock(), None)
    log.bar = bar
    with log.evaluating("STS-B dev"):
        time.sleep(0.3)
    assert bar.format_dict["elapsed"] < 0.25  # the 0.3 s evaluation is not training time
    assert "evaluating STS-B dev..." in shown.getvalue()
    bar.close()


def test_no_nested_bar_writes_escape_codes_into_a_log(tmp_path, small_corpus, stsb_dev_dir):
    """A sweep's bar is open and stderr is a file: the training bar and the encoding bar stay away."""
    from tqdm import tqdm

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        outer = tqdm(total=1, desc="sweep")
        code = main(["train", "--corpus", str(small_corpus), "--output-dir", str(tmp_path / "run"), "--max-steps",
                     "2", *tiny_sets(**{"train.eval_steps": "2", "data.dev_dir": str(stsb_dev_dir)})])
        outer.close()
    assert code == 0 and "\x1b[" not in err.getvalue(), err.getvalue()[-2000:]


# --- 9: the summary's losses, the column a table is read from -----------------------------------------

def test_the_summary_losses_are_the_first_and_last_logged_windows(tmp_path, small_corpus):
    out_dir = tmp_path / "run"
    code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(out_dir), "--max-steps", "6",
                          *tiny_sets(**{"train.log_steps": "3"})])
    assert code == 0, err
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out_dir / "summary.json").read_text())
    assert [r["step"] for r in records] == [3, 6]
    assert summary["first_loss"] == records[0]["loss"] and summary["final_loss"] == records[-1]["loss"]


def test_a_table_corpus_says_which_column_it_trains_on(tmp_path):
    corpus = tmp_path / "pairs.csv"
    corpus.write_text("id,text,label\n" + "".join(f"{i},sentence number {i} here,0\n" for i in range(40)))
    code, out, err = cli(["train", "--corpus", str(corpus), "--output-dir", str(tmp_path / "run"), "--max-steps", "1",
                          *tiny_sets()])
    assert code == 0, err
    assert f"corpus: training on the 'text' column of {corpus} (--set data.column=NAME for another)" in out


# --- 10: a before/after signal without dev data -------------------------------------------------------

def test_the_summary_shows_alignment_and_uniformity_before_and_after(tmp_path, small_corpus):
    from cselab.train.geometry import HELD_OUT

    runs = {}
    for lines in ("512", "0"):
        out_dir = tmp_path / f"run-{lines}"
        code, out, err = cli(["train", "--corpus", str(small_corpus), "--output-dir", str(out_dir), "--max-steps", "4",
                              *tiny_sets(**{"data.max_sentences": "30", "train.geometry_lines": lines,
                                            "optim.lr": "1e-3"})])
        assert code == 0, err
        runs[lines] = (out, json.loads((out_dir / "summary.json").read_text()), (out_dir / "metrics.jsonl"))
    out, summary, metrics = runs["512"]
    geometry = summary["geometry"]
    assert geometry["lines"] == 10 and geometry["source"] == HELD_OUT  # the 10 lines the cap of 30 left out
    assert geometry["base"] != geometry["trained"]
    assert all(-5 < geometry[when]["uniformity"] <= 0 and 0 <= geometry[when]["alignment"] <= 4
               for when in ("base", "trained"))
    shown = f"{geometry['base']['alignment']:.4g} -> {geometry['trained']['alignment']:.4g}"
    assert f"alignment       {shown}" in out and "lower is better for both" in out
    assert runs["0"][1]["geometry"] is None and "alignment" not in runs["0"][0]
    # Measured outside the training's random stream: the same steps, the same losses.
    losses = [[json.loads(line)["loss"] for line in path.read_text().splitlines()] for _, _, path in runs.values()]
    assert losses[0] == losses[1]


def test_left_out_lines_are_the_ones_the_cap_does_not_train_on(tmp_path):
    from cselab.data.indexed import left_out_lines, read_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"line number {i}\n" for i in range(50)))
    trained, _ = read_corpus(str(corpus), None, 20, seed=3)
    held_out = left_out_lines(str(corpus), None, 20, 3, count=100)
    assert len(held_out) == 30 and not set(held_out) & set(trained)
    assert left_out_lines(str(corpus), None, None, 3, count=100) == []
