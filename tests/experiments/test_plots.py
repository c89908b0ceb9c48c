"""The figures: mean curves over seeds, and what happens without data."""
from __future__ import annotations

import pytest

from cselab.experiments.plots import _mean_curve, align_uniform, dev_curves, task_bars
from cselab.experiments.runs import find_runs
from cselab.experiments.stats import build_tables


def test_mean_curve_uses_the_steps_every_seed_logged():
    steps, values = _mean_curve([([1, 2, 3], [1.0, 2.0, 3.0]), ([2, 3, 4], [4.0, 6.0, 8.0])])
    assert steps == [2, 3]
    assert values == pytest.approx([3.0, 4.5])


def test_plots_are_svg_with_one_legend_entry_per_recipe(fake_sweep):
    runs = find_runs([fake_sweep])
    recipes = ["simcse", "focal", "una"]
    plot = dev_curves(runs, recipes)
    assert plot.svg.startswith("<svg") and plot.svg.rstrip().endswith("</svg>")
    assert "<?xml" not in plot.svg and "DOCTYPE" not in plot.svg
    # text is drawn as paths, so the legend is checked through matplotlib's ids of the legend lines
    assert plot.svg.count('id="legend_') == 1
    tables = build_tables(runs, "dev", "simcse")
    assert task_bars(tables[0]).name == "bars-sts"
    assert align_uniform(runs, recipes, "dev") is not None
    assert align_uniform(runs, recipes, "test") is None  # nothing evaluated on test
    assert dev_curves([], recipes) is None


def test_a_clear_error_without_matplotlib(monkeypatch, fake_sweep):
    import sys

    from cselab.experiments import ExperimentError

    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ExperimentError, match="pip install matplotlib"):
        dev_curves(find_runs([fake_sweep]), ["simcse"])


def test_every_recipe_of_a_full_study_gets_its_own_colour():
    from cselab.config import list_recipes
    from cselab.experiments.plots import recipe_colours

    recipes = list_recipes() + ["extra-1", "extra-2"]
    assert len(set(recipe_colours(recipes).values())) == len(recipes)
