"""`cselab report` and `cselab sweep` through the command line."""
from __future__ import annotations

import argparse

from cselab.experiments.cli import register


def test_register_adds_both_subcommands():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "--recipes", "simcse,una", "--seeds", "42,0,1", "--set", "optim.lr=1e-5"])
    assert args.recipes == "simcse,una" and args.overrides == ["optim.lr=1e-5"] and args.eval_split == "dev"
    args = parser.parse_args(["report", "a", "b", "--baseline", "una"])
    assert args.runs == ["a", "b"] and args.baseline == "una"


def test_report_command_writes_into_the_sweep_directory(cli, fake_sweep, capsys):
    assert cli(["report", str(fake_sweep)]) == 0
    out = capsys.readouterr().out
    for name in ("report.md", "report.html", "report.json"):
        assert (fake_sweep / "report" / name).is_file() and name in out
    # the report directory itself is not mistaken for a run on the next report
    assert cli(["report", str(fake_sweep), "--out", str(fake_sweep / "report")]) == 0


def test_bad_input_is_a_one_line_error(cli, tmp_path, capsys):
    assert cli(["report", str(tmp_path / "missing")]) == 2
    assert cli(["sweep", "--recipes", "simcse", "--seeds", "1,x", "--out", str(tmp_path)]) == 2
    assert cli(["sweep", "--recipes", "no-such-recipe", "--no-eval", "--out", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3 and all(e.startswith("cselab ") and "error:" in e for e in errors)
    assert "missing" in errors[0] and "'x'" in errors[1] and "no-such-recipe" in errors[2]


def test_grid_dry_run_and_search_option_errors(cli, tmp_path, capsys):
    args = ["sweep", "--recipes", "simcse", "--seeds", "1,2", "--no-eval", "--out", str(tmp_path / "out")]
    assert cli([*args, "--grid", "optim.lr=1e-5,3e-5", "--dry-run"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("simcse optim.lr=1e-5 seed 1")
    assert "to train" in lines[0] and "not evaluated (--no-eval)" in lines[0]
    assert lines[0].rstrip().endswith(str(tmp_path / "out" / "simcse" / "optim.lr=1e-5" / "seed-1"))
    assert cli([*args, "--space", "optim.lr=1e-5:1e-4"]) == 2
    assert cli([*args, "--search", "2", "--space", "optim.lr=1e-5:1e-4", "--grid", "optim.batch_size=8,16"]) == 2
    assert cli([*args, "--grid", "optim.lr"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 3
    assert "add --search N" in errors[0] and "use one" in errors[1] and "--grid 'optim.lr'" in errors[2]
