"""The figures: mean curves over seeds, and what happens without data."""
from __future__ import annotations

import numpy as np
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


def _bar_axes(plot):
    """The axes of a plot that hold bars (matplotlib's BarContainer), with their bars."""
    from matplotlib.container import BarContainer

    return [(axes, [bar for c in axes.containers if isinstance(c, BarContainer) for bar in c])
            for axes in plot.figure.axes if any(isinstance(c, BarContainer) for c in axes.containers)]


def test_every_bar_chart_of_the_report_has_a_value_axis_from_zero(fake_sweep):
    from cselab.experiments.report import build_document

    doc = build_document(find_runs([fake_sweep]))
    charts = [(plot, found) for plot in doc.plots for found in _bar_axes(plot)]
    assert {plot.name for plot, _ in charts} == {"bars-sts", "bars-transfer"}
    for plot, (axes, bars) in charts:
        low, high = axes.get_ylim()
        # every score here is between 60 and 90: a zoomed axis would start well above zero
        assert min(bar.get_height() for bar in bars) > 50
        assert low == 0.0, plot.name
        assert high >= max(bar.get_height() for bar in bars)
        assert "starts at zero" in plot.caption


def test_negative_bars_keep_zero_on_the_value_axis():
    from cselab.experiments.stats import Cell, Column, Table

    columns = [Column("a", "A", lambda r: None), Column("b", "B", lambda r: None)]
    cells = {("x", "a"): Cell({1: -30.0, 2: -20.0}), ("x", "b"): Cell({1: -5.0, 2: -6.0})}
    plot = task_bars(Table("sts", "negative scores", columns, ["x"], cells))
    [(axes, bars)] = _bar_axes(plot)
    low, high = axes.get_ylim()
    assert high == 0.0 and low < -25.0 - np.std([-30.0, -20.0], ddof=1)


def test_dev_curves_draw_the_base_model_in_the_training_settings(fake_sweep):
    from fake_runs import BASE_DEV

    plot = dev_curves(find_runs([fake_sweep]), ["simcse", "focal", "una"])
    [base] = [line for line in plot.figure.axes[0].get_lines() if line.get_label().startswith("base model")]
    assert base.get_label() == "base model: minilm, before training (bf16)"
    assert set(base.get_ydata()) == {BASE_DEV}
    assert "training settings (bf16, up to 32 tokens)" in plot.caption and "not the final evaluation" in plot.caption


def test_losses_that_differ_by_orders_of_magnitude_get_a_log_axis(tmp_path):
    import json

    from fake_runs import make_run

    from cselab.experiments.plots import loss_curves

    for recipe, scale in (("simcse", 1e-5), ("clear", 600.0)):
        path = make_run(tmp_path, recipe, 1, 75)
        records = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
        (path / "metrics.jsonl").write_text("".join(json.dumps({**r, "loss": r["loss"] * scale}) + "\n"
                                                    for r in records))
    runs = find_runs([tmp_path])
    assert loss_curves(runs, ["simcse", "clear"]).figure.axes[0].get_yscale() == "log"
    assert loss_curves([r for r in runs if r.recipe == "clear"], ["clear"]).figure.axes[0].get_yscale() == "linear"
    negative = runs[0].metrics[0]
    negative["loss"] = -1.0  # a loss below zero: symmetric log, still every line visible
    assert loss_curves(runs, ["simcse", "clear"]).figure.axes[0].get_yscale() == "symlog"
