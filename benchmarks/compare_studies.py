"""Compare two runs of the same study (two ``cselab report`` report.json files): what changed per recipe.

    python benchmarks/compare_studies.py OLD/report.json NEW/report.json --out NEW/changes.md

For every recipe in both reports and every column of the STS, transfer and alignment tables: the old and
the new mean over seeds, their difference, and Welch's t-test between the two sets of seeds (the seeds
draw the same corpus sample in both studies, but the recipes differ, so the runs are not paired). A second
table gives each recipe's gap to the baseline recipe in both studies: a change of recipe that moves
every method alike (the baseline's own included) shows there, not as a method's gain.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from scipy import stats

TABLES = ("sts", "transfer", "align")


def _load(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SystemExit(f"compare_studies: cannot read {path}: {error}") from None
    missing = [name for name in ("baseline", "tables") if name not in report]
    if missing:
        raise SystemExit(f"compare_studies: {path} is not a cselab report.json (no {', '.join(missing)})")
    return report


def _cell(report: dict, table: str, recipe: str, column: str) -> dict | None:
    return report["tables"].get(table, {}).get("rows", {}).get(recipe, {}).get(column)


def _welch_p(old: dict, new: dict) -> float:
    a, b = list(old["seeds"].values()), list(new["seeds"].values())
    if min(len(a), len(b)) < 2:
        return math.nan
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def _fmt(value: float, digits: int) -> str:
    return "–" if math.isnan(value) else f"{value:.{digits}f}"


def compare(old: dict, new: dict) -> str:
    recipes = [r for r in new["tables"]["sts"]["rows"] if r in old["tables"]["sts"]["rows"]]
    only_new = [r for r in new["tables"]["sts"]["rows"] if r not in recipes]
    only_old = [r for r in old["tables"]["sts"]["rows"] if r not in new["tables"]["sts"]["rows"]]
    lines = ["## Per recipe: old mean → new mean (difference; Welch p over seeds)", ""]
    for table in TABLES:
        columns = [c for c in new["tables"][table]["columns"] if c in old["tables"].get(table, {}).get("columns", [])]
        labels = new["tables"][table]["labels"]
        digits = 4 if table == "align" else 2
        lines += ["| recipe | n old/new | " + " | ".join(labels[c] for c in columns) + " |",
                  "|---|---|" + "---|" * len(columns)]
        for recipe in recipes:
            cells, counts = [], None
            for column in columns:
                a, b = _cell(old, table, recipe, column), _cell(new, table, recipe, column)
                if a is None or b is None:
                    cells.append("–")
                    continue
                counts = f"{a['n']}/{b['n']}"
                p = _welch_p(a, b)
                cells.append(f"{a['mean']:.{digits}f} → {b['mean']:.{digits}f} "
                             f"({b['mean'] - a['mean']:+.{digits}f}; p {_fmt(p, 2)})")
            lines.append(f"| {recipe} | {counts or '–'} | " + " | ".join(cells) + " |")
        lines.append("")

    baseline = new["baseline"]
    if baseline and baseline == old["baseline"] and baseline in recipes:
        lines += [f"## Gap to {baseline} (method mean − {baseline} mean), old → new", ""]
        columns = ("STSBenchmark", "SICKRelatedness")
        lines += ["| recipe | " + " | ".join(new["tables"]["sts"]["labels"][c] for c in columns) + " |",
                  "|---|" + "---|" * len(columns)]
        for recipe in recipes:
            if recipe == baseline:
                continue
            cells = []
            for column in columns:
                gaps = []
                for report in (old, new):
                    method, base = _cell(report, "sts", recipe, column), _cell(report, "sts", baseline, column)
                    gaps.append(None if method is None or base is None else method["mean"] - base["mean"])
                cells.append("–" if None in gaps else f"{gaps[0]:+.2f} → {gaps[1]:+.2f}")
            lines.append(f"| {recipe} | " + " | ".join(cells) + " |")
        lines.append("")
    if only_new or only_old:
        lines += [f"Only in the new study: {', '.join(only_new) or 'none'}. "
                  f"Only in the old study: {', '.join(only_old) or 'none'}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the earlier study's report.json")
    parser.add_argument("new", type=Path, help="the later study's report.json")
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    args = parser.parse_args()
    text = f"# Changes: {args.old} → {args.new}\n\n" + compare(_load(args.old), _load(args.new))
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text)


if __name__ == "__main__":
    main()
