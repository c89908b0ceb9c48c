"""The report's figures as self-contained SVG text (matplotlib; text drawn as paths, no fonts or links).

* STS-B dev Spearman over training steps and the loss curve, per recipe: a thin line per seed and
  a thick line for the mean over the seeds that logged that step.
* Alignment versus uniformity, one point per run and a larger one per recipe mean, as Wang & Isola
  (2020) and the Focal-InfoNCE paper plot them (both lower is better: the best corner is bottom left).
* Per-task bars: mean over seeds with the standard deviation as error bars, on a value axis from
  zero (a zoomed axis makes a difference of a few tenths look like a factor of two).

Each Plot keeps its matplotlib figure, so its axes can be checked (tests) besides the SVG text.
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import numpy as np

from cselab.experiments import ExperimentError
from cselab.experiments.dev_figures import base_label, base_models, training_setting
from cselab.experiments.runs import Run
from cselab.experiments.stats import Table
from cselab.run_files import METRICS


@dataclass
class Plot:
    name: str  # file stem, e.g. "stsb-dev-curves"
    title: str
    caption: str
    svg: str
    figure: object = field(default=None, repr=False, compare=False)  # the matplotlib Figure drawn


def _figure(width: float = 9.0, height: float = 4.8):
    try:
        from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend
    except ImportError as exc:
        raise ExperimentError(f"the report's plots need matplotlib ({exc}); "
                              "install it with `pip install matplotlib`") from None

    return Figure(figsize=(width, height), layout="constrained")


def _svg(figure, name: str) -> str:
    import matplotlib

    buffer = io.StringIO()
    # Text as paths (no font needed in the browser); a salt per plot keeps element ids unique when
    # several figures sit in one HTML page; no date, so the same data gives the same file.
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": name}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    # Keep only the <svg> element: an XML declaration or DOCTYPE cannot stand inside HTML.
    text = text[text.index("<svg"):]
    # Comments and the RDF metadata block (creator URLs) add nothing to the picture.
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    return re.sub(r"<!--.*?-->", "", text, flags=re.S).strip()


def _plot(figure, name: str, title: str, caption: str) -> Plot:
    return Plot(name, title, caption, _svg(figure, name), figure)


def recipe_colours(recipes: list[str]) -> dict[str, tuple]:
    from matplotlib import colormaps

    # tab10 for a few recipes; beyond that tab20 then tab20b/tab20c, so 60 recipes get distinct colours.
    names = ["tab10"] if len(recipes) <= 10 else ["tab20", "tab20b", "tab20c"]
    colours = [colormaps[n](i) for n in names for i in range(colormaps[n].N)]
    return {recipe: colours[i % len(colours)] for i, recipe in enumerate(recipes)}


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*")


def recipe_markers(recipes: list[str]) -> dict[str, str]:
    """A marker shape per recipe, drawn hollow: two recipes' points at the same place both stay visible."""
    return {recipe: MARKERS[i % len(MARKERS)] for i, recipe in enumerate(recipes)}


def _legend(axes, count: int, outside: bool = False) -> None:
    """The legend, inside the axes for a few short entries; else beside them, the figure widened (and made
    taller) by the legend's size, so the axes keep their room and no label is pushed off the figure."""
    if not (outside or count > 8):
        axes.legend(fontsize="small")
        return
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    legend = axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    figure = axes.figure
    if not isinstance(figure.canvas, FigureCanvasAgg):
        FigureCanvasAgg(figure)  # a renderer to measure the legend with (the figure has no GUI canvas)
    size = legend.get_window_extent(figure.canvas.get_renderer())
    width, height = figure.get_size_inches()
    figure.set_size_inches(width + size.width / figure.dpi, max(height, size.height / figure.dpi + 1.0))


def _mean_curve(curves: list[tuple[list[int], list[float]]]) -> tuple[list[int], list[float]]:
    """Mean over seeds at every step that every seed logged."""
    common = sorted(set.intersection(*(set(steps) for steps, _ in curves)))
    lookup = [dict(zip(steps, values, strict=True)) for steps, values in curves]
    return common, [float(np.mean([c[s] for c in lookup])) for s in common]


WIDE_RANGE = 1e3  # largest over smallest magnitude beyond which a linear axis flattens the smaller lines


def wide_range(values) -> dict | None:
    """``set_yscale``'s arguments for a y-axis that shows every line when magnitudes differ by more than
    WIDE_RANGE (CLEAR's summed NT-Xent near 600 beside SimCSE's 1e-5): ``log`` when all are positive,
    ``symlog`` (linear only below the smallest magnitude) when some are not; None when a linear axis shows
    them all."""
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    magnitudes = np.abs(values[values != 0])
    if not magnitudes.size or magnitudes.max() / magnitudes.min() <= WIDE_RANGE:
        return None
    if (values > 0).all():
        return {"value": "log"}
    return {"value": "symlog", "linthresh": float(magnitudes.min())}


def training_curves(runs: list[Run], recipes: list[str], key: str, name: str, title: str, ylabel: str,
                    caption: str, references: list[tuple[str, float]] = ()) -> Plot | None:
    """Per recipe a thin line per seed and a thick mean; ``references``: (label, value) drawn as dashed levels."""
    from matplotlib.ticker import MaxNLocator

    colours, markers = recipe_colours(recipes), recipe_markers(recipes)
    figure = _figure()
    axes = figure.add_subplot()
    drawn = 0
    for recipe in recipes:
        curves = [r.curve(key) for r in runs if r.recipe == recipe]
        curves = [c for c in curves if c[0]]
        if not curves:
            continue
        for steps, values in curves:
            axes.plot(steps, values, color=colours[recipe], alpha=0.3, linewidth=0.8)
        steps, values = _mean_curve(curves)
        axes.plot(steps, values, color=colours[recipe], linewidth=2.0,
                  marker=markers[recipe] if len(steps) < 20 else None, markersize=6, markerfacecolor="none",
                  markeredgewidth=1.3, label=f"{recipe} (n={len(curves)})")
        drawn += 1
    if not drawn:
        return None
    for i, (label, value) in enumerate(references):
        axes.axhline(value, color="0.35", linestyle=("--", ":", "-.")[i % 3], linewidth=1.2, label=label)
    scale = wide_range([v for line in axes.get_lines() for v in line.get_ydata()])
    if scale:
        axes.set_yscale(**scale)
        ylabel += " (log scale)" if scale["value"] == "log" else " (symmetric log scale)"
    axes.set_xlabel("training step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole: no tick at step 2.5
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    _legend(axes, drawn + len(references))
    return _plot(figure, name, title, caption)


def dev_curves(runs: list[Run], recipes: list[str]) -> Plot | None:
    """The in-training (selection) scores, with the base model's score before training in the same settings."""
    bases = base_models(runs)
    references = [(f"{base_label(b, len(bases) > 1)} ({b.setting.precision or 'precision not recorded'})",
                   float(np.mean(list(b.values.values())))) for b in bases]
    settings = "; ".join(sorted({training_setting(r).describe() for r in runs if r.curve("stsb_dev")[0]}))
    caption = ("Spearman x100 on STS-B dev at each evaluation of training (model selection), computed in the "
               f"training settings ({settings}): the in-training figures, not the final evaluation the tables give; "
               "thin lines: seeds, thick: mean over seeds"
               + ("; dashed: the base model before training, scored by the training loop in the same settings"
                  if references else "") + ".")
    return training_curves(runs, recipes, "stsb_dev", "stsb-dev-curves", "STS-B dev during training",
                           "STS-B dev Spearman x100", caption, references)


def loss_curves(runs: list[Run], recipes: list[str]) -> Plot | None:
    return training_curves(runs, recipes, "loss", "loss-curves", "Training loss", "loss (all objective terms)",
                           "Total training loss at each logged step; thin lines: seeds, thick: mean over seeds. "
                           "Recipes with different objectives are not on the same scale; where their losses differ "
                           "by more than a factor of 1000 the axis is logarithmic, so every line stays visible.")


def align_uniform(runs: list[Run], recipes: list[str], split: str) -> Plot | None:
    colours, markers = recipe_colours(recipes), recipe_markers(recipes)
    figure = _figure(8.0, 5.5)
    axes = figure.add_subplot()
    drawn = 0
    for recipe in recipes:
        points = [(r.evals[split]["tasks"]["align"].get("uniformity"),
                   r.evals[split]["tasks"]["align"].get("alignment"))
                  for r in runs if r.recipe == recipe and split in r.evals and "align" in r.evals[split]["tasks"]]
        points = [(u, a) for u, a in points if u is not None and a is not None]
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        if len(points) > 1:  # one run is its own mean: a second point would hide under the first
            axes.scatter(xs, ys, color=colours[recipe], marker=markers[recipe], alpha=0.35, s=18)
        axes.scatter([np.mean(xs)], [np.mean(ys)], marker=markers[recipe], s=80, facecolors="none",
                     edgecolors=colours[recipe], linewidths=1.8, label=f"{recipe} (n={len(points)})")
        drawn += 1
    if not drawn:
        return None
    # Short labels (the definitions are in the caption): a long one outgrows axes a wide legend squeezes.
    axes.set_xlabel("uniformity (lower is better)")
    axes.set_ylabel("alignment (lower is better)")
    axes.set_title("Alignment vs uniformity")
    axes.grid(alpha=0.3)
    _legend(axes, drawn)
    return Plot("align-uniform", "Alignment vs uniformity",
                "Each small point is a run, each large point a recipe's mean over seeds (a recipe with one run: "
                "its point); alignment = E ||f(x)-f(x⁺)||² over STS-B pairs with gold score > 4 (the positive "
                "pairs), uniformity = log E exp(-2||f(x)-f(y)||²) over all STS-B sentences (as SimCSE measures "
                "them); each recipe has its own marker, so points that coincide stay visible. Bottom left is best.",
                _svg(figure, "align-uniform"), figure)


def value_axis_from_zero(axes, cells) -> None:
    """Bars are read by their length: the value axis includes zero (and every bar and error bar)."""
    spans = [(c.mean - (c.std or 0.0), c.mean + (c.std or 0.0)) for c in cells if c.mean is not None]
    low = min([0.0] + [low for low, _ in spans])
    high = max([0.0] + [high for _, high in spans])
    margin = 0.05 * (high - low) or 1.0
    axes.set_ylim(low - margin if low < 0 else 0.0, high + margin if high > 0 else 0.0)


def task_bars(table: Table) -> Plot | None:
    columns = table.columns
    recipes = [r for r in table.recipes if any(table.cells[(r, c.key)].n for c in columns)]
    if not recipes:
        return None
    colours = recipe_colours(table.recipes)
    figure = _figure(min(16.0, max(7.0, 3.0 + 0.2 * len(columns) * len(recipes))), 4.8)
    axes = figure.add_subplot()
    width = 0.8 / len(recipes)
    positions = np.arange(len(columns))
    for i, recipe in enumerate(recipes):
        cells = [table.cells[(recipe, c.key)] for c in columns]
        means = [c.mean if c.mean is not None else np.nan for c in cells]
        errors = [c.std if c.std is not None else 0.0 for c in cells]
        axes.bar(positions + (i - (len(recipes) - 1) / 2) * width, means, width, yerr=errors, capsize=2,
                 color=colours[recipe], label=recipe, error_kw={"linewidth": 0.8})
    axes.set_xticks(positions, [c.label for c in columns], rotation=30 if len(columns) > 6 else 0)
    value_axis_from_zero(axes, [table.cells[(r, col.key)] for r in recipes for col in columns])
    axes.set_ylabel({"sts": "Spearman x100", "transfer": "accuracy (%)"}.get(table.name, "score"))
    title = {"sts": "STS per task", "transfer": "Transfer tasks"}.get(table.name, table.name)
    axes.set_title(title)
    axes.grid(alpha=0.3, axis="y")
    _legend(axes, len(recipes), outside=True)  # bars from zero leave no empty corner inside
    return _plot(figure, f"bars-{table.name}", title,
                 f"{table.title}; error bars: standard deviation over seeds. The value axis starts at zero, so "
                 "differences of a few tenths are hard to see: the tables give them.")


def all_plots(runs: list[Run], recipes: list[str], tables: list[Table], split: str) -> tuple[list[Plot], list[str]]:
    """The figures that have data, and a note for each that has none."""
    plots, missing = [], []
    for make, why in ((lambda: dev_curves(runs, recipes), f"no STS-B dev evaluations in the runs' {METRICS}"),
                      (lambda: align_uniform(runs, recipes, split), f"no alignment/uniformity results ({split} split)"),
                      (lambda: loss_curves(runs, recipes), f"no loss records in the runs' {METRICS}")):
        plot = make()
        (plots.append(plot) if plot is not None else missing.append(why))
    for table in tables:
        if table.name in ("sts", "transfer"):
            plot = task_bars(table)
            if plot is not None:
                plots.append(plot)
    if not any(t.name in ("sts", "transfer") for t in tables):
        missing.append(f"no STS or transfer results ({split} split) for per-task bars")
    # Order as the report discusses them: selection curve, tasks, geometry, optimisation.
    order = {"stsb-dev-curves": 0, "bars-sts": 1, "bars-transfer": 2, "align-uniform": 3, "loss-curves": 4}
    return sorted(plots, key=lambda p: order.get(p.name, 9)), missing
