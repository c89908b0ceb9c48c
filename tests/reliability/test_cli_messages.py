"""What the command line says: honest step counts, counts in the right number, help without
"(default: None)", every error in one line (argparse's too), an unreadable corpus named in one line."""
from __future__ import annotations

import argparse
import builtins
import json

import pytest

from cselab.cli import build_parser, main
from cselab.errors import counted
from tests.conftest import TINY_BERT


def tiny_train(corpus, out_dir, *extra: str) -> list[str]:
    settings = {"model.from_config": json.dumps(TINY_BERT), "optim.batch_size": 8, "train.eval_steps": 0,
                "train.save_steps": 0, "train.num_workers": 0, "train.precision": "fp32"}
    argv = ["train", "--corpus", str(corpus), "--output-dir", str(out_dir), *extra]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    return argv


@pytest.fixture
def small_corpus(tmp_path, monkeypatch):
    """12 sentences: one epoch of batch 8 is 2 steps."""
    monkeypatch.setenv("CSELAB_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "small.txt"
    path.write_text("".join(f"sentence number {i} is about a cat\n" for i in range(12)))
    return path


def test_max_steps_beyond_the_corpus_is_reported_as_it_is(small_corpus, tmp_path, capsys):
    """--max-steps 5 on a corpus of 2 steps an epoch: either 5 steps are trained (max_steps overrides
    epochs) or the summary says why there were fewer, never a bare '2/2' as if 5 had been done."""
    assert main(tiny_train(small_corpus, tmp_path / "run", "--max-steps", "5")) == 0
    first = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("recipe "))
    assert first.startswith("recipe simcse: 5/5 steps") or (
        first.startswith("recipe simcse: 2/2 steps") and "optim.max_steps asked for 5" in first
        and "1 epoch of this corpus is 2 steps" in first), first


def test_counts_are_in_the_right_number(tmp_path, capsys):
    assert [counted(n, "augmenter") for n in (0, 1, 2)] == ["0 augmenters", "1 augmenter", "2 augmenters"]
    assert counted(1, "sentence pair") == "1 sentence pair" and counted(3, "child", "children") == "3 children"
    source = tmp_path / "one.txt"
    source.write_text("just one sentence here\n")
    assert main(["augment", "--aug", "eda_random_swap", "--in", str(source), "--out", str(tmp_path / "a.jsonl")]) == 0
    assert "1 new record (1 sentence x 1 augmenter) ->" in capsys.readouterr().out


def all_parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from all_parsers(child)


def test_no_help_shows_default_none_and_none_shows_a_default_twice():
    parsers = list(all_parsers(build_parser()))
    assert {p.prog for p in parsers} >= {"cselab train", "cselab encode", "cselab eval", "cselab data download"}
    for parser in parsers:
        text = " ".join(parser.format_help().split())  # help wraps lines; compare as one line
        assert "(default: None)" not in text, parser.prog
        formatter = parser._get_formatter()
        for action in parser._actions:
            if action.help and action.help is not argparse.SUPPRESS:
                shown = formatter._get_help_string(action).replace("%(default)s", str(action.default))
                assert shown.count("(default") <= 1, (parser.prog, action.dest, shown)
    train_help = " ".join(build_parser()._subparsers._group_actions[0].choices["train"].format_help().split())
    assert "(default: simcse)" in train_help  # real defaults are still shown


@pytest.mark.parametrize("argv", [["train", "--set"], ["train", "--max-steps", "many"], ["no-such-command"],
                                  ["data"], ["train", "--set", "optim.l\x1br=1"], ["train", "--set", "a\x0cb=1"],
                                  ["train", "--set", "optim\u2028.lr=1"]])
def test_every_error_is_one_line(argv, capsys, tmp_path):
    if argv[0] == "train" and len(argv) > 2:
        argv = argv + ["--output-dir", str(tmp_path / "run"), "--max-steps", "1"]  # stopped at once if it ran
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error: " in err, err
    assert not (tmp_path / "run").exists()


def test_an_unreadable_corpus_whose_index_is_cached_is_one_line(small_corpus, tmp_path, capsys, monkeypatch):
    """The second run finds the line index cached and would only open the file at the first batch.
    (chmod 000 does not stop root, so the refusal is simulated: open() of the corpus fails.)"""
    assert main(tiny_train(small_corpus, tmp_path / "first", "--max-steps", "1")) == 0
    capsys.readouterr()
    real_open = builtins.open

    def refusing_open(file, *args, **kwargs):
        if str(file) == str(small_corpus):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing_open)
    assert main(tiny_train(small_corpus, tmp_path / "second", "--max-steps", "1")) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"cselab train: error: {small_corpus}: cannot read (Permission denied)"
    assert not (tmp_path / "second").exists()


def test_a_directory_in_place_of_the_corpus_is_one_line(small_corpus, tmp_path, capsys):
    folder = tmp_path / "folder.txt"
    folder.mkdir()
    assert main(tiny_train(folder, tmp_path / "run", "--max-steps", "1")) == 2
    assert capsys.readouterr().err.strip() == f"cselab train: error: {folder}: is a directory, not a corpus file"


def test_an_output_path_that_cannot_be_written_is_one_line(tiny_encoder, tmp_path, capsys):
    """OSErrors on the user's paths (a directory as --out, no permission, a full disk) are user errors."""
    model = tiny_encoder.save(tmp_path / "model")
    sentences = tmp_path / "in.txt"
    sentences.write_text("one\n")
    taken = tmp_path / "taken.npy"
    taken.mkdir()
    assert main(["encode", str(model), "--in", str(sentences), "--out", str(taken)]) == 2
    assert capsys.readouterr().err.strip() == (f"cselab encode: error: --out {taken}: is a folder; give the .npy "
                                               f"file to write, e.g. {taken / 'embeddings.npy'}")


def test_a_closed_pipe_ends_the_command_quietly(capsys):
    """`cselab recipes | head -1`: the reader closed the pipe; no error, no traceback."""
    import contextlib
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    with contextlib.redirect_stdout(ClosedPipe()):
        assert main(["recipes"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("setting", "message"), [("ratio=x", "ratio: expected a finite number, got 'x'"),
                                                   ("bogus=1", "bogus: unknown parameter")])
def test_augment_checks_parameters_against_the_augmenters_signature(tmp_path, capsys, setting, message):
    """`cselab augment --set` is checked as a recipe's augmenter parameters are (a value of the wrong type
    was built and failed later, or not at all)."""
    source = tmp_path / "in.txt"
    source.write_text("a cat sat on the mat\n")
    out = tmp_path / "a.jsonl"
    assert main(["augment", "--aug", "random_crop", "--set", setting, "--in", str(source), "--out", str(out)]) == 2
    assert f"augmenter random_crop: {message}" in capsys.readouterr().err
