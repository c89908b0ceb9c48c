"""Report details (issue 39, item 12): the base row counts one shared measurement once, the Wilcoxon sentence
names the pairs the tests had, no label leaves its figure, step ticks are whole, coinciding points stay
visible, and every mean that prints as the best is bold."""
from __future__ import annotations

import json

from fake_runs import make_run, make_sweep

from cselab.experiments.plots import align_uniform, dev_curves
from cselab.experiments.report import write_report
from cselab.experiments.runs import find_runs
from cselab.experiments.stats import Cell, Column, Table, mark_best


def test_the_base_row_counts_one_shared_measurement_once(tmp_path):
    make_sweep(tmp_path / "s", {"simcse": 75.0}, seeds=(1, 2))
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    base = next(line for line in text.splitlines() if line.startswith("| base model"))
    assert "2 runs (1 measurement)" in base and "±" not in base


def test_one_seed_names_no_pairs(tmp_path):
    make_sweep(tmp_path / "s", {"simcse": 75.0, "una": 78.0}, seeds=(1,))
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert "pairs" not in text.split("## Paired tests")[1].split("## Plots")[0]


def test_the_wilcoxon_sentence_names_the_pairs_the_tests_had(tmp_path):
    make_sweep(tmp_path / "s", {"simcse": 75.0, "una": 78.0}, seeds=(1, 2))
    text = write_report([tmp_path / "s"], tmp_path / "out")["markdown"].read_text()
    assert "with 2 pairs its two-sided p-value cannot go below 0.5." in text and "3 pairs" not in text


def long_named_runs(tmp_path):
    levels = {f"simcse optim.lr=3e-5 batch_size={b} temperature=0.0{t} views.positive_prob=0.5": 75.0 + b / 100 + t
              for b in (64, 128, 256) for t in (1, 2, 3)}
    make_sweep(tmp_path / "s", levels, seeds=(42,))
    return find_runs([tmp_path / "s"]), list(levels)


def texts_outside(figure) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.canvas.draw()
    renderer, edge = figure.canvas.get_renderer(), figure.bbox
    outside = []
    for axes in figure.axes:
        for artist in (axes.xaxis.label, axes.yaxis.label, axes.title, axes.get_legend()):
            box = artist.get_window_extent(renderer)
            if box.x0 < -1 or box.y0 < -1 or box.x1 > edge.x1 + 1 or box.y1 > edge.y1 + 1:
                outside.append(type(artist).__name__ + " " + getattr(artist, "get_text", lambda: "")())
    return outside


def test_no_label_leaves_the_figure_beside_a_legend_of_long_names(tmp_path):
    runs, recipes = long_named_runs(tmp_path)
    for plot in (align_uniform(runs, recipes, "dev"), dev_curves(runs, recipes)):
        assert texts_outside(plot.figure) == [], plot.name


def test_step_ticks_are_whole_steps(tmp_path):
    for seed in (1, 2):
        make_run(tmp_path / "s", "simcse", seed, 75.0, steps=30)
    plot = dev_curves(find_runs([tmp_path / "s"]), ["simcse"])
    axes = plot.figure.axes[0]
    ticks = [t for t in axes.get_xticks() if axes.get_xlim()[0] <= t <= axes.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_coinciding_points_stay_visible(tmp_path):
    for recipe in ("simcse", "una"):  # the same numbers: their points coincide
        path = make_run(tmp_path / "s", recipe, 1, 75.0)
        result = json.loads((path / "eval-dev.json").read_text())
        result["tasks"]["align"] = {"alignment": 0.25, "uniformity": -2.5}
        (path / "eval-dev.json").write_text(json.dumps(result))
    plot = align_uniform(find_runs([tmp_path / "s"]), ["simcse", "una"], "dev")
    collections = plot.figure.axes[0].collections
    assert len(collections) == 2  # one run a recipe: its mean is its point, drawn once
    markers = {tuple(map(tuple, c.get_paths()[0].vertices.round(3))) for c in collections}
    assert len(markers) == 2  # two shapes
    assert all(len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0 for c in collections)  # hollow


def test_every_mean_that_prints_as_the_best_is_bold():
    column = Column("avg", "Avg.", lambda r: None)
    table = Table("sts", "t", [column], ["a", "b", "c"],
                  {("a", "avg"): Cell({1: 80.1234}), ("b", "avg"): Cell({1: 80.1199}), ("c", "avg"): Cell({1: 79.0})})
    mark_best(table)
    assert table.best["avg"] == {"a", "b"}
