"""``cselab sweep --search N --space KEY=LOW:HIGH[:log]``: hyper-parameter search with Optuna.

One Optuna study per recipe, stored in ``OUT/search.db`` (Optuna's RDB storage on SQLite), so running the
same command again continues the study up to N finished trials. Each trial is a run directory named by
its values, ``OUT/<recipe>/<KEY=VALUE,...>/seed-<seed>/``, trained by the same loop as a sweep's runs and
therefore resumable: a trial cut short (Ctrl-C, a crash) is marked failed in the study and its values are
queued again, so the next invocation resumes it from its checkpoint. Every in-training evaluation reports
the dev score to the trial; Optuna's MedianPruner ends a trial whose score falls below the median of the
earlier trials at the same step (never during the first PRUNE_AFTER trials). A finished trial's value is
its best score (the model training kept); it is then evaluated like a sweep's run.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cselab.experiments import ExperimentError
from cselab.experiments.runs import read_metrics, recipe_label, write_json
from cselab.experiments.sweep import (
    BaseDevCache,
    Job,
    SweepSettings,
    aggregate,
    check_varied_key,
    default_evaluator,
    default_trainer,
    describe,
    drop_checkpoints,
    eval_task_names,
    point_job,
    run_job,
    run_overrides,
)
from cselab.run_files import METRICS, SWEEP_FILE

STUDY_FILE = "search.db"
SEARCH_FILE = "search.json"
PRUNE_AFTER = 2  # MedianPruner's n_startup_trials: the first trials set the median, none of them is pruned
# what a search may optimise: the training loop's in-training selection scores (their direction is the
# dev-metric registry's, evaluate/dev.py)
SEARCH_METRICS = ("stsb_dev", "val_mlm_loss")


def higher_is_better(metric: str) -> bool:
    from cselab.evaluate.dev import DEV_METRICS

    return DEV_METRICS.get(metric).higher_is_better


@dataclass(frozen=True)
class Dimension:
    """One searched key: a float (``log``: sampled uniformly in log space) or, when both bounds are integers,
    an int."""

    key: str
    low: float
    high: float
    log: bool = False
    integer: bool = False


def _bound(text: str, spec: str) -> tuple[float, bool]:
    try:
        return (int(text), True) if text.strip().lstrip("-").isdigit() else (float(text), False)
    except ValueError:
        raise ExperimentError(f"--space {spec!r}: {text!r} is not a number") from None


def parse_space(specs: list[str], fixed: list[str] = ()) -> list[Dimension]:
    """``--space KEY=LOW:HIGH[:log]`` options; keys also given with --set (``fixed``) are refused."""
    space: list[Dimension] = []
    for spec in specs:
        key, sep, bounds = spec.partition("=")
        key, parts = key.strip(), bounds.split(":")
        if not sep or not key or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
            raise ExperimentError(f"--space {spec!r}: expected KEY=LOW:HIGH or KEY=LOW:HIGH:log "
                                  "(e.g. --space optim.lr=1e-5:1e-4:log)")
        (low, low_int), (high, high_int) = _bound(parts[0], spec), _bound(parts[1], spec)
        log = len(parts) == 3
        if not low < high:
            raise ExperimentError(f"--space {key}: LOW must be below HIGH ({parts[0]} >= {parts[1]})")
        if log and low <= 0:
            raise ExperimentError(f"--space {key}: a log scale needs LOW > 0 (got {parts[0]})")
        check_varied_key("--space", key, {d.key for d in space}, fixed)
        space.append(Dimension(key, low, high, log, low_int and high_int))
    if not space:
        raise ExperimentError("--search needs at least one --space KEY=LOW:HIGH[:log]")
    return space


def import_optuna():
    try:
        import optuna
    except ImportError:
        raise ExperimentError("--search needs Optuna: pip install 'cselab[tune]' (or pip install optuna)") from None
    return optuna


def distributions(space: list[Dimension]) -> dict:
    from optuna.distributions import FloatDistribution, IntDistribution

    return {d.key: IntDistribution(int(d.low), int(d.high), log=d.log) if d.integer
            else FloatDistribution(d.low, d.high, log=d.log) for d in space}


def trial_job(settings: SweepSettings, recipe: str, seed: int, params: dict) -> Job:
    """A trial's run: the recipe with the sampled values (as --set) in a folder named by them, as a grid point's."""
    return point_job(settings, run_overrides(settings), recipe, seed,
                     {key: repr(value) for key, value in params.items()})


def check_metric(job: Job, metric: str) -> None:
    """The search optimises an in-training score: the run must compute one, or the search fails now."""
    from cselab.evaluate.dev import find_senteval_dir

    config = job.config
    if config.train.eval_steps <= 0:
        raise ExperimentError(f"--search: {job.name} never evaluates during training (train.eval_steps is 0), so "
                              f"there is no {metric} to optimise or prune on")
    if metric == "stsb_dev" and find_senteval_dir(config.data.dev_dir) is None:
        raise ExperimentError("--search optimises the in-training STS-B dev score, and no STS-B dev data was found "
                              "(pass --data-dir, set data.dev_dir or $CSELAB_DATA, or `cselab data download`); "
                              "a pre-training recipe can use --metric val_mlm_loss")
    if metric == "val_mlm_loss" and config.data.validation_fraction <= 0:
        raise ExperimentError("--metric val_mlm_loss needs held-out lines: --set data.validation_fraction=0.01 "
                              "(or more)")


def _low_high_jobs(settings: SweepSettings, recipe: str, seed: int, space: list[Dimension]) -> list[Job]:
    """The recipe at both corners of the space: every value the search can draw is checked before training."""
    corner = [{d.key: int(getattr(d, end)) if d.integer else float(getattr(d, end)) for d in space}
              for end in ("low", "high")]
    return [trial_job(settings, recipe, seed, params) for params in corner]


def requeue_interrupted(study) -> int:
    """Trials left running by an invocation that stopped (Ctrl-C, a crash) are marked failed and their
    values queued again: the next trial asked for gets them, and its run resumes from its checkpoint."""
    from optuna.trial import TrialState

    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in stale:
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params)
    return len(stale)


def finished_trials(study) -> list:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


class Reporter:
    """train()'s ``on_evaluation``: each in-training score goes to the trial once per step; True (prune)
    when the pruner says so. The scores of a resumed run's earlier evaluations are replayed first."""

    def __init__(self, trial, metric: str, path: Path):
        self.trial, self.metric = trial, metric
        self.steps: set[int] = set()
        self.pruned_at: int | None = None
        for record in read_metrics(path / METRICS):
            self.report(record["step"], record)

    def report(self, step: int, record: dict) -> None:
        value = record.get(self.metric)
        if isinstance(value, (int, float)) and math.isfinite(value) and step not in self.steps:
            self.trial.report(float(value), step)
            self.steps.add(step)

    def __call__(self, step: int, record: dict) -> bool:
        self.report(step, record)
        if self.metric in record and self.trial.should_prune():
            self.pruned_at = step
            return True
        return False


def trial_value(summary: dict, metric: str, job: Job) -> float:
    value = summary.get(f"best_{metric}")
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ExperimentError(f"{job.path}: the run recorded no best_{metric} in summary.json, so the trial has no "
                              f"value (is {metric} what its training selects on?)")
    return float(value)


def study_record(study, recipe: str, metric: str) -> dict:
    trials = []
    for t in study.get_trials(deepcopy=False):
        trials.append({"number": t.number, "state": t.state.name.lower(), "params": t.params, "value": t.value,
                       "pruned_at": t.last_step if t.state.name == "PRUNED" else None,
                       "path": t.user_attrs.get("path")})
    complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    best = study.best_trial if complete else None
    return {"recipe": recipe_label(recipe), "metric": metric, "direction": study.direction.name.lower(),
            "best": None if best is None else {"number": best.number, "value": best.value, "params": best.params,
                                               "path": best.user_attrs.get("path")},
            "trials": trials}


def run_search(settings: SweepSettings, trials: int, space: list[Dimension], metric: str = "stsb_dev",
               trainer: Callable = default_trainer, evaluator: Callable = default_evaluator,
               echo: Callable[[str], None] | None = None) -> dict:
    """Continue each recipe's study until it has ``trials`` finished (complete or pruned) trials; writes and
    returns OUT/search.json's content (sweep.json aggregates the trials' runs as a sweep's)."""
    optuna = import_optuna()
    if trials < 1:
        raise ExperimentError(f"--search {trials}: the number of trials must be at least 1")
    if metric not in SEARCH_METRICS:
        raise ExperimentError(f"--metric {metric}: one of {', '.join(SEARCH_METRICS)}")
    if len(settings.seeds) != 1:
        raise ExperimentError(f"--search trains each trial with one seed; got --seeds "
                              f"{','.join(map(str, settings.seeds))} (give one, then rerun the best values "
                              f"with --grid and several seeds)")
    started, seed = time.time(), settings.seeds[0]
    for recipe in settings.recipes:  # every value the search can draw, checked before anything trains
        for job in _low_high_jobs(settings, recipe, seed, space):
            check_metric(job, metric)
    names = eval_task_names(settings) if settings.evaluate else None
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the status lines below say what happened
    storage = f"sqlite:///{(out / STUDY_FILE).resolve()}"
    say = echo or print
    base_dev, outcomes, studies = BaseDevCache(out), [], {}
    try:
        for recipe in settings.recipes:
            study = optuna.create_study(
                study_name=recipe_label(recipe), storage=storage, load_if_exists=True,
                direction="maximize" if higher_is_better(metric) else "minimize",
                pruner=optuna.pruners.MedianPruner(n_startup_trials=PRUNE_AFTER, n_warmup_steps=0))
            # A sampler seeded alike in every invocation would draw the first invocation's values again.
            study.sampler = optuna.samplers.TPESampler(seed=seed + len(study.get_trials(deepcopy=False)))
            studies[recipe] = study
            if requeue_interrupted(study):
                say(f"{recipe_label(recipe)}: resuming the trial(s) an earlier invocation left unfinished")
            while len(finished_trials(study)) < trials:
                trial = study.ask(distributions(space))
                job = trial_job(settings, recipe, seed, trial.params)
                trial.set_user_attr("path", str(job.path))
                reporter = Reporter(trial, metric, job.path)
                outcome = run_job(job, settings, names, trainer, evaluator, base_dev, on_evaluation=reporter)
                number = f"{recipe_label(recipe)} trial {trial.number}"
                drop_checkpoints(job.path, settings.keep_checkpoints)  # a pruned trial is not resumed either
                if outcome.training == "pruned":
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    say(f"{number}: {job.name}: pruned at step {reporter.pruned_at} ({metric} below the median "
                        f"of the earlier trials at that step)")
                else:
                    study.tell(trial, trial_value(outcome.summary or {}, metric, job))
                    say(f"{number}: {describe(outcome)}")
                outcomes.append(outcome)
    finally:
        data = aggregate(settings, outcomes, time.time() - started)
        write_json(out / SWEEP_FILE, data)
        search = {"metric": metric, "trials": trials, "space": [d.__dict__ for d in space], "seed": seed,
                  "storage": str(out / STUDY_FILE),
                  "studies": {recipe_label(r): study_record(s, r, metric) for r, s in studies.items()}}
        write_json(out / SEARCH_FILE, search)
    return {**search, "disk": data["disk"]}
