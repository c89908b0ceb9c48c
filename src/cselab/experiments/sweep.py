"""``cselab sweep``: train and evaluate every recipe x seed, resuming where a previous sweep stopped.

Each (recipe, seed) gets ``OUT/<recipe>/seed-<seed>/``. A run whose training finished with the same
resolved settings is not trained again; one that stopped part-way is resumed by the training loop
from its last checkpoint; an evaluation is redone only when its result file is missing or was made
for other weights, split or probe mode, and tasks added since are evaluated alone and merged in.
``OUT/sweep.json`` aggregates every run in OUT (mean and standard deviation over seeds per recipe),
so a study may be run in several invocations; ``cselab report OUT`` turns them into tables and
plots.
"""
from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.experiments.runs import (
    SUMMARY,
    VERSIONS,
    eval_file,
    files_outside_checkpoints,
    read_json,
    recipe_label,
    run_directories,
    run_path,
    write_json,
)
from cselab.experiments.versions import library_versions

SWEEP_FILE = "sweep.json"


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


@dataclass
class Job:
    recipe: str
    seed: int
    path: Path
    config: object  # cselab.config.Config

    @property
    def name(self) -> str:
        return f"{recipe_label(self.recipe)} seed {self.seed}"


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


def _sets(overrides: list[str], key: str) -> bool:
    return any(o.split("=", 1)[0].strip() == key for o in overrides)


def plan(settings: SweepSettings) -> list[Job]:
    """Every run's resolved config, all checked before any training starts."""
    from cselab.config import load_config

    overrides = list(settings.overrides)
    for key in ("train.seed", "train.output_dir"):
        if _sets(overrides, key):
            raise ExperimentError(f"--set {key}: the sweep sets it (use --seeds / --out)")
    # Model selection on the same STS-B dev the evaluation reads, unless the user chose another.
    if settings.data_dir is not None and not _sets(overrides, "data.dev_dir"):
        from cselab.evaluate.dev import STSB_DEV

        if (Path(settings.data_dir) / STSB_DEV).is_file():
            overrides.append(f"data.dev_dir={settings.data_dir}")
    jobs = []
    for recipe in settings.recipes:
        for seed in settings.seeds:
            path = run_path(settings.out, recipe, seed)
            config = load_config(recipe, overrides, **{"train.seed": seed, "train.output_dir": str(path)})
            jobs.append(Job(recipe, seed, path, config))
    return jobs


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
    from cselab.train.checkpoint import config_differences

    saved = read_json(job.path / "train_config.json")
    if saved is None:
        return "new"
    differing = config_differences(saved, _as_json(job.config.to_dict()))
    if differing:
        raise ExperimentError(f"{job.path}: was trained with a different {', '.join(differing)}; use another --out, "
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
    marker = path / "best_model.json"
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


# ---- doing it ----------------------------------------------------------------------------------


@dataclass
class Outcome:
    job: Job
    training: str  # trained | resumed | skipped | stopped
    evaluation: str  # evaluated | skipped | off | not trained
    summary: dict | None = None


class SweepStopped(Exception):
    """Training stopped on a signal; the checkpoint is saved and the same command resumes."""


def default_trainer(config, progress: bool) -> dict:
    from cselab.train.loop import train

    return train(config, resume=True, progress=progress)


def default_evaluator(job: Job, settings: SweepSettings, names: list[str]) -> dict:
    from cselab.evaluate.models import load_model
    from cselab.evaluate.runner import evaluate

    model = load_model(str(job.path))
    model.show_progress = settings.progress
    return evaluate(model, settings.data_dir, names, split=settings.eval_split, transfer_mode=settings.transfer_mode,
                    cache_dir=None, progress=settings.progress, transfer_protocol=settings.transfer_protocol)


def run_job(job: Job, settings: SweepSettings, names: list[str] | None,
            trainer: Callable = default_trainer, evaluator: Callable = default_evaluator) -> Outcome:
    state = training_state(job)
    summary = read_json(job.path / SUMMARY)
    if state == "done":
        training = "skipped"
    else:
        job.path.mkdir(parents=True, exist_ok=True)
        record_versions(job.path, "train")
        summary = trainer(job.config, settings.progress)
        if not summary.get("finished"):
            raise SweepStopped(f"{job.name}: training stopped at step "
                               f"{summary.get('steps')}/{summary.get('total_steps')}; "
                               f"checkpoint saved in {job.path}; run the same command again to resume")
        training = "resumed" if state == "resume" else "trained"
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


def describe(outcome: Outcome) -> str:
    s = outcome.summary or {}
    parts = [f"{outcome.job.name}: training {outcome.training}"]
    if s.get("best_stsb_dev") is not None:
        # the in-training (selection) score, in the training precision; the evaluation re-scores in its own
        from cselab.experiments.dev_figures import training_precision

        precision = training_precision(s) or "precision not recorded"
        parts.append(f"best STS-B dev {s['best_stsb_dev']:.2f} in training ({precision}) at step {s.get('best_step')}")
    parts.append(f"evaluation {outcome.evaluation}")
    return ", ".join(parts)


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
                  "seeds": settings.seeds, "overrides": settings.overrides, "evaluate": settings.evaluate,
                  "tasks": settings.tasks if settings.evaluate else None,
                  "data_dir": str(settings.data_dir) if settings.data_dir else None,
                  "transfer_mode": settings.transfer_mode, "transfer_protocol": settings.transfer_protocol,
                  "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "seconds": round(seconds, 1),
                  "did": {o.job.name: {"training": o.training, "evaluation": o.evaluation} for o in outcomes}}
    return {"out": str(out), "eval_split": split, "last_invocation": invocation, "runs": entries,
            "aggregate": {t.name: t.to_dict() for t in tables}}


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
    try:
        for job in bar:
            bar.set_postfix_str(job.name)
            outcomes.append(run_job(job, settings, names, trainer, evaluator))
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
            evaluation = "off"
        elif state == "done":
            evaluation = "done" if evaluation_done(job, settings, names) else "to do"
        else:
            evaluation = "after training"
        rows.append((job, {"done": "done", "resume": "to resume", "new": "to train"}[state], evaluation))
    return rows
