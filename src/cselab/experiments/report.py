"""``cselab report``: the papers' tables over seeds, paired tests, plots, configurations and versions.

One document model (sections of paragraphs, tables, plots and code blocks) rendered twice: Markdown
(plots as SVG files beside it) and a self-contained HTML page (inline CSS, inline SVG, no external
resource of any kind).
"""
from __future__ import annotations

import html
import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from cselab.errors import counted
from cselab.experiments import ExperimentError
from cselab.experiments.dev_figures import STSB, add_base_rows, dev_figure, dev_table, training_precision
from cselab.experiments.plots import Plot, all_plots
from cselab.experiments.runs import Run, eval_file, find_runs
from cselab.experiments.stats import TEST_NAME, ReferenceRow, Table, build_tables, recipe_order, training_table
from cselab.experiments.stats import Cell as StatsCell

SPLIT_TEXT = {"test": "test sets (the papers' protocol)",
              "dev": "development data only (of STS-B dev, SICK trial, SST-2 dev and MRPC train cross-validation, "
                     "the tasks listed below); no test set was used"}
VERSION_KEYS = ("python", "torch", "transformers", "sentence-transformers", "cselab")


# ---- the document model ----------------------------------------------------------------------


@dataclass
class Cell:
    text: str
    bold: bool = False


@dataclass
class TableBlock:
    headers: list[str]
    rows: list[list[Cell]]
    kind: str = "results"  # CSS class in HTML
    markdown_columns: list[int] | None = None  # the columns Markdown shows (None: all); HTML scrolls instead


@dataclass
class Paragraph:
    text: str


@dataclass
class PlotBlock:
    plot: Plot


@dataclass
class CodeBlock:
    summary: str
    text: str


@dataclass
class Section:
    title: str
    blocks: list = field(default_factory=list)


@dataclass
class Document:
    title: str
    intro: list[str]
    sections: list[Section]
    plots: list[Plot]
    split: str | None = None
    tables: list[Table] = field(default_factory=list)


# ---- building it -------------------------------------------------------------------------------


def choose_split(runs: list[Run], split: str) -> str | None:
    """auto: the test split when every evaluated run has it, else dev; None when nothing was evaluated."""
    if split != "auto":
        if not any(split in r.evals for r in runs):
            raise ExperimentError(f"no run has {eval_file(split)}; evaluated splits: "
                                  f"{', '.join(sorted({s for r in runs for s in r.evals})) or 'none'}")
        return split
    evaluated = [r for r in runs if r.evals]
    if not evaluated:
        return None
    return "test" if all("test" in r.evals for r in evaluated) else "dev"


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _p(p: float | None) -> str:
    if p is None:
        return "n/a"
    return "p<0.001" if p < 0.001 else f"p={p:.3f}"


def _mean_std(cell: StatsCell, digits: int) -> str:
    text = _fmt(cell.mean, digits)
    return text if cell.std is None else f"{text} ± {_fmt(cell.std, digits)}"


def reference_cells(row: ReferenceRow, table: Table) -> list[Cell]:
    """The base model's row: its figures where it has them, '-' in the columns it was not measured in."""
    measured = max((c.n for c in row.cells.values()), default=0)
    runs = max(row.runs, measured)
    shared = f" ({counted(measured, 'measurement')})" if measured != runs else ""
    cells = [Cell(row.label), Cell(counted(runs, "run") + shared), Cell(row.precision)]
    for column in table.columns:
        cell = row.cells.get(column.key)
        cells.append(Cell(_mean_std(cell, column.digits) if cell is not None and cell.n else "-"))
    return cells


def results_block(table: Table, seeds_per_recipe: dict[str, int]) -> TableBlock:
    """Mean ± std per recipe; evaluation tables also name the precision, and the base model's row comes first."""
    show_precision = bool(table.precision)
    rows = [reference_cells(row, table) for row in table.reference_rows]
    for recipe in table.recipes:
        row = [Cell(recipe), Cell(str(seeds_per_recipe.get(recipe, 0)))]
        if show_precision:
            row.append(Cell(table.precision.get(recipe, "-")))
        for column in table.columns:
            cell = table.cells[(recipe, column.key)]
            text = _mean_std(cell, column.digits)
            if cell.n and cell.n != seeds_per_recipe.get(recipe):
                text += f" (n={cell.n})"
            row.append(Cell(text, bold=recipe in table.best.get(column.key, set())))
        rows.append(row)
    headers = ["Recipe", "Seeds"] + (["Precision"] if show_precision else []) + [c.label for c in table.columns]
    return TableBlock(headers, rows)


def table_blocks(table: Table, seeds_per_recipe: dict[str, int]) -> list:
    bold = ""
    if table.best:
        bold = " Bold: best recipe mean in the column." if table.reference_rows else " Bold: best mean in the column."
    return ([Paragraph(f"{table.title}.{bold}"), results_block(table, seeds_per_recipe)]
            + [Paragraph(note) for note in table.notes])


def tests_block(table: Table, baseline: str) -> TableBlock:
    rows = []
    for recipe in table.recipes:
        if recipe == baseline:
            continue
        row = [Cell(recipe)]
        for column in table.columns:
            test = table.tests[(recipe, column.key)]
            if test.mean_difference is None:
                row.append(Cell(f"n/a ({test.note})"))
                continue
            star = "*" if test.p_value is not None and test.p_value < 0.05 else ""
            note = f", {test.note}" if test.note else ""
            row.append(Cell(f"{test.mean_difference:+.{column.digits}f} ({_p(test.p_value)}{star}, n={test.n}{note})"))
        rows.append(row)
    return TableBlock(["Recipe"] + [c.label for c in table.columns], rows, kind="tests")


def _git(versions: dict) -> str:
    git = versions.get("git") or {}
    if not git:
        return "-"
    return git["commit"][:10] + (" (uncommitted changes)" if git.get("dirty") else "")


def _dev_cell(run: Run) -> str:
    """The run's one STS-B dev figure and how it was computed."""
    figure = dev_figure(run)
    if figure is None:
        return "-"
    return f"{figure.value:.2f} ({figure.setting.precision or 'precision not recorded'}, {figure.source})"


def loss_text(value) -> str:
    """A loss in 4 significant digits: losses range from ~1e-5 (SimCSE's late steps) to ~600 (CLEAR's sum),
    and a fixed number of decimals would print the small ones as 0.0000."""
    return "-" if not isinstance(value, (int, float)) or not math.isfinite(value) else f"{value:.4g}"


def common_root(runs: list[Run]) -> Path | None:
    """The folder every run directory lies in (the Runs table names each run relative to it)."""
    import os

    paths = [str(r.path.resolve()) for r in runs]
    root = Path(os.path.commonpath(paths)) if paths else None
    return root.parent if root is not None and len(paths) == 1 else root


def runs_block(runs: list[Run]) -> TableBlock:
    rows = []
    root = common_root(runs)
    for r in runs:
        s = r.summary or {}
        kept = "-" if s.get("best_step") is None else str(s["best_step"])
        steps = f"{s.get('steps', '?')}/{s.get('total_steps', '?')}" if s else "not trained"
        where = r.path.resolve().relative_to(root) if root is not None else r.path
        rows.append([Cell(r.recipe), Cell(str(r.seed)), Cell(str(where)), Cell(steps),
                     Cell("yes" if r.finished else "no"), Cell(training_precision(r.summary) or "-"),
                     Cell(_dev_cell(r)), Cell(kept), Cell(loss_text(s.get("final_loss"))),
                     Cell(", ".join(sorted(r.evals)) or "-")])
    # Markdown has no horizontal scroll: the directory, Finished (Steps says it) and Evaluated are left out there.
    return TableBlock(["Recipe", "Seed", "Directory", "Steps", "Finished", "Training precision", "STS-B dev",
                       "Kept step", "Final loss", "Evaluated"], rows, kind="runs",
                      markdown_columns=[0, 1, 3, 5, 6, 7, 8])


def runs_section(runs: list[Run]) -> Section:
    root = common_root(runs)
    where = f"Directories are relative to {root}. " if root is not None else ""
    return Section("Runs", [Paragraph(f"{where}STS-B dev: the run's one figure and how it was computed; final loss: "
                                      "the last logged window's mean (summary.json)."), runs_block(runs)])


def precision_sentence(runs: list[Run]) -> str | None:
    """Which precision training ran in and why (summary.json), counted over the runs."""
    counts: Counter = Counter()
    for run in runs:
        if not run.summary:
            continue
        recorded = run.summary.get("precision")
        why = (recorded.get("requested"), recorded.get("reason")) if isinstance(recorded, dict) else (None, None)
        counts[(training_precision(run.summary), *why)] += 1
    if not counts:
        return None
    parts = []
    for (precision, requested, reason), n in sorted(counts.items(), key=lambda item: -item[1]):
        why = f" (precision: {requested}; {reason})" if requested and reason else ""
        runs_text = counted(n, "run")
        parts.append(f"{precision}{why} on {runs_text}" if precision else f"not recorded on {runs_text}")
    return "Training precision (summary.json): " + "; ".join(parts) + "."


def versions_block(runs: list[Run]) -> TableBlock:
    rows = []
    for r in runs:
        for stage in ("train", "eval"):
            v = r.versions.get(stage)
            if v:
                rows.append([Cell(f"{r.recipe} seed {r.seed}"), Cell(stage)]
                            + [Cell(str(v.get(k) or "-")) for k in VERSION_KEYS]
                            + [Cell(_git(v)), Cell(str(v.get("date", "-")))])
    return TableBlock(["Run", "Stage"] + list(VERSION_KEYS) + ["git commit", "recorded"], rows, kind="versions")


def intro_lines(runs: list[Run], recipes: list[str], chosen: str | None) -> list[str]:
    intro = [f"{counted(len(runs), 'run')}: "
             + ", ".join(f"{recipe} (seeds {', '.join(str(r.seed) for r in runs if r.recipe == recipe)})"
                         for recipe in recipes) + ".",
             f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
             f"by cselab {__import__('cselab').__version__}."]
    precision = precision_sentence(runs)
    if precision:
        intro.append(precision)
    if chosen:
        intro.append(f"Evaluation on the {SPLIT_TEXT[chosen]}.")
        evaluated = sorted({task for r in runs if chosen in r.evals for task in r.evals[chosen].get("tasks", {})})
        intro.append("Tasks evaluated: " + ", ".join(evaluated) + ".")
    if chosen == "dev":
        intro.append("Training keeps the checkpoint with the best STS-B dev score, so the STS-B (dev) column is "
                     "optimistically biased (it chose the model); SICK-R trial, SST-2 dev and MRPC were not used "
                     "for selection.")
    unfinished = [r for r in runs if not r.finished]
    if unfinished:
        intro.append("Not finished (their numbers come from a partly trained model or are missing): "
                     + ", ".join(f"{r.recipe} seed {r.seed}" for r in unfinished) + ".")
    return intro


def stsb_dev_table(tables: list[Table], runs: list[Run], chosen: str | None, baseline: str | None) -> Table | None:
    """The base model's row goes into the STS table when it has an STS-B dev column, else into a table of its own
    (test split, or nothing evaluated) giving one STS-B dev figure per model."""
    sts = next((t for t in tables if t.name == "sts"), None)
    if chosen == "dev" and sts is not None and any(c.key == STSB for c in sts.columns):
        add_base_rows(sts, runs)
        return None
    return dev_table(runs, baseline)


def results_section(tables: list[Table], extra: list[Table], seeds: dict[str, int]) -> Section:
    results = Section("Results")
    if not tables:
        results.blocks.append(Paragraph("No evaluation results (no eval-dev.json or eval-test.json in the runs): "
                                        "`cselab sweep` evaluates each run after training."))
    for table in tables:
        results.blocks += table_blocks(table, seeds)
    for table in extra:  # counted per table: runs with a dev figure, trained runs
        counts = {recipe: max(table.cells[(recipe, c.key)].n for c in table.columns) for recipe in table.recipes}
        results.blocks += table_blocks(table, counts)
    return results


def tests_section(tables: list[Table], recipes: list[str], baseline: str | None) -> Section:
    tests = Section(f"Paired tests against {baseline}" if baseline else "Paired tests")
    if not baseline:
        tests.blocks.append(Paragraph("No baseline recipe given: no paired tests."))
    elif baseline not in recipes:
        tests.blocks.append(Paragraph(f"The baseline recipe {baseline!r} has no runs here: no paired tests "
                                      f"(choose one of {', '.join(recipes)} with --baseline)."))
    elif not tables:
        tests.blocks.append(Paragraph("No evaluation results: the tests compare evaluated runs "
                                      "(`cselab sweep` evaluates each run after training)."))
    elif len(recipes) == 1:
        tests.blocks.append(Paragraph(f"Only {baseline} has runs here: no other recipe to compare with it."))
    else:
        tests.blocks.append(Paragraph(
            f"Difference of each recipe's mean from {baseline}'s, {TEST_NAME}; n = number of shared seeds; "
            f"* p < 0.05, with no correction for the many comparisons. {power_sentence(tables)}"
            f"{wilcoxon_sentence(tables)}"))
        for table in tables:
            tests.blocks += [Paragraph(table.title.split(" (")[0] + ":"), tests_block(table, baseline)]
    return tests


def power_sentence(tables: list[Table]) -> str:
    """How many pairs the tests had, counted from the tests themselves."""
    sizes = sorted({test.n for table in tables for test in table.tests.values()})
    if not sizes or sizes[-1] < 2:
        return "No recipe shares 2 seeds with the baseline, so no test could be made."
    n = str(sizes[-1]) if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    return (f"With n = {n} seeds the test has low power: only large, consistent differences reach p < 0.05, and "
            f"a large p-value does not show that two recipes are equal.")


def wilcoxon_sentence(tables: list[Table]) -> str:
    """Why Wilcoxon's signed-rank test is not used, for the number of pairs the tests had: with n pairs its
    exact two-sided p-value cannot go below 2 / 2^n (0.25 for 3). Nothing where no test had 2 pairs."""
    sizes = [test.n for table in tables for test in table.tests.values() if test.n >= 2]
    if not sizes or max(sizes) > 5:
        return ""
    n = max(sizes)
    return (f" Wilcoxon's signed-rank test is not used: with {counted(n, 'pair')} its two-sided p-value cannot go "
            f"below {2 / 2 ** n:g}.")


def variant_baseline(runs: list[Run], baseline: str | None) -> str | None:
    """The baseline's row: the recipe itself, or its first variant when a grid varied it."""
    if baseline is None or any(r.recipe == baseline for r in runs):
        return baseline
    variants = sorted({r.recipe for r in runs if r.recipe_name == baseline})
    return variants[0] if variants else baseline


def headline(tables: list[Table], split: str | None):
    """(name, what it is, run -> value) of the score the Hyper-parameters section compares: the STS average
    where the runs were evaluated, else each run's one STS-B dev figure (a search is often run --no-eval)."""
    table = next((t for t in tables if t.name == "sts"), None)
    column = next((c for c in table.columns if c.key == "avg"), None) if table else None
    if column is not None:
        return (f"STS {column.label}", f"Spearman x100 averaged over the STS tasks, {split} split",
                lambda run: column.extract(run.evals[split]) if split in run.evals else None)
    return ("STS-B dev", "each run's one STS-B dev figure, Spearman x100 (the final evaluation where there is one, "
            "else the in-training score of the model it kept)",
            lambda run: figure.value if (figure := dev_figure(run)) is not None else None)


def _in_order(values: set[str]) -> list[str]:
    """JSON-encoded values in their own order (numbers by size), as text where they do not compare."""
    try:
        return sorted(values, key=json.loads)
    except TypeError:
        return sorted(values)


def grid_sections(runs: list[Run], tables: list[Table], split: str | None) -> list[Section]:
    """Per recipe run with several settings (a sweep's --grid or --search): for each varied key, the headline
    score over every run with each of its values (the other keys and the seeds together), so a trend reads at
    a glance."""
    varied = [r for r in runs if r.variant]
    if not varied:
        return []
    name, what, score = headline(tables, split)
    section = Section("Hyper-parameters", [Paragraph(
        f"Runs of one recipe with different settings are separate rows above, named by the keys that differ. "
        f"Here, per varied key: the {name} ({what}) of every run with each value, mean ± std over those runs "
        "(seeds and the other keys' values together).")])
    for recipe in sorted({r.recipe_name for r in varied}):
        group = [r for r in varied if r.recipe_name == recipe]
        for key in group[0].variant:
            rows = []
            for value in _in_order({json.dumps(r.variant[key]) for r in group}):
                scores = [v for r in group if json.dumps(r.variant[key]) == value
                          for v in [score(r)] if v is not None]
                rows.append([Cell(json.loads(value) if value.startswith('"') else value), Cell(str(len(scores))),
                             Cell(_mean_std(StatsCell(dict(enumerate(scores))), 2))])
            section.blocks += [Paragraph(f"{recipe}, {key}:"), TableBlock([key, "Runs", name], rows, kind="grid")]
    return [section]


def versions_section(runs: list[Run]) -> Section:
    return Section("Library versions", [
        Paragraph("Recorded into each run's versions.json by `cselab sweep` when the run was trained and when it "
                  "was evaluated."),
        versions_block(runs) if any(r.versions for r in runs) else Paragraph("No versions.json in these runs.")])


def configurations_section(runs: list[Run]) -> Section:
    return Section("Configurations", [
        Paragraph("The exact resolved recipe of every run (its train_config.json).")]
        + [CodeBlock(f"{r.recipe} seed {r.seed} ({r.path})", json.dumps(r.config, indent=2, sort_keys=True))
           for r in runs])


def build_document(runs: list[Run], split: str = "auto", baseline: str | None = "simcse",
                   title: str = "cselab experiment report") -> Document:
    if not runs:
        raise ExperimentError("no runs to report on")
    named_baseline = baseline
    baseline = variant_baseline(runs, baseline)
    chosen = choose_split(runs, split)
    recipes = recipe_order(runs, baseline)
    seeds = {recipe: len([r for r in runs if r.recipe == recipe and chosen in r.evals]) for recipe in recipes}
    tables = build_tables(runs, chosen, baseline) if chosen else []
    extra = [t for t in (stsb_dev_table(tables, runs, chosen, baseline), training_table(runs, baseline))
             if t is not None]
    plots, missing = all_plots(runs, recipes, tables, chosen or "dev")
    tests = tests_section(tables, recipes, baseline)
    if baseline != named_baseline:
        tests.blocks.insert(0, Paragraph(f"{named_baseline} was run with several settings; the tests compare with "
                                         f"{baseline} (name another with --baseline)."))
    sections = [results_section(tables, extra, seeds), *grid_sections(runs, tables, chosen), tests,
                Section("Plots", [PlotBlock(p) for p in plots] + [Paragraph(f"Not drawn: {why}.") for why in missing]),
                runs_section(runs), versions_section(runs), configurations_section(runs)]
    return Document(title, intro_lines(runs, recipes, chosen), sections, plots, chosen, tables + extra)


# ---- Markdown ----------------------------------------------------------------------------------


def _md_cell(cell: Cell) -> str:
    text = cell.text.replace("|", "\\|")
    return f"**{text}**" if cell.bold else text


def to_markdown(doc: Document, plot_dir: str = "plots") -> str:
    lines = [f"# {doc.title}", ""] + [line for text in doc.intro for line in (text, "")]
    for section in doc.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Paragraph):
                lines += [block.text, ""]
            elif isinstance(block, TableBlock):
                shown = block.markdown_columns or range(len(block.headers))
                headers = [block.headers[i] for i in shown]
                lines += ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
                lines += ["| " + " | ".join(_md_cell(row[i]) for i in shown) + " |" for row in block.rows] + [""]
                if block.markdown_columns is not None:
                    lines += [f"(report.html has every column: {', '.join(block.headers)}.)", ""]
            elif isinstance(block, PlotBlock):
                lines += [f"![{block.plot.title}]({plot_dir}/{block.plot.name}.svg)", "", f"*{block.plot.caption}*", ""]
            elif isinstance(block, CodeBlock):
                lines += ["<details>", f"<summary>{html.escape(block.summary)}</summary>", "", "```json",
                          block.text, "```", "", "</details>", ""]
    return "\n".join(lines)


# ---- HTML --------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1150px;
       padding: 0 1em; color: #1d1d1f; background: #ffffff; line-height: 1.45; }
h1 { font-size: 1.7em; border-bottom: 3px solid #2b6cb0; padding-bottom: .3em; }
h2 { font-size: 1.3em; margin-top: 2em; color: #2b6cb0; }
table { border-collapse: collapse; margin: .8em 0 1.4em; font-size: .9em; }
th, td { border: 1px solid #cbd5e0; padding: .35em .6em; text-align: right; white-space: nowrap; }
th { background: #2b6cb0; color: #ffffff; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #f0f4f8; }
td.best { font-weight: 700; background: #c6f6d5 !important; }
table.runs td, table.versions td { text-align: left; font-size: .85em; }
table.runs td:nth-child(3) { white-space: normal; overflow-wrap: anywhere; min-width: 12em; }
.scroll { overflow-x: auto; }
figure.plot { margin: 1.2em 0; border: 1px solid #e2e8f0; padding: .6em; }
figure.plot svg { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #4a5568; }
details { margin: .3em 0; } summary { cursor: pointer; }
pre { background: #f7fafc; border: 1px solid #e2e8f0; padding: .6em; font-size: .8em; overflow-x: auto; }
"""


def _html_table(block: TableBlock) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in block.headers)
    best = ' class="best"'
    body = "".join("<tr>" + "".join(f"<td{best if c.bold else ''}>{html.escape(c.text)}</td>" for c in row)
                   + "</tr>" for row in block.rows)
    return (f'<div class="scroll"><table class="{block.kind}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def to_html(doc: Document) -> str:
    parts = [f"<h1>{html.escape(doc.title)}</h1>"] + [f"<p>{html.escape(t)}</p>" for t in doc.intro]
    for section in doc.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        for block in section.blocks:
            if isinstance(block, Paragraph):
                parts.append(f"<p>{html.escape(block.text)}</p>")
            elif isinstance(block, TableBlock):
                parts.append(_html_table(block))
            elif isinstance(block, PlotBlock):
                plot = block.plot
                parts.append(f'<figure class="plot" id="plot-{plot.name}">{plot.svg}'
                             f"<figcaption><b>{html.escape(plot.title)}.</b> "
                             f"{html.escape(plot.caption)}</figcaption></figure>")
            elif isinstance(block, CodeBlock):
                parts.append(f"<details><summary>{html.escape(block.summary)}</summary>"
                             f"<pre>{html.escape(block.text)}</pre></details>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(doc.title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


# ---- writing -----------------------------------------------------------------------------------


def write_report(paths: list[str | Path], out: str | Path, baseline: str | None = "simcse", split: str = "auto",
                 title: str = "cselab experiment report", name: str = "report") -> dict[str, Path]:
    """NAME.md (+ its plots' .svg), NAME.html (self-contained) and NAME.json (the tables) in ``out``; the plots go
    to ``plots/``, or ``NAME-plots/`` for another name, so that reports of several names share a folder."""
    runs = find_runs(paths)
    doc = build_document(runs, split, baseline, title)
    out = Path(out)
    plot_dir = "plots" if name == "report" else f"{name}-plots"
    (out / plot_dir).mkdir(parents=True, exist_ok=True)
    for plot in doc.plots:
        (out / plot_dir / f"{plot.name}.svg").write_text(plot.svg + "\n", encoding="utf-8")
    written = {"markdown": out / f"{name}.md", "html": out / f"{name}.html", "json": out / f"{name}.json"}
    written["markdown"].write_text(to_markdown(doc, plot_dir), encoding="utf-8")
    written["html"].write_text(to_html(doc), encoding="utf-8")
    summary = {"split": doc.split, "baseline": baseline, "test": TEST_NAME,
               "runs": [{"recipe": r.recipe, "seed": r.seed, "path": str(r.path), "finished": r.finished}
                        for r in runs],
               "tables": {t.name: t.to_dict() for t in doc.tables}, "plots": [p.name for p in doc.plots]}
    from cselab.experiments.runs import write_json

    write_json(written["json"], summary)
    return written
