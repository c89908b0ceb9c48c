"""Run directories: where a sweep puts each (recipe, seed) and how a report reads them back."""
from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.run_files import CHECKPOINTS, EVAL_FILE, METRICS, RUN_CONFIG, SUMMARY, VERSIONS

log = logging.getLogger("cselab.experiments")

SPLITS = ("dev", "test")


def eval_file(split: str) -> str:
    return EVAL_FILE.format(split=split)


def recipe_label(recipe: str) -> str:
    """The name a recipe is known by (a YAML path counts by its stem, as load_config does)."""
    return Path(recipe).stem


def run_path(out: Path, recipe: str, seed: int) -> Path:
    return Path(out) / recipe_label(recipe) / f"seed-{seed}"


def files_outside_checkpoints(root: Path) -> Iterator[Path]:
    """The files below ``root`` (a folder's own in name order, then its subfolders'), without
    descending into ``checkpoints`` folders: those come and go while a run trains, and hold no run's
    saved model or results. A folder that vanishes or cannot be read during the walk is passed over;
    any other error is raised."""
    def passed_over(error: OSError) -> None:
        if not isinstance(error, (FileNotFoundError, PermissionError)):
            raise error

    for folder, subfolders, files in os.walk(root, onerror=passed_over):
        subfolders[:] = sorted(name for name in subfolders if name != CHECKPOINTS)
        yield from (Path(folder) / name for name in sorted(files))


def run_directories(root: Path) -> list[Path]:
    """The run directories below ``root`` (each holds a run config), read safely while a sweep writes."""
    return [path.parent for path in files_outside_checkpoints(root) if path.name == RUN_CONFIG]


def read_json(path: Path) -> dict | None:
    """A JSON object from ``path``; None when absent; a one-line error naming the file when broken."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ExperimentError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def read_metrics(path: Path) -> list[dict]:
    """The records of metrics.jsonl; a last line cut short by a crash is skipped, any other bad line is an error."""
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("a record needs an integer 'step'")
        except ValueError as exc:
            if number == len(lines):
                log.warning("%s:%d: skipped a record cut short (%s)", path, number, exc)
                continue
            raise ExperimentError(f"{path}:{number}: not a metrics record ({exc})") from None
        records.append(record)
    return records


def write_json(path: Path, data: dict) -> None:
    """Replace ``path`` atomically (a killed sweep never leaves half a result file)."""
    from cselab.train.checkpoint import write_json_atomic

    write_json_atomic(Path(path), _finite(data))


def _finite(value):
    """JSON has no NaN: undefined numbers become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@dataclass
class Run:
    """Everything a report needs from one run directory."""

    path: Path
    recipe: str
    seed: int
    config: dict
    summary: dict | None = None
    metrics: list[dict] = field(default_factory=list)
    evals: dict[str, dict] = field(default_factory=dict)  # split -> the evaluation suite's result dict
    versions: dict = field(default_factory=dict)
    recipe_name: str | None = None  # the recipe's own name where ``recipe`` names a variant of it (a grid point)
    variant: dict = field(default_factory=dict)  # the varied keys' values that tell it from the recipe's other runs

    @property
    def finished(self) -> bool:
        return bool(self.summary and self.summary.get("finished"))

    def curve(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one metric over training, skipping records without it."""
        points = [(r["step"], r[key]) for r in self.metrics
                  if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
        return [s for s, _ in points], [v for _, v in points]


def load_run(path: Path) -> Run:
    path = Path(path)
    config = read_json(path / RUN_CONFIG)
    if config is None:
        raise ExperimentError(f"{path}: not a run directory (no {RUN_CONFIG}; "
                              "train it with `cselab sweep` or `cselab train`)")
    try:
        recipe, seed = str(config["recipe"]), int(config["train"]["seed"])
    except (KeyError, TypeError, ValueError):
        raise ExperimentError(f"{path / RUN_CONFIG}: lacks 'recipe' or 'train.seed'") from None
    evals = {}
    for split in SPLITS:
        result = read_json(path / eval_file(split))
        if result is not None:
            if not isinstance(result.get("tasks"), dict):
                raise ExperimentError(f"{path / eval_file(split)}: lacks the 'tasks' of an evaluation result")
            evals[split] = result
    return Run(path=path, recipe=recipe, seed=seed, config=config, summary=read_json(path / SUMMARY),
               metrics=read_metrics(path / METRICS), evals=evals, versions=read_json(path / VERSIONS) or {})


def find_runs(paths: list[str | Path]) -> list[Run]:
    """Run directories named directly, or found below a directory (e.g. a sweep's output)."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise FileNotFoundError(f"{path}: not found")
        if (path / RUN_CONFIG).is_file():
            candidates = [path]
        elif not path.is_dir():
            raise ExperimentError(f"{path}: not a run directory or a folder of runs")
        else:
            candidates = sorted(run_directories(path))
            if not candidates:
                raise ExperimentError(f"{path}: no run directories below it (none holds {RUN_CONFIG})")
        found += [c for c in candidates if c.resolve() not in {f.resolve() for f in found}]
    runs = label_variants([load_run(p) for p in found])
    seen: dict[tuple[str, int], Path] = {}
    for run in runs:
        key = (run.recipe, run.seed)
        if key in seen:
            raise ExperimentError(f"{run.path}: recipe {run.recipe} seed {run.seed} is also {seen[key]}; "
                                  f"a report compares one run per recipe and seed")
        seen[key] = run.path
    return runs


def flatten(data, prefix: str = "") -> dict:
    """A config as dotted keys, list entries by index (``objective[0].temperature``), as --set and --grid
    name them."""
    if isinstance(data, dict) and data:
        items = [(f"{prefix}.{key}" if prefix else str(key), value) for key, value in data.items()]
    elif isinstance(data, list) and data:
        items = [(f"{prefix}[{i}]", value) for i, value in enumerate(data)]
    else:
        return {prefix: data}
    flat: dict = {}
    for key, value in items:
        flat.update(flatten(value, key))
    return flat


def _value_text(value, short: bool) -> str:
    """A varied key's value in a run's name; ``short``: floats in 4 significant digits (a search draws
    values like 3.1622776601683795e-05)."""
    if short and isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


def _variant_name(recipe: str, short: dict[str, str], values: dict, rounded: bool) -> str:
    """``recipe key=value ...`` over the varied keys (``short``: each key's name in the label)."""
    return recipe + " " + " ".join(f"{name}={_value_text(values.get(key), rounded)}" for key, name in short.items())


def _section_key(key: str) -> str:
    """``train.report_to[0]`` -> ``train.report_to``: the ``section.key`` of a config field, under flatten's
    deeper keys."""
    return ".".join(re.sub(r"\[\d+\]", "", key).split(".")[:2])


def label_variants(runs: list[Run]) -> list[Run]:
    """Runs of one recipe trained with different settings (a sweep's --grid) are told apart by the keys that
    differ, e.g. ``simcse lr=1e-05``: the report compares them as separate rows. The seed, the output folder
    and the keys that do not change a result (those that may change on resume, ``config.schema``) do not count."""
    from cselab.config import Config
    from cselab.config.schema import resume_safe_keys

    ignored = resume_safe_keys() | {"train.seed"}
    defaults = Config().to_dict()
    for recipe in sorted({r.recipe for r in runs}):
        group = [r for r in runs if r.recipe == recipe]
        # A key a run's saved config lacks (saved before the setting existed) counts as its default, as
        # resuming counts it (checkpoint.config_differences): the same run is no variant of itself.
        flat = [flatten({section: {**value, **r.config.get(section, {})} if isinstance(value, dict)
                         else r.config.get(section, value) for section, value in defaults.items()}
                        | {k: v for k, v in r.config.items() if k not in defaults}) for r in group]
        keys = [k for k in sorted(set().union(*flat)) if _section_key(k) not in ignored
                and len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]
        if not keys:
            continue
        last = [k.rsplit(".", 1)[-1] for k in keys]
        short = {k: (name if last.count(name) == 1 else k) for k, name in zip(keys, last, strict=True)}
        # rounded names where they still tell the settings apart, the values in full where they would not
        distinct = {json.dumps([v.get(k) for k in keys]) for v in flat}
        rounded = len({_variant_name(recipe, short, v, True) for v in flat}) == len(distinct)
        for run, values in zip(group, flat, strict=True):
            run.recipe_name, run.variant = recipe, {k: values.get(k) for k in keys}
            run.recipe = _variant_name(recipe, short, values, rounded)
    return runs
