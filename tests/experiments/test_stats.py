"""Mean/std over seeds, best per column, the paired test against the baseline."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_rel

from cselab.experiments.runs import find_runs
from cselab.experiments.stats import Cell, build_tables, paired_test


def test_cell_is_the_sample_mean_and_std_over_seeds():
    values = {42: 70.0, 0: 72.5, 1: 71.0}
    cell = Cell(values)
    assert cell.mean == pytest.approx(np.mean(list(values.values())))
    assert cell.std == pytest.approx(np.std(list(values.values()), ddof=1))
    assert Cell({1: 3.0}).std is None and Cell({}).mean is None


def test_paired_test_pairs_by_seed_not_by_order():
    recipe = {1: 71.0, 2: 74.0, 3: 72.5}
    baseline = {3: 70.0, 1: 70.5, 2: 72.0, 9: 60.0}  # other order, and a seed the recipe lacks
    test = paired_test(recipe, baseline)
    expected = ttest_rel([71.0, 74.0, 72.5], [70.5, 72.0, 70.0])
    assert test.n == 3
    assert test.p_value == pytest.approx(expected.pvalue)
    assert test.statistic == pytest.approx(expected.statistic)
    assert test.mean_difference == pytest.approx(np.mean([0.5, 2.0, 2.5]))


def test_paired_test_says_when_it_cannot_be_computed():
    assert paired_test({1: 1.0}, {1: 0.0, 2: 0.0}).p_value is None
    constant = paired_test({1: 2.0, 2: 3.0}, {1: 1.0, 2: 2.0})
    assert constant.p_value is None and constant.mean_difference == pytest.approx(1.0)
    assert "undefined" in constant.note


def test_tables_mark_the_best_mean_and_test_each_recipe_against_the_baseline(fake_sweep):
    runs = find_runs([fake_sweep])
    tables = {t.name: t for t in build_tables(runs, "dev", "simcse")}
    assert set(tables) == {"sts", "transfer", "align"}
    sts = tables["sts"]
    assert sts.recipes[0] == "simcse"
    for column in sts.columns + tables["align"].columns:
        table = sts if column in sts.columns else tables["align"]
        means = {r: table.cells[(r, column.key)].mean for r in table.recipes}
        pick = max if column.higher_is_better else min
        assert table.best[column.key] == {pick(means, key=means.get)}
    # the STS average of each run is its eval file's 'avg'
    avg = {r.seed: r.evals["dev"]["avg"] for r in runs if r.recipe == "una"}
    assert sts.cells[("una", "avg")].values == pytest.approx(avg)
    base = {r.seed: r.evals["dev"]["avg"] for r in runs if r.recipe == "simcse"}
    seeds = sorted(avg)
    expected = ttest_rel([avg[s] for s in seeds], [base[s] for s in seeds]).pvalue
    assert sts.tests[("una", "avg")].p_value == pytest.approx(expected)
    assert ("simcse", "avg") not in sts.tests


def test_no_tests_without_the_baseline(fake_sweep):
    tables = build_tables(find_runs([fake_sweep]), "dev", "not-a-recipe")
    assert all(not t.tests for t in tables)
