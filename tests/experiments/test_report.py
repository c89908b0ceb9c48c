"""The Markdown / HTML / JSON report from synthetic runs."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fake_runs import make_run

from cselab.experiments import ExperimentError
from cselab.experiments.report import write_report


def _eval(sweep, recipe, seed):
    return json.loads((sweep / recipe / f"seed-{seed}" / "eval-dev.json").read_text())


def test_markdown_has_the_papers_columns_with_mean_std_and_the_best_in_bold(fake_sweep, tmp_path):
    written = write_report([fake_sweep], tmp_path / "out")
    text = written["markdown"].read_text()
    header = next(line for line in text.splitlines() if line.startswith("| Recipe | Seeds | STS-B (dev)"))
    assert header == "| Recipe | Seeds | STS-B (dev) | SICK-R (trial) | Avg. |"
    averages = {r: [_eval(fake_sweep, r, s)["avg"] for s in (42, 0, 1)] for r in ("simcse", "una", "focal")}
    best = max(averages, key=lambda r: np.mean(averages[r]))
    for recipe, values in averages.items():
        cell = f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"
        row = next(line for line in text.splitlines() if line.startswith(f"| {recipe} | 3 | ") and "(dev)" not in line
                   and cell in line)
        assert (f"**{cell}**" in row) == (recipe == best)
    assert "| Recipe | Seeds | SST-2 (dev) | MRPC (train CV) | Avg. |" in text
    assert "| Recipe | Seeds | Alignment | Uniformity |" in text
    assert "ttest_rel" in text and "low power" in text
    assert "STS-B (dev) column is optimistically biased" in text  # dev split: STS-B dev also selected the model
    for name in ("stsb-dev-curves", "align-uniform", "loss-curves", "bars-sts", "bars-transfer"):
        assert f"(plots/{name}.svg)" in text
        assert (tmp_path / "out" / "plots" / f"{name}.svg").read_text().startswith("<svg")
    # every run's exact configuration and the recorded versions
    assert text.count("```json") == 9
    assert "0123456789" in text


def test_html_is_self_contained(fake_sweep, tmp_path):
    page = write_report([fake_sweep], tmp_path / "out")["html"].read_text()
    assert page.count("<svg") == 5 and page.count("<table") >= 8
    assert "<style>" in page
    assert not re.search(r"<(link|script|img|iframe)\b", page)
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", page)  # only in-page references
    assert "url(http" not in page and "@import" not in page
    # beyond XML namespace names (identifiers, never fetched) no address appears at all
    assert not re.findall(r"https?://(?!www\.w3\.org/)", page)


def test_report_json_holds_the_tables(fake_sweep, tmp_path):
    data = json.loads(write_report([fake_sweep], tmp_path / "out")["json"].read_text())
    assert data["split"] == "dev" and data["baseline"] == "simcse"
    una = data["tables"]["sts"]["rows"]["una"]["avg"]
    assert una["mean"] == pytest.approx(np.mean([_eval(fake_sweep, "una", s)["avg"] for s in (42, 0, 1)]))
    assert una["vs_baseline"]["n"] == 3


def test_missing_baseline_unfinished_runs_and_missing_curves_are_said(tmp_path):
    make_run(tmp_path / "s", "una", 1, 70)
    make_run(tmp_path / "s", "una", 2, 72, finished=False)
    for seed in (1, 2):  # no STS-B dev records
        path = tmp_path / "s" / "una" / f"seed-{seed}" / "metrics.jsonl"
        path.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "stsb_dev"}) + "\n"
                                for line in path.read_text().splitlines()))
    text = write_report([tmp_path / "s"], tmp_path / "out", baseline="simcse")["markdown"].read_text()
    assert "'simcse' has no runs here" in text
    assert "Not finished" in text and "una seed 2" in text
    assert "Not drawn: no STS-B dev evaluations" in text


def test_split_choice(tmp_path):
    make_run(tmp_path / "s", "simcse", 1, 70)
    make_run(tmp_path / "s", "simcse", 2, 70)
    with pytest.raises(ExperimentError, match="no run has eval-test.json"):
        write_report([tmp_path / "s"], tmp_path / "out", split="test")
    make_run(tmp_path / "t", "simcse", 1, 70, split=None)
    text = write_report([tmp_path / "t"], tmp_path / "out2")["markdown"].read_text()
    assert "No evaluation results" in text


def test_test_split_uses_the_papers_column_order(tmp_path):
    for recipe, level in (("simcse", 76.0), ("una", 77.0)):
        for seed in (1, 2, 3):
            make_run(tmp_path / "s", recipe, seed, level, split="test")
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert ("| Recipe | Seeds | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg. |") in text
    assert "| Recipe | Seeds | MR | CR | SUBJ | MPQA | SST-2 | TREC | MRPC | Avg. |" in text
    assert "test sets (the papers' protocol)" in text and "optimistically biased" not in text


def test_training_cost_table_gives_mean_and_std_of_the_summaries(tmp_path):
    from cselab.experiments.report import build_document
    from cselab.experiments.runs import find_runs

    make_run(tmp_path, "simcse", 1, 80, steps=40)
    make_run(tmp_path, "simcse", 3, 80, steps=40)
    make_run(tmp_path, "focal", 1, 81, steps=20, finished=False)  # unfinished: no cost reported
    doc = build_document(find_runs([tmp_path]), baseline="simcse")
    cost = next(t for t in doc.tables if t.name == "training")
    assert cost.recipes == ["simcse"]
    cell = cost.cells[("simcse", "train_seconds")]
    assert cell.values == {1: 401.0, 3: 403.0}
    assert cell.std == pytest.approx(2 ** 0.5)
    from cselab.experiments.report import to_markdown

    assert "Training time (s)" in to_markdown(doc)
