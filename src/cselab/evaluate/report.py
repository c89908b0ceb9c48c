"""Results as JSON and as Markdown tables in the papers' layout (STS12 ... SICK-R, Avg.)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from cselab.evaluate.tasks import STS_YEARS, group_names, label, task_class


def _clean(value):
    """JSON has no NaN: undefined correlations become null."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def to_json(results: list[dict]) -> str:
    """One model: its result dict (headline under ``avg``); several: ``{"models": [...]}``."""
    payload = results[0] if len(results) == 1 else {"models": results}
    return json.dumps(_clean(payload), indent=2)


PROTOCOL_NAMES = {"sklearn": "scikit-learn LogisticRegression", "senteval": "SentEval's PyTorch classifier"}


def _number(value) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def _model_cell(result: dict) -> str:
    return f"{result['model']} ({result.get('pooler') or '?'})"


def markdown(results: list[dict]) -> str:
    """Side-by-side tables for one or more models evaluated on the same tasks."""
    first = results[0]
    split = first["split"]
    # A user's own files have no test or dev part: the split is SentEval's, said only where its tasks ran.
    own_only = all(task_class(n).group == "own" for r in results for n in r["tasks"])
    title = ("your own data" if own_only else "test: the papers' protocol" if split == "test"
             else "dev: model selection data")
    lines = [f"# cselab evaluation ({title})", ""]
    sts = [n for n in group_names("sts") if any(n in r["tasks"] for r in results)]
    if sts:
        lines += ["Spearman correlation x100 of cosine similarity with gold scores"
                  + (" (STS12-16: all subsets pooled)." if any(n in STS_YEARS for n in sts) else "."), ""]
        rows = [[_model_cell(r)] + [_number(r["tasks"].get(n, {}).get("score")) for n in sts] + [_number(r["avg"])]
                for r in results]
        lines += _table(["Model (pooler)"] + [label(n, split) for n in sts] + ["Avg."], rows) + [""]
    years = [n for n in STS_YEARS if any(n in r["tasks"] for r in results)]
    if years:
        lines += ["STS12-16 aggregates: all (pooled) / mean / wmean (size-weighted mean) of subsets.", ""]
        rows = [[_model_cell(r)] + [" / ".join(_number(r["tasks"][n][k]) for k in ("all", "mean", "wmean"))
                                   if n in r["tasks"] else "-" for n in years] for r in results]
        lines += _table(["Model (pooler)"] + years, rows) + [""]
    transfer = [n for n in group_names("transfer") if any(n in r["tasks"] for r in results)]
    if transfer:
        what = "test accuracy" if split == "test" else "validation accuracy (SentEval's devacc)"
        protocol = first.get("transfer_protocol", "sklearn")  # results written before the option: sklearn
        lines += [f"Transfer tasks: logistic-regression probe {what}, protocol {protocol} "
                  f"({PROTOCOL_NAMES.get(protocol, protocol)}), mode {first['transfer_mode']}.", ""]
        rows = [[_model_cell(r)] + [_number(r["tasks"].get(n, {}).get("score")) for n in transfer]
                + [_number(r["transfer_avg"])] for r in results]
        lines += _table(["Model (pooler)"] + [label(n, split) for n in transfer] + ["Avg."], rows) + [""]
    if any("align" in r["tasks"] for r in results):
        lines += ["Alignment and uniformity (Wang & Isola 2020; lower is better), normalised embeddings.", ""]
        rows = [[_model_cell(r), f"{r['tasks']['align']['alignment']:.4f}", f"{r['tasks']['align']['uniformity']:.4f}",
                 r["tasks"]["align"]["file"], str(r["tasks"]["align"]["n_pairs"])]
                for r in results if "align" in r["tasks"]]
        lines += _table(["Model (pooler)", "Alignment", "Uniformity", "Data", "Pairs (gold > 4)"], rows) + [""]
    own = list(dict.fromkeys(n for r in results for n in r["tasks"] if task_class(n).group == "own"))
    if own:
        lines += ["Your own data: " + "; ".join(f"{label(n, split)} ({task_class(n).metric})" for n in own) + ".", ""]
        rows = [[_model_cell(r)] + [_number(r["tasks"].get(n, {}).get("score")) for n in own] for r in results]
        lines += _table(["Model (pooler)"] + [label(n, split) for n in own], rows) + [""]
    lines += ["Models:", ""]
    for r in results:
        lines.append(f"- {r['model']}: path {r.get('path')}, pooler {r.get('pooler')}, max_seq_len "
                     f"{r.get('max_seq_len')}, precision {r.get('precision')}")
    if any("score" in value and _undefined(value["score"]) for r in results for value in r["tasks"].values()):
        lines += ["", "-: the correlation is undefined: the model gave every pair of that task the same similarity."]
    data = (f"Data directory: {first['data_dir']} (split {split}); " if first.get("data_dir")
            else "" if own_only else f"Split {split}; ")
    closing = f"{data}seed {first['seed']}; {first['date']}."
    lines += ["", closing[0].upper() + closing[1:], ""]
    return "\n".join(lines)


def _undefined(score) -> bool:
    """A score that was computed and is no number (a correlation with a constant side; null in JSON)."""
    return score is None or (isinstance(score, float) and math.isnan(score))


def write(results: list[dict], json_path: Path | None, markdown_path: Path | None,
          table: str | None = None) -> list[Path]:
    """Write the JSON and the Markdown (``table``, default :func:`markdown` of ``results``) where given."""
    written = []
    if json_path is not None:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(to_json(results) + "\n")
        written.append(Path(json_path))
    if markdown_path is not None:
        Path(markdown_path).parent.mkdir(parents=True, exist_ok=True)
        Path(markdown_path).write_text(markdown(results) if table is None else table)
        written.append(Path(markdown_path))
    return written
