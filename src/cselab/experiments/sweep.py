"""``cselab sweep``: train and evaluate every recipe x seed (x grid point), resuming where a previous sweep stopped.

Each (recipe, seed) gets ``OUT/<recipe>/seed-<seed>/``; with ``--grid KEY=V1,V2`` each grid point has its own
folder named by its values, ``OUT/<recipe>/KEY=V1/seed-<seed>/``. A run whose training finished with the same
resolved settings is not trained again; one that stopped part-way is resumed by the training loop
from its last checkpoint; an evaluation is redone only when its result file is missing or was made
for other weights, split or probe mode, and tasks added since are evaluated alone and merged in.
``OUT/sweep.json`` aggregates every run in OUT (mean and standard deviation over seeds per recipe),
so a study may be run in several invocations; ``cselab report OUT`` turns them into tables and
plots.
"""
from __future__ import annotations

import gc
import itertools
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.experiments.runs import (
    eval_file,
    files_outside_checkpoints,
    read_json,
    recipe_label,
    run_directories,
    run_path,
    write_json,
)
from cselab.experiments.versions import library_versions
from cselab.run_files import BEST_MODEL, CHECKPOINTS, RUN_CONFIG, SUMMARY, SWEEP_FILE, VERSIONS

BASE_DEV_FILE = "base-stsb-dev.json"  # the starting encoders' STS-B dev, measured once per base model


@dataclass
class SweepSettings:
    recipes: list[str]
    seeds: list[int]
    out: Path
    overrides: list[str] = field(default_factory=list)
    evaluate: bool = True
    eval_split: str = "dev"
    tasks: str = "all"
    data_dir: Path | None = None
    transfer_mode: str = "test"
    transfer_protocol: str = "sklearn"  # or "senteval": SentEval's PyTorch logistic regression
    progress: bool = True
    grid: list[tuple[str, list[str]]] = field(default_factory=list)  # --grid KEY=V1,V2: crossed with the rest
    keep_checkpoints: str = "all"  # all | last | none: what stays in checkpoints/ of a finished run


KEEP_CHECKPOINTS = ("all", "last", "none")


@dataclass
class Job:
    recipe: str
    seed: int
    path: Path
    config: object  # cselab.config.Config
    values: dict[str, str] = field(default_factory=dict)  # the grid point: key -> value as given

    @property
    def name(self) -> str:
        point = "".join(f" {key}={value}" for key, value in self.values.items())
        return f"{recipe_label(self.recipe)}{point} seed {self.seed}"


def parse_recipes(spec: str) -> list[str]:
    """Comma-separated recipe names or YAML paths; ``all`` = every shipped recipe."""
    from cselab.config import list_recipes

    names: list[str] = []
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        for name in (list_recipes() if item == "all" else [item]):
            if name not in names:
                names.append(name)
    if not names:
        raise ExperimentError(f"--recipes {spec!r}: no recipe named (e.g. --recipes simcse,una or --recipes all)")
    labels = [recipe_label(n) for n in names]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise ExperimentError(f"--recipes: {', '.join(twice)} named twice (recipes are told apart by their file name)")
    return names


def parse_seeds(spec: str) -> list[int]:
    seeds: list[int] = []
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        try:
            seed = int(item)
        except ValueError:
            raise ExperimentError(f"--seeds: {item!r} is not an integer (e.g. --seeds 42,0,1)") from None
        if not 0 <= seed < 2**32:
            raise ExperimentError(f"--seeds: {seed} is outside [0, 2**32)")
        if seed not in seeds:
            seeds.append(seed)
    if not seeds:
        raise ExperimentError(f"--seeds {spec!r}: no seed given (e.g. --seeds 42,0,1)")
    return seeds


def check_varied_key(option: str, key: str, seen: set[str], overrides: list[str], twice: str = "") -> None:
    """A key ``--grid`` or ``--space`` varies: once per option, not one the sweep sets, not also fixed
    with --set (``twice``: how to give it once)."""
    if key in seen:
        raise ExperimentError(f"{option} {key}: given twice{twice}")
    if key in SWEEP_SETS:
        raise ExperimentError(f"{option} {key}: the sweep sets it (use --seeds / --out)")
    if overrides_set(list(overrides), key):
        verb = "varied" if option == "--grid" else "searched"
        raise ExperimentError(f"{option} {key}: also given with --set (a key is either fixed or {verb})")


def parse_grid(specs: list[str], overrides: list[str] = ()) -> list[tuple[str, list[str]]]:
    """``--grid KEY=V1,V2`` options as (key, values); every value is checked later, as a --set of its run."""
    grid: list[tuple[str, list[str]]] = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not key or not items:
            raise ExperimentError(f"--grid {spec!r}: expected KEY=V1,V2,... (e.g. --grid optim.lr=1e-5,3e-5)")
        check_varied_key("--grid", key, {k for k, _ in grid}, overrides, " (list all its values in one --grid)")
        if len(set(items)) != len(items):
            raise ExperimentError(f"--grid {key}: a value is listed twice ({values})")
        grid.append((key, items))
    return grid


def grid_points(grid: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination of the grid's values, in the order given (one empty point without a grid)."""
    return [dict(zip([k for k, _ in grid], combo, strict=True)) for combo in itertools.product(*(v for _, v in grid))]


FOLDER_NAME_LIMIT = 120  # file systems allow 255 bytes; a JSON value (model.from_config) can be longer


def point_folder(values: dict[str, str]) -> str:
    """A grid point's folder name: its values as KEY=VALUE joined by commas (path separators replaced); a
    name over FOLDER_NAME_LIMIT characters is cut and ends with a digest of the whole, so it stays unique."""
    import hashlib

    name = ",".join(f"{key}={value}" for key, value in values.items()).replace(os.sep, "_").replace("/", "_")
    if len(name) <= FOLDER_NAME_LIMIT:
        return name
    return f"{name[:FOLDER_NAME_LIMIT - 13]}..{hashlib.sha256(name.encode()).hexdigest()[:11]}"


# The keys the sweep sets itself for every run (from --seeds and --out).
SWEEP_SETS = ("train.seed", "train.output_dir")


def overrides_set(overrides: list[str], key: str) -> bool:
    return any(o.split("=", 1)[0].strip() == key for o in overrides)


def run_overrides(settings: SweepSettings) -> list[str]:
    """The --set options of every run: the user's, and the evaluation's STS-B dev for model selection."""
    overrides = list(settings.overrides)
    for key in SWEEP_SETS:
        if overrides_set(overrides, key):
            raise ExperimentError(f"--set {key}: the sweep sets it (use --seeds / --out)")
    # Model selection on the same STS-B dev the evaluation reads, unless the user chose another.
    if settings.data_dir is not None and not overrides_set(overrides, "data.dev_dir"):
        from cselab.evaluate.dev import STSB_DEV

        if (Path(settings.data_dir) / STSB_DEV).is_file():
            overrides.append(f"data.dev_dir={settings.data_dir}")
    return overrides


def plan(settings: SweepSettings) -> list[Job]:
    """Every run's resolved config, all checked before any training starts."""

    overrides = run_overrides(settings)
    return [point_job(settings, overrides, recipe, seed, values) for recipe in settings.recipes
            for values in grid_points(settings.grid) for seed in settings.seeds]


def point_job(settings: SweepSettings, overrides: list[str], recipe: str, seed: int, values: dict[str, str]) -> Job:
    """One run: the recipe with a grid point's (or a search trial's) values as --set options, in a folder
    named by them (no folder level without values)."""
    from cselab.config import load_config

    path = run_path(settings.out, recipe, seed)
    if values:
        path = path.parent / point_folder(values) / path.name
    config = load_config(recipe, overrides + [f"{key}={value}" for key, value in values.items()],
                         **{"train.seed": seed, "train.output_dir": str(path)})
    return Job(recipe, seed, path, config, values)


def eval_task_names(settings: SweepSettings) -> list[str]:
    """The evaluation tasks, with every file they read checked now (a missing one fails before training)."""
    from cselab.evaluate import tasks
    from cselab.evaluate.transfer import ProbeSettings

    if settings.data_dir is None:
        raise ExperimentError("no SentEval data directory found (looked at $CSELAB_DATA and "
                              "~/.cache/cselab/senteval); pass --data-dir, run `cselab data download`, "
                              "or skip evaluation with --no-eval")
    names = tasks.resolve(settings.tasks, settings.eval_split)
    probe = ProbeSettings(settings.transfer_mode, protocol=settings.transfer_protocol)
    tasks.build(names, Path(settings.data_dir), settings.eval_split, probe)
    return names


# ---- what is done already ----------------------------------------------------------------------


def _as_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def training_state(job: Job) -> str:
    """``done`` (finished with these settings), ``resume`` (started, not finished) or ``new``.

    A run directory trained with other settings is refused: mixing it into the sweep would compare
    something else than asked for.
    """
    from cselab.train.checkpoint import config_differences, describe_differences

    saved = read_json(job.path / RUN_CONFIG)
    if saved is None:
        return "new"
    current = _as_json(job.config.to_dict())
    differing = config_differences(saved, current)
    if differing:
        changed = describe_differences(saved, current, differing)
        raise ExperimentError(f"{job.path}: was trained with a different {changed}; use another --out, "
                              f"the same --set options as before, or delete that directory")
    summary = read_json(job.path / SUMMARY) or {}
    return "done" if summary.get("finished") else "resume"


def model_fingerprint(path: Path) -> str:
    """The saved model's identity: its weight files (name, size, mtime) and the best-model marker.

    Only the model's own files count: the run directory also holds files that change after
    training (versions.json, eval-*.json, checkpoints) without changing the model.
    """
    import hashlib

    weights = [f for f in files_outside_checkpoints(path) if f.name.endswith(".safetensors")]
    entries = [[str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns] for f in sorted(weights)]
    marker = path / BEST_MODEL
    entries.append(marker.read_text(encoding="utf-8") if marker.is_file() else None)
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def eval_identity(job: Job, settings: SweepSettings, names: list[str]) -> dict:
    """What an evaluation result depends on; a stored result with another identity is redone."""
    return {"weights": model_fingerprint(job.path), "tasks": names, "split": settings.eval_split,
            "transfer_mode": settings.transfer_mode, "transfer_protocol": settings.transfer_protocol,
            "data_dir": str(Path(settings.data_dir).resolve())}


def stored_evaluation(job: Job, settings: SweepSettings, names: list[str]) -> tuple[dict | None, list[str]]:
    """The stored result, if it was made for these weights, split, probe mode and data (whatever
    its tasks), and the tasks of ``names`` it lacks: all of them when there is none to build on."""
    stored = read_json(job.path / eval_file(settings.eval_split)) or {}
    identity = {k: v for k, v in (stored.get("sweep") or {}).items() if k != "tasks"}
    wanted = {k: v for k, v in _as_json(eval_identity(job, settings, [])).items() if k != "tasks"}
    if identity != wanted:
        return None, names
    return stored, [n for n in names if n not in stored["tasks"]]


def evaluation_done(job: Job, settings: SweepSettings, names: list[str]) -> bool:
    return not stored_evaluation(job, settings, names)[1]


def record_versions(path: Path, stage: str) -> None:
    """versions.json keeps the libraries of the last time each stage did work; older differing ones in history."""
    versions = read_json(path / VERSIONS) or {}
    now = library_versions()
    previous = versions.get(stage)
    if previous and {k: v for k, v in previous.items() if k != "date"} != {k: v for k, v in now.items() if k != "date"}:
        versions.setdefault("history", []).append({"stage": stage, **previous})
    versions[stage] = now
    write_json(path / VERSIONS, versions)


# ---- the base model's STS-B dev, once per base model ----------------------------------------------


def base_weights_fingerprint(name_or_path: str) -> str | None:
    """The starting encoder's identity: a local model's files (evaluate's weights_fingerprint: name, size,
    mtime), or a cached Hub model's commit; None when it cannot be told before it is loaded."""
    from cselab.evaluate.models import weights_fingerprint
    from cselab.sources import hub_cache_commit, resolve_model_path

    try:
        path = Path(resolve_model_path(name_or_path))
    except (RuntimeError, OSError):
        return None
    if not path.is_dir():
        commit = hub_cache_commit(name_or_path)
        return None if commit is None else f"{name_or_path}@{commit}"
    return weights_fingerprint(path)


def base_model_key(config) -> str | None:
    """What the STS-B dev of a run's starting encoder depends on, hashed: its weights, the model section
    (pooler, length, ...) and the dev file. None where runs cannot share it: a randomly initialised encoder
    (its weights follow the seed), no dev data, or weights that cannot be identified."""
    import hashlib

    from cselab.evaluate.dev import STSB_DEV, find_senteval_dir

    if config.model.from_config or config.train.eval_steps <= 0:
        return None
    weights = base_weights_fingerprint(config.model.name_or_path)
    dev_dir = find_senteval_dir(config.data.dev_dir)
    if weights is None or dev_dir is None:
        return None
    dev_file = (Path(dev_dir) / STSB_DEV).resolve()
    identity = {"weights": weights, "model": _as_json(config.to_dict())["model"],
                "dev": [str(dev_file), dev_file.stat().st_size, dev_file.stat().st_mtime_ns]}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


class BaseDevCache:
    """OUT/base-stsb-dev.json: per base-model key and training precision, the score one run measured
    before step 1; later runs from the same encoder in the same settings reuse it instead of re-scoring."""

    def __init__(self, out: Path):
        self.path = Path(out) / BASE_DEV_FILE
        self.entries = read_json(self.path) or {}
        self.keys: dict[str, str | None] = {}  # job name -> base_model_key (it fingerprints the weights)

    def key(self, job: Job) -> str | None:
        if job.name not in self.keys:
            self.keys[job.name] = base_model_key(job.config)
        return self.keys[job.name]

    def known(self, job: Job) -> dict[str, dict[str, float]] | None:
        """train()'s ``base_dev``: {precision: {"stsb_dev": score}} for the job's base model, or None."""
        key = self.key(job)
        entry = self.entries.get(key) if key else None
        return {precision: {"stsb_dev": item["score"]} for precision, item in entry.items()} if entry else None

    def remember(self, job: Job, summary: dict | None) -> None:
        from cselab.experiments.dev_figures import training_precision

        score, precision = (summary or {}).get("base_stsb_dev"), training_precision(summary)
        key = self.key(job) if score is not None and precision else None
        if key is None or precision in self.entries.get(key, {}):
            return
        self.entries.setdefault(key, {})[precision] = {"score": score, "measured_by": job.name,
                                                       "model": job.config.model.name_or_path}
        write_json(self.path, self.entries)


# ---- checkpoints and disk ----------------------------------------------------------------------


def disk_usage(root: Path) -> tuple[int, int]:
    """(bytes under ``root``, bytes of it only in checkpoints/ folders), each hard-linked file once: a
    checkpoint's encoder weights are often a link to the saved model."""
    seen: set[tuple[int, int]] = set()
    total = checkpoints = 0
    walk = [(folder, files) for folder, _, files in os.walk(root)]
    # files outside checkpoints first, so a weight file linked into a checkpoint counts as the model's
    walk.sort(key=lambda item: CHECKPOINTS in Path(item[0]).relative_to(root).parts)
    for folder, files in walk:
        in_checkpoints = CHECKPOINTS in Path(folder).relative_to(root).parts
        for name in files:
            try:
                info = os.lstat(Path(folder) / name)
            except FileNotFoundError:
                continue
            if (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_size
            checkpoints += info.st_size if in_checkpoints else 0
    return total, checkpoints


def drop_checkpoints(path: Path, keep: str) -> None:
    """A finished run's checkpoints: ``all`` stay, ``last`` keeps the newest (the state at the end of
    training), ``none`` removes them. A finished run needs none of them: its model is saved beside them."""
    from cselab.train.checkpoint import list_checkpoints

    folder = path / CHECKPOINTS
    if keep == "all" or not folder.is_dir():
        return
    if keep == "none":
        shutil.rmtree(folder)
        return
    for old in list_checkpoints(folder)[:-1]:  # oldest first
        shutil.rmtree(old)


# ---- doing it ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    job: Job
    training: str  # trained | resumed | skipped | pruned
    evaluation: str  # evaluated | skipped | off | not trained
    summary: dict | None = None


class SweepStopped(Exception):
    """Training stopped on a signal; the checkpoint is saved and the same command resumes."""


def default_trainer(config, progress: bool, **hooks) -> dict:
    """The training loop; ``hooks``: train()'s ``base_dev`` and ``on_evaluation``."""
    from cselab.train.loop import train

    return train(config, resume=True, progress=progress, **hooks)


def default_evaluator(job: Job, settings: SweepSettings, names: list[str]) -> dict:
    from cselab.evaluate.models import load_model
    from cselab.evaluate.runner import evaluate

    model = load_model(str(job.path))
    model.show_progress = settings.progress
    return evaluate(model, settings.data_dir, names, split=settings.eval_split, transfer_mode=settings.transfer_mode,
                    cache_dir=None, progress=settings.progress, transfer_protocol=settings.transfer_protocol)


def run_job(job: Job, settings: SweepSettings, names: list[str] | None,
            trainer: Callable = default_trainer, evaluator: Callable = default_evaluator,
            base_dev: BaseDevCache | None = None, on_evaluation: Callable | None = None) -> Outcome:
    """Train (or resume) and evaluate one run. ``on_evaluation``: train()'s hook (a search's pruner); a run
    it ends is ``pruned``, not evaluated."""
    state = training_state(job)
    summary = read_json(job.path / SUMMARY)
    if state == "done":
        training = "skipped"
    else:
        job.path.mkdir(parents=True, exist_ok=True)
        record_versions(job.path, "train")
        hooks = {"base_dev": base_dev.known(job) if base_dev else None}
        if on_evaluation is not None:
            hooks["on_evaluation"] = on_evaluation
        summary = trainer(job.config, settings.progress, **hooks)
        if not summary.get("finished") and getattr(on_evaluation, "pruned_at", None) is not None:
            return Outcome(job, "pruned", "not evaluated (pruned)", summary)
        if not summary.get("finished"):
            raise SweepStopped(f"{job.name}: training stopped at step "
                               f"{summary.get('steps')}/{summary.get('total_steps')}; "
                               f"checkpoint saved in {job.path}; run the same command again to resume")
        training = "resumed" if state == "resume" else "trained"
    if base_dev is not None:
        base_dev.remember(job, summary)
    if names is None:
        return Outcome(job, training, "off", summary)
    # A study that adds a task later evaluates only that task; the stored ones are kept.
    stored, todo = stored_evaluation(job, settings, names)
    if not todo:
        return Outcome(job, training, "skipped", summary)
    record_versions(job.path, "eval")
    result = evaluator(job, settings, todo)
    if stored is not None:
        from cselab.evaluate.runner import merge

        result = merge(stored, result)
    result["run"] = {"recipe": recipe_label(job.recipe), "seed": job.seed, "path": str(job.path)}
    result["sweep"] = eval_identity(job, settings, list(result["tasks"]))
    write_json(job.path / eval_file(settings.eval_split), result)
    return Outcome(job, training, "evaluated", summary)


TRAINING_TEXT = {"trained": "trained", "resumed": "resumed and finished training", "skipped": "already trained"}
EVALUATION_TEXT = {"evaluated": "evaluated", "skipped": "already evaluated", "off": "not evaluated (--no-eval)"}


def describe(outcome: Outcome) -> str:
    """One status line, e.g. ``simcse seed 1: trained, best STS-B dev 80.12 in training (fp32) at step 25;
    evaluated``."""
    s = outcome.summary or {}
    text = f"{outcome.job.name}: {TRAINING_TEXT.get(outcome.training, outcome.training)}"
    if s.get("best_stsb_dev") is not None:
        # the in-training (selection) score, in the training precision; the evaluation re-scores in its own
        from cselab.experiments.dev_figures import training_precision

        precision = training_precision(s) or "precision not recorded"
        text += f", best STS-B dev {s['best_stsb_dev']:.2f} in training ({precision}) at step {s.get('best_step')}"
    return f"{text}; {EVALUATION_TEXT.get(outcome.evaluation, outcome.evaluation)}"


def aggregate(settings: SweepSettings, outcomes: list[Outcome], seconds: float) -> dict:
    """sweep.json: every run in OUT (also those of earlier invocations), its status and headline numbers,
    mean/std over seeds per recipe, and what this invocation was asked and did."""
    from cselab.experiments.runs import find_runs
    from cselab.experiments.stats import build_tables

    out = Path(settings.out)
    runs = find_runs([out]) if run_directories(out) else []
    split = settings.eval_split if settings.evaluate else None
    tables = build_tables(runs, split, baseline=None) if split else []
    entries = []
    for run in runs:
        result = run.evals.get(split) if split else None
        entries.append({"recipe": run.recipe, "seed": run.seed, "path": str(run.path), "finished": run.finished,
                        "steps": (run.summary or {}).get("steps"),
                        "best_stsb_dev": (run.summary or {}).get("best_stsb_dev"),
                        "eval": None if result is None else {
                            "avg": result.get("avg"), "transfer_avg": result.get("transfer_avg"),
                            "tasks": {name: task.get("score", task) for name, task in result["tasks"].items()}}})
    invocation = {"recipes": [recipe_label(r) for r in settings.recipes], "recipe_sources": settings.recipes,
                  "seeds": settings.seeds, "overrides": settings.overrides, "grid": dict(settings.grid),
                  "evaluate": settings.evaluate,
                  "tasks": settings.tasks if settings.evaluate else None,
                  "data_dir": str(settings.data_dir) if settings.data_dir else None,
                  "transfer_mode": settings.transfer_mode, "transfer_protocol": settings.transfer_protocol,
                  "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "seconds": round(seconds, 1),
                  "did": {o.job.name: {"training": o.training, "evaluation": o.evaluation} for o in outcomes}}
    total, checkpoints = disk_usage(out) if out.is_dir() else (0, 0)
    return {"out": str(out), "eval_split": split, "last_invocation": invocation, "runs": entries,
            "aggregate": {t.name: t.to_dict() for t in tables},
            "disk": {"bytes": total, "checkpoint_bytes": checkpoints, "keep_checkpoints": settings.keep_checkpoints}}


def run_sweep(settings: SweepSettings, trainer: Callable = default_trainer,
              evaluator: Callable = default_evaluator, echo: Callable[[str], None] | None = None) -> dict:
    """Train and evaluate every job not done yet; writes and returns sweep.json's content."""
    started = time.time()
    jobs = plan(settings)
    names = eval_task_names(settings) if settings.evaluate else None
    Path(settings.out).mkdir(parents=True, exist_ok=True)
    from tqdm.auto import tqdm

    bar = tqdm(jobs, desc="sweep", unit="run", disable=not settings.progress)
    say = echo or (lambda text: tqdm.write(text) if settings.progress else None)
    outcomes = []
    base_dev = BaseDevCache(settings.out)
    try:
        for job in bar:
            bar.set_postfix_str(job.name)
            outcomes.append(run_job(job, settings, names, trainer, evaluator, base_dev))
            drop_checkpoints(job.path, settings.keep_checkpoints)  # the job finished: run_job raises otherwise
            say(describe(outcomes[-1]))
            gc.collect()  # one model at a time: free the last run's before building the next
    finally:
        bar.close()
        data = aggregate(settings, outcomes, time.time() - started)
        write_json(Path(settings.out) / SWEEP_FILE, data)
    return data


def plan_status(settings: SweepSettings) -> list[tuple[Job, str, str]]:
    """(job, training state, evaluation state) without running anything (``--dry-run``)."""
    names = eval_task_names(settings) if settings.evaluate else None
    rows = []
    for job in plan(settings):
        state = training_state(job)
        if names is None:
            evaluation = "not evaluated (--no-eval)"
        elif state == "done":
            evaluation = "evaluated" if evaluation_done(job, settings, names) else "to evaluate"
        else:
            evaluation = "to evaluate after training"
        rows.append((job, {"done": "trained", "resume": "to resume", "new": "to train"}[state], evaluation))
    return rows
