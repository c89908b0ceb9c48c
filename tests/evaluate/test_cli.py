"""`cselab eval` and `cselab data check` on a generated SentEval directory with the tiny encoder."""
from __future__ import annotations

import json

import pytest

from cselab import cli


def test_eval_writes_json_with_avg_and_markdown(saved_model, senteval_dir, tmp_path, capsys):
    out = tmp_path / "results" / "eval.json"
    code = cli.main(["eval", str(saved_model), "--tasks", "all", "--data-dir", str(senteval_dir), "--json", str(out),
                     "--transfer-mode", "fast", "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    assert code == 0
    results = json.loads(out.read_text())
    assert isinstance(results["avg"], float)
    sts = [results["tasks"][n]["score"] for n in results["avg_over"]]
    assert len(sts) == 7 and results["avg"] == pytest.approx(sum(sts) / 7)
    assert results["pooler"] == "cls" and results["data_dir"] == str(senteval_dir.resolve())
    assert set(results["tasks"]) >= {"MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC", "align"}
    table = out.with_suffix(".md").read_text()
    assert "| Model (pooler) | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg. |" in table
    assert "| MR | CR | SUBJ | MPQA | SST-2 | TREC | MRPC | Avg. |" in table
    assert f"{results['avg']:.2f} |" in table
    assert str(senteval_dir.resolve()) in table
    assert "STS-B | SICK-R | Avg." in capsys.readouterr().out


def test_eval_compares_models_side_by_side(saved_model, senteval_dir, tmp_path):
    out = tmp_path / "two.json"
    code = cli.main(["eval", str(saved_model), str(saved_model), "--pooler", "avg", "--tasks", "STSB,SICK-R",
                     "--data-dir", str(senteval_dir), "--json", str(out), "--no-cache", "--quiet"])
    assert code == 0
    models = json.loads(out.read_text())["models"]
    assert len(models) == 2 and all(m["pooler"] == "avg" and "avg" in m for m in models)
    rows = [line for line in out.with_suffix(".md").read_text().splitlines()
            if line.startswith("| ") and "(avg)" in line]
    assert len(rows) == 2


def test_dev_split_table_labels(saved_model, senteval_dir, tmp_path):
    out = tmp_path / "dev.json"
    assert cli.main(["eval", str(saved_model), "--split", "dev", "--tasks", "sts", "--data-dir", str(senteval_dir),
                     "--json", str(out), "--no-cache", "--quiet", "--precision", "bf16"]) == 0
    assert "| STS-B (dev) | SICK-R (trial) | Avg. |" in out.with_suffix(".md").read_text()
    results = json.loads(out.read_text())
    assert results["avg_over"] == ["STSBenchmark", "SICKRelatedness"] and results["precision"] == "bf16"
    assert isinstance(results["avg"], float)


def test_missing_data_names_file_and_download_command(saved_model, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["eval", str(saved_model), "--data-dir", str(empty), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("cselab eval: error: ") and "STS.input.MSRpar.txt: not found" in error
    assert "cselab data download" in error and len(error.strip().splitlines()) == 1


def test_bad_task_and_bad_file_are_one_line_errors(saved_model, senteval_dir, capsys):
    assert cli.main(["eval", str(saved_model), "--tasks", "STS99", "--data-dir", str(senteval_dir)]) == 2
    assert "unknown evaluation task 'STS99'" in capsys.readouterr().err
    (senteval_dir / "STS/STSBenchmark/sts-test.csv").write_text("only\tthree\tcolumns\n")
    assert cli.main(["eval", str(saved_model), "--tasks", "STSB", "--data-dir", str(senteval_dir), "--no-cache",
                     "--quiet"]) == 2
    assert "sts-test.csv:1: expected at least 7 tab-separated columns" in capsys.readouterr().err


def test_data_check(senteval_dir, capsys):
    assert cli.main(["data", "check", "--data-dir", str(senteval_dir)]) == 0
    out = capsys.readouterr().out
    assert "test: ok" in out and "missing" not in out
