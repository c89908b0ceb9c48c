"""docs/methods.md's table of recipe defaults is what the shipped recipes resolve to.

Every shipped recipe is loaded through the config loader (inheritance and validation included) and
rendered cell by cell; the table in the docs must have one row per recipe with exactly those cells,
so a changed recipe without a changed table (or the reverse) fails here.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from cselab.config import list_recipes, load_config

METHODS = Path(__file__).resolve().parents[2] / "docs" / "methods.md"
HEADING = "### Defaults of every recipe"
COLUMNS = ["recipe", "batch", "lr", "weight decay", "epochs", "eval every", "pooler", "head", "views", "objective"]


def number(value: float) -> str:
    """3e-05 -> 3e-5, 0.0005 -> 5e-4 (small numbers in the table's scientific form), 0.01 -> 0.01, 64 -> 64."""
    if isinstance(value, float) and value and abs(value) < 1e-3:
        mantissa, exponent = f"{value:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def value_text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return number(value)
    return str(value)


def augmenter_text(name: str, params: dict) -> str:
    """An augmenter by name; a ``sequence`` as its steps in order (the rates are in the recipes' comments)."""
    if name == "sequence":
        return " → ".join(step["name"] for step in params["steps"])
    return name


def views_text(views) -> str:
    parts = []
    if views.anchor != "identity":
        parts.append(f"anchor: {augmenter_text(views.anchor, views.anchor_params)}")
    positive = augmenter_text(views.positive, views.positive_params)
    parts.append(f"positive: {positive}" + (f" (p {number(views.positive_prob)})" if views.positive_prob < 1 else ""))
    if views.negative != "none":
        parts.append(f"negative: {augmenter_text(views.negative, views.negative_params)} every {views.negative_every}")
    if views.label:
        parts.append(f"label: {len(views.label)} augmenters")
    return "; ".join(parts)


def term_text(term: dict) -> str:
    params = ", ".join(f"{key}={value_text(value)}" for key, value in term.items() if key not in ("name", "weight"))
    weight = float(term.get("weight", 1.0))
    return ("" if weight == 1.0 else f"{number(weight)} × ") + f"{term['name']}({params})"


def row(recipe: str) -> list[str]:
    c = load_config(recipe)
    return [recipe, number(c.optim.batch_size), number(c.optim.lr), number(c.optim.weight_decay),
            number(c.optim.epochs), number(c.train.eval_steps), c.model.pooler, c.model.projection,
            views_text(c.views), " + ".join(term_text(t) for t in c.objective)]


def documented_rows() -> dict[str, list[str]]:
    """The rows of the table under HEADING, by recipe, with backticks and outer spaces stripped."""
    text = METHODS.read_text(encoding="utf-8")
    assert HEADING in text, f"docs/methods.md has no section {HEADING!r}"
    lines = text.split(HEADING, 1)[1].splitlines()
    table = [line for line in lines[next(i for i, line in enumerate(lines) if line.startswith("|")):]]
    table = table[:next((i for i, line in enumerate(table) if not line.startswith("|")), len(table))]
    cells = [[cell.strip().replace("`", "") for cell in line.strip().strip("|").split("|")] for line in table]
    assert cells[0] == COLUMNS, f"the table's columns are {cells[0]}, expected {COLUMNS}"
    assert all(re.fullmatch(r":?-+:?", cell) for cell in cells[1])
    rows = {line[0]: line for line in cells[2:]}
    assert len(rows) == len(cells) - 2, "a recipe has two rows"
    return rows


def test_the_table_has_one_row_per_shipped_recipe():
    assert sorted(documented_rows()) == list_recipes()


@pytest.mark.parametrize("recipe", list_recipes())
def test_the_documented_defaults_are_the_recipes(recipe):
    documented = documented_rows().get(recipe)
    assert documented is not None, f"docs/methods.md: no row for {recipe}"
    expected = row(recipe)
    for column, doc, actual in zip(COLUMNS, documented, expected, strict=True):
        assert doc == actual, f"{recipe}: column {column!r} says {doc!r}, the recipe resolves to {actual!r}"


def test_a_drifted_row_is_caught():
    """The comparison is not vacuous: a recipe loaded with another learning rate no longer matches."""
    documented = documented_rows()["simcse"]
    assert documented[COLUMNS.index("lr")] == number(load_config("simcse").optim.lr)
    assert documented[COLUMNS.index("lr")] != number(load_config("simcse", ["optim.lr=1e-5"]).optim.lr)


def render_table() -> str:
    """The table as docs/methods.md should hold it (``python -m tests.recipes.test_methods_table``)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for recipe in list_recipes():
        cells = row(recipe)
        cells = [f"`{cells[0]}`", *cells[1:-1], " + ".join(f"`{t}`" for t in cells[-1].split(" + "))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_table())
