"""The Markdown / HTML / JSON report from synthetic runs."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
from fake_runs import BASE_DEV, make_run

from cselab.experiments import ExperimentError
from cselab.experiments.report import write_report


def _eval(sweep, recipe, seed):
    return json.loads((sweep / recipe / f"seed-{seed}" / "eval-dev.json").read_text())


def _summary(sweep, recipe, seed):
    return json.loads((sweep / recipe / f"seed-{seed}" / "summary.json").read_text())


def _row(text: str, first_cell: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is ``first_cell``."""
    line = next(line for line in text.splitlines() if line.startswith(f"| {first_cell} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def _mean_std(values: list[float]) -> str:
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"


def _table_after(text: str, title_start: str) -> list[str]:
    """The Markdown table rows (header first) of the table that follows the paragraph starting ``title_start``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title_start))
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return table


def test_markdown_has_the_papers_columns_with_mean_std_and_the_best_in_bold(fake_sweep, tmp_path):
    written = write_report([fake_sweep], tmp_path / "out")
    text = written["markdown"].read_text()
    header = next(line for line in text.splitlines() if line.startswith("| Recipe | Seeds | Precision | STS-B (dev)"))
    assert header == "| Recipe | Seeds | Precision | STS-B (dev) | SICK-R (trial) | Avg. |"
    averages = {r: [_eval(fake_sweep, r, s)["avg"] for s in (42, 0, 1)] for r in ("simcse", "una", "focal")}
    best = max(averages, key=lambda r: np.mean(averages[r]))
    for recipe, values in averages.items():
        cell = f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f}"
        row = next(line for line in text.splitlines() if line.startswith(f"| {recipe} | 3 | ") and "(dev)" not in line
                   and cell in line)
        assert (f"**{cell}**" in row) == (recipe == best)
    assert "| Recipe | Seeds | Precision | SST-2 (dev) | MRPC (train CV) | Avg. |" in text
    assert "| Recipe | Seeds | Precision | Alignment | Uniformity |" in text
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
    assert "| Recipe | Seeds | Precision | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg. |" in text
    assert "| Recipe | Seeds | Precision | MR | CR | SUBJ | MPQA | SST-2 | TREC | MRPC | Avg. |" in text
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


RECIPES, SEEDS = ("simcse", "una", "focal"), (42, 0, 1)


def test_one_stsb_dev_figure_per_model_with_its_precision_and_a_base_model_row(fake_sweep, tmp_path):
    text = write_report([fake_sweep], tmp_path / "out")["markdown"].read_text()
    sts = _table_after(text, "STS: Spearman")
    assert sts[0] == "| Recipe | Seeds | Precision | STS-B (dev) | SICK-R (trial) | Avg. |"
    # the base model comes first, named, in the precision it was scored in, with only the figure it has
    # Issue 39 item 12: the 9 runs share one measurement of the base, so no "± 0.00" over seeds it never had.
    assert sts[2] == (f"| base model: minilm, before training | 9 runs (1 measurement) | bf16 (in training) | "
                      f"{BASE_DEV:.2f} "
                      "| - | - |")
    for recipe in RECIPES:
        cells = _row(text, f"{recipe} | 3")
        finals = [_eval(fake_sweep, recipe, s)["tasks"]["STSBenchmark"]["score"] for s in SEEDS]
        assert cells[2] == "fp32" and cells[3].strip("*").startswith(f"{np.mean(finals):.2f} ± ")
    # the in-training figure is not a second number in any table: the Runs table gives the final one, named
    runs = _table_after(text, "| Recipe | Seed | Steps | Training precision")
    assert "Best STS-B dev" not in text
    for recipe in RECIPES:
        for seed in SEEDS:
            cells = _row("\n".join(runs), f"{recipe} | {seed}")
            final = _eval(fake_sweep, recipe, seed)["tasks"]["STSBenchmark"]["score"]
            assert cells[3] == "bf16" and cells[4] == f"{final:.2f} (fp32, final)"
            assert f"{_summary(fake_sweep, recipe, seed)['best_stsb_dev']:.2f}" not in cells
    # ... and the note says what it is and how far apart the two were on these very runs
    gaps = [_eval(fake_sweep, r, s)["tasks"]["STSBenchmark"]["score"] - _summary(fake_sweep, r, s)["best_stsb_dev"]
            for r in RECIPES for s in SEEDS]
    note = next(line for line in text.splitlines() if line.startswith("STS-B (dev) is one figure per model"))
    assert "fp32, up to 512 tokens" in note and "bf16, up to 32 tokens" in note and "best_stsb_dev" in note
    assert f"{np.mean(gaps):+.2f} on average ({min(gaps):+.2f} to {max(gaps):+.2f} over 9 runs)" in note
    assert "Training precision (summary.json): bf16 (precision: auto; faster in the matmul probe) on 9 runs." in text


def test_the_base_model_row_is_in_report_json_and_never_bold_or_tested(tmp_path):
    for seed in (1, 2):
        make_run(tmp_path / "s", "simcse", seed, 70, base_dev=95.0)  # a base better than every recipe
        make_run(tmp_path / "s", "una", seed, 72, base_dev=95.0)
    written = write_report([tmp_path / "s"], tmp_path / "out")
    sts = json.loads(written["json"].read_text())["tables"]["sts"]
    [base] = sts["reference_rows"]
    assert base["label"] == "base model: minilm, before training" and base["precision"] == "bf16 (in training)"
    # Issue 39 item 12: four runs recorded one shared measurement (n counts measurements, runs the runs).
    assert base["cells"]["STSBenchmark"]["mean"] == pytest.approx(95.0) and base["cells"]["STSBenchmark"]["n"] == 1
    assert base["runs"] == 4
    assert sorted(base["recipes"]) == ["simcse", "una"]
    assert set(sts["rows"]) == {"simcse", "una"} and sts["precision"] == {"simcse": "fp32", "una": "fp32"}
    assert any(sts["rows"][r]["STSBenchmark"]["best"] for r in ("simcse", "una"))
    base_line = next(line for line in written["markdown"].read_text().splitlines() if line.startswith("| base model"))
    assert "**" not in base_line


def test_several_base_models_get_a_row_each_saying_which_recipes_start_from_them(tmp_path):
    random_init = {"name_or_path": "minilm", "from_config": {"model_type": "bert"}, "pooler": "avg", "max_seq_len": 64}
    make_run(tmp_path / "s", "simcse", 1, 75)
    make_run(tmp_path / "s", "mlm-pretrain", 1, 20, base_dev=3.0, model=random_init)
    make_run(tmp_path / "s", "mlm-pretrain", 2, 20, base_dev=5.0, model=random_init)
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert _row(text, "base model: minilm, before training (pooler auto, 32 tokens)")[1:4] == [
        "1 run", "bf16 (in training)", f"{BASE_DEV:.2f}"]
    random_row = _row(text, "base model: randomly initialised encoder (minilm's tokenizer), before training "
                            "(pooler avg, 64 tokens)")
    assert random_row[3] == f"4.00 ± {np.std([3.0, 5.0], ddof=1):.2f}"
    assert "(pooler avg, 64 tokens): mlm-pretrain." in text


def test_runs_without_a_recorded_base_score_or_precision_say_so(tmp_path):
    make_run(tmp_path / "s", "simcse", 1, 75, base_dev=None, precision=None)
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert "No base-model row" in text and "| base model" not in text
    assert "Training precision (summary.json): not recorded on 1 run." in text
    assert "bf16, up to 32 tokens" not in text and "precision not recorded, up to 32 tokens" in text


def test_same_settings_in_training_and_evaluation_are_said_to_agree(tmp_path):
    fp32 = {"precision": "fp32", "requested": "auto", "reason": "no native bf16"}
    make_run(tmp_path / "s", "simcse", 1, 75, precision=fp32,
             model={"name_or_path": "minilm", "pooler": "auto", "max_seq_len": 512})
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert "Same weights, sentences, precision and length, so the two should agree" in text
    assert "| base model: minilm, before training | 1 run | fp32 (in training) |" in text


def test_with_the_test_split_the_dev_figures_and_the_base_row_get_their_own_table(tmp_path):
    for seed in (1, 2):
        make_run(tmp_path / "s", "simcse", seed, 76, split="test")  # no eval-dev: in-training scores
        make_run(tmp_path / "s", "una", seed, 77, split="test")
        make_run(tmp_path / "s", "una", seed, 77, split="dev")  # eval-dev too: its final scores
    make_run(tmp_path / "s", "focal", 1, 74, split="test")
    make_run(tmp_path / "s", "focal", 2, 74, split="dev")  # only one of two runs has eval-dev
    written = write_report([tmp_path / "s"], tmp_path / "out", split="test")
    text = written["markdown"].read_text()
    table = _table_after(text, "STS-B dev: one figure per model")
    assert table[0] == "| Recipe | Seeds | Precision | STS-B (dev) |"
    assert table[2].startswith(f"| base model: minilm, before training | 6 runs (1 measurement) | bf16 (in training) | "
                               f"{BASE_DEV:.2f}")  # issue 39 item 12: one shared measurement
    dev_rows = "\n".join(table)
    in_training = {r: [_summary(tmp_path / "s", r, s)["best_stsb_dev"] for s in (1, 2)] for r in ("simcse", "focal")}
    assert _row(dev_rows, "simcse | 2")[2:4] == ["bf16 (in training)", _mean_std(in_training["simcse"])]
    una = [_eval(tmp_path / "s", "una", s)["tasks"]["STSBenchmark"]["score"] for s in (1, 2)]
    assert _row(dev_rows, "una | 2")[2:4] == ["fp32 (final)", f"**{_mean_std(una)}**"]
    # a recipe whose runs do not all have eval-dev.json never mixes the two settings in one mean
    assert _row(dev_rows, "focal | 2")[2:4] == ["bf16 (in training)", _mean_std(in_training["focal"])]
    assert "so that no mean mixes the two settings" in text
    dev = json.loads(written["json"].read_text())["tables"]["stsb_dev"]
    assert dev["reference_rows"][0]["cells"]["stsb_dev"]["mean"] == pytest.approx(BASE_DEV)
    assert dev["rows"]["una"]["stsb_dev"]["mean"] == pytest.approx(np.mean(una))


def test_without_evaluations_the_dev_table_still_compares_with_the_base_model(tmp_path):
    make_run(tmp_path / "s", "simcse", 1, 75, split=None)
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert "No evaluation results" in text
    assert _row("\n".join(_table_after(text, "STS-B dev: one figure")), "simcse | 1")[2] == "bf16 (in training)"
    assert "The recipes' in-training figures were computed the same way: like for like." in text


def test_paired_tests_say_why_there_is_nothing_to_test_and_count_the_seeds(tmp_path):
    make_run(tmp_path / "a", "simcse", 1, 75)
    text = write_report([tmp_path / "a"], tmp_path / "out_a")["markdown"].read_text()
    section = text.split("## Paired tests against simcse", 1)[1].split("## ", 1)[0]
    assert "Only simcse has runs here: no other recipe to compare with it." in section
    make_run(tmp_path / "b", "simcse", 1, 75, split=None)
    make_run(tmp_path / "b", "una", 1, 75, split=None)
    text = write_report([tmp_path / "b"], tmp_path / "out_b")["markdown"].read_text()
    section = text.split("## Paired tests against simcse", 1)[1].split("## ", 1)[0]
    assert "No evaluation results: the tests compare evaluated runs" in section
    for recipe in ("simcse", "una"):  # two shared seeds: the text says n = 2, not 3
        for seed in (1, 2):
            make_run(tmp_path / "c", recipe, seed, 75)
    text = write_report([tmp_path / "c"], tmp_path / "out_c")["markdown"].read_text()
    assert "With n = 2 seeds the test has low power" in text and "n = 3" not in text


def test_small_final_losses_keep_their_digits_and_markdown_runs_table_is_narrow(tmp_path):
    path = make_run(tmp_path / "s", "simcse", 1, 75)
    summary = _summary(tmp_path / "s", "simcse", 1)
    (path / "summary.json").write_text(json.dumps({**summary, "final_loss": 1.234e-05}))
    make_run(tmp_path / "s", "una", 1, 75)
    written = write_report([tmp_path / "s"], tmp_path / "out")
    text = written["markdown"].read_text()
    assert "| Recipe | Seed | Steps | Training precision | STS-B dev | Kept step | Final loss |" in text
    assert _row(text, "simcse | 1 | 40/40")[-1] == "1.234e-05"
    page = written["html"].read_text()
    assert "<th>Directory</th>" in page and ">simcse/seed-1<" in page  # relative to the runs' common folder
    assert f"Directories are relative to {(tmp_path / 's').resolve()}." in text


def test_hyper_parameters_without_evaluations_compare_the_dev_figures_in_numeric_order(tmp_path):
    for lr in (3e-5, 1e-5, 1e-4):  # as a search with --no-eval leaves them
        for seed in (1, 2):
            path = make_run(tmp_path / "s" / str(lr), "simcse", seed, 70, split=None)
            config = json.loads((path / "train_config.json").read_text())
            config["optim"]["lr"] = lr
            (path / "train_config.json").write_text(json.dumps(config))
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    section = text.split("## Hyper-parameters", 1)[1].split("\n## ", 1)[0]
    rows = _table_after(section, "simcse, optim.lr:")
    assert rows[0] == "| optim.lr | Runs | STS-B dev |"
    assert [row.split(" | ")[0] for row in rows[2:]] == ["| 1e-05", "| 3e-05", "| 0.0001"]
    dev = [_summary(tmp_path / "s" / "1e-05", "simcse", s)["best_stsb_dev"] for s in (1, 2)]
    assert rows[2] == f"| 1e-05 | 2 | {_mean_std(dev)} |"
