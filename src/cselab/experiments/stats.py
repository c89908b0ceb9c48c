"""Mean and spread over seeds, the best recipe per column, and a paired test against a baseline recipe.

The test is Student's paired t-test (``scipy.stats.ttest_rel``, two-sided) over the seeds both
recipes were run with: seed s of a recipe is compared with seed s of the baseline, which removes
the variance a seed causes in both (data order, dropout). Wilcoxon's signed-rank test is not used
because with 3 pairs its exact two-sided p-value can never fall below 0.25. With n = 3 the t-test
has little power too: a large p-value means "not shown", not "no difference".
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from cselab.evaluate.tasks import group_names, label
from cselab.experiments.runs import Run

TEST_NAME = "paired t-test (scipy.stats.ttest_rel, two-sided) over shared seeds"


def number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class Column:
    """One number per evaluation result, e.g. the STS12 score or the STS average."""

    key: str
    label: str
    extract: Callable[[dict], float | None]
    higher_is_better: bool = True
    digits: int = 2


@dataclass
class Cell:
    values: dict[int, float]  # seed -> value

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return float(np.mean(list(self.values.values()))) if self.values else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation over seeds (ddof = 1); None with fewer than two seeds."""
        return float(np.std(list(self.values.values()), ddof=1)) if self.n >= 2 else None


@dataclass
class ReferenceRow:
    """A row that is not a recipe (the base model before training): shown first, never bold, never tested."""

    label: str
    precision: str  # how its figures were computed
    cells: dict[str, Cell]  # column key -> values, one per distinct measurement (runs may share one)
    recipes: list[str] = field(default_factory=list)  # the recipes whose runs recorded it
    runs: int = 0  # how many runs recorded it

    def to_dict(self) -> dict:
        return {"label": self.label, "precision": self.precision, "recipes": self.recipes, "runs": self.runs,
                "cells": {key: {"mean": c.mean, "std": c.std, "n": c.n} for key, c in self.cells.items()}}


@dataclass
class PairedTest:
    n: int
    mean_difference: float | None
    statistic: float | None
    p_value: float | None
    note: str = ""


@dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    recipes: list[str]
    cells: dict[tuple[str, str], Cell]
    best: dict[str, set[str]] = field(default_factory=dict)  # column key -> recipes with the best mean
    tests: dict[tuple[str, str], PairedTest] = field(default_factory=dict)  # (recipe, column) vs baseline
    precision: dict[str, str] = field(default_factory=dict)  # recipe -> precision its figures were computed in
    reference_rows: list[ReferenceRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the figures are, printed under the table

    def to_dict(self) -> dict:
        rows = {}
        for recipe in self.recipes:
            rows[recipe] = {}
            for column in self.columns:
                cell = self.cells[(recipe, column.key)]
                entry = {"mean": cell.mean, "std": cell.std, "n": cell.n,
                         "seeds": {str(s): v for s, v in sorted(cell.values.items())},
                         "best": recipe in self.best.get(column.key, set())}
                test = self.tests.get((recipe, column.key))
                if test is not None:
                    entry["vs_baseline"] = {"n": test.n, "mean_difference": test.mean_difference,
                                            "t": test.statistic, "p": test.p_value, "note": test.note}
                rows[recipe][column.key] = entry
        return {"title": self.title, "columns": [c.key for c in self.columns],
                "labels": {c.key: c.label for c in self.columns}, "rows": rows, "precision": self.precision,
                "reference_rows": [r.to_dict() for r in self.reference_rows], "notes": self.notes}


def _task_score(name: str) -> Callable[[dict], float | None]:
    return lambda result: number((result.get("tasks", {}).get(name) or {}).get("score"))


def table_columns(results: list[dict], split: str) -> dict[str, tuple[str, list[Column]]]:
    """The papers' columns that some result has: STS12..SICK-R + Avg., transfer tasks + Avg., align/uniform."""
    present = set().union(*(r.get("tasks", {}).keys() for r in results)) if results else set()
    groups: dict[str, tuple[str, list[Column]]] = {}
    sts = [n for n in group_names("sts") if n in present]  # the registry now: a task registered later too
    if sts:
        groups["sts"] = ("STS: Spearman correlation x100 of cosine similarity (mean ± std over seeds)",
                         [Column(n, label(n, split), _task_score(n)) for n in sts]
                         + [Column("avg", "Avg.", lambda r: number(r.get("avg")))])
    transfer = [n for n in group_names("transfer") if n in present]
    if transfer:
        what = "test accuracy" if split == "test" else "validation accuracy"
        groups["transfer"] = (f"Transfer tasks: logistic-regression probe {what} in % (mean ± std over seeds)",
                              [Column(n, label(n, split), _task_score(n)) for n in transfer]
                              + [Column("transfer_avg", "Avg.", lambda r: number(r.get("transfer_avg")))])
    if "align" in present:
        groups["align"] = ("Alignment and uniformity (Wang & Isola 2020; lower is better)",
                           [Column("alignment", "Alignment",
                                   lambda r: number((r["tasks"].get("align") or {}).get("alignment")),
                                   higher_is_better=False, digits=4),
                            Column("uniformity", "Uniformity",
                                   lambda r: number((r["tasks"].get("align") or {}).get("uniformity")),
                                   higher_is_better=False, digits=4)])
    return groups


def training_table(runs: list[Run], baseline: str | None) -> Table | None:
    """Cost of each recipe from the runs' summary.json: training seconds and sentences per second."""
    trained = [r for r in runs if r.finished]
    if not trained:
        return None
    columns = [Column("train_seconds", "Training time (s)", lambda s: number(s.get("train_seconds")),
                      higher_is_better=False, digits=0),
               Column("sentences_per_second", "Sentences/s", lambda s: number(s.get("sentences_per_second")),
                      digits=1),
               Column("steps", "Steps", lambda s: number(s.get("steps")), digits=0)]
    recipes = recipe_order(trained, baseline)
    cells = {(recipe, c.key): Cell({r.seed: v for r in trained if r.recipe == recipe
                                    for v in [c.extract(r.summary)] if v is not None})
             for recipe in recipes for c in columns}
    # summary.json's wall_seconds covers only the last invocation of a resumed run, so it is not shown.
    return Table("training", "Training cost per run (summary.json: time in the training loop, summed over "
                 "resumptions, without model loading and dev evaluations; mean ± std over seeds)",
                 columns, recipes, cells)


def recipe_order(runs: list[Run], baseline: str | None) -> list[str]:
    names = sorted({r.recipe for r in runs})
    return ([baseline] if baseline in names else []) + [n for n in names if n != baseline]


def paired_test(values: dict[int, float], baseline: dict[int, float]) -> PairedTest:
    """``values`` minus ``baseline`` over the seeds both have."""
    from scipy.stats import ttest_rel

    seeds = sorted(set(values) & set(baseline))
    if len(seeds) < 2:
        return PairedTest(len(seeds), None, None, None, "needs at least 2 shared seeds")
    x = np.array([values[s] for s in seeds])
    y = np.array([baseline[s] for s in seeds])
    differences = x - y
    mean_difference = float(differences.mean())
    if np.ptp(differences) == 0:
        return PairedTest(len(seeds), mean_difference, None, None, "identical difference on every seed: t undefined")
    result = ttest_rel(x, y)
    return PairedTest(len(seeds), mean_difference, float(result.statistic), float(result.pvalue))


def mark_best(table: Table) -> None:
    """The recipes with the best mean in each column (reference rows do not compete), compared as the table
    shows them (rounded to the column's digits): means that print the same are all best."""
    for column in table.columns:
        means = {recipe: table.cells[(recipe, column.key)].mean for recipe in table.recipes}
        means = {k: round(v, column.digits) for k, v in means.items() if v is not None}
        if means:
            target = max(means.values()) if column.higher_is_better else min(means.values())
            table.best[column.key] = {k for k, v in means.items() if v == target}


def eval_precision(runs: list[Run], split: str) -> str:
    """The precision the evaluations of ``runs`` encoded in (eval-<split>.json), several joined when they differ."""
    found = {str(r.evals[split].get("precision") or "not recorded") for r in runs if split in r.evals}
    return ", ".join(sorted(found)) or "-"


def build_tables(runs: list[Run], split: str, baseline: str | None) -> list[Table]:
    evaluated = [r for r in runs if split in r.evals]
    groups = table_columns([r.evals[split] for r in evaluated], split)
    recipes = recipe_order(evaluated, baseline)
    tables = []
    for name, (title, columns) in groups.items():
        cells = {}
        for recipe in recipes:
            for column in columns:
                values = {r.seed: column.extract(r.evals[split]) for r in evaluated if r.recipe == recipe}
                cells[(recipe, column.key)] = Cell({s: v for s, v in values.items() if v is not None})
        precision = {recipe: eval_precision([r for r in evaluated if r.recipe == recipe], split) for recipe in recipes}
        table = Table(name, title, columns, recipes, cells, precision=precision)
        mark_best(table)
        for column in columns:
            if baseline in recipes:
                for recipe in recipes:
                    if recipe != baseline:
                        table.tests[(recipe, column.key)] = paired_test(cells[(recipe, column.key)].values,
                                                                        cells[(baseline, column.key)].values)
        tables.append(table)
    return tables
