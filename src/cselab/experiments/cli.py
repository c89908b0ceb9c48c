"""``cselab sweep`` and ``cselab report`` (registered into the main CLI by ``register``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cselab.errors import counted
from cselab.experiments.search import SEARCH_METRICS
from cselab.experiments.sweep import KEEP_CHECKPOINTS


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="train and evaluate recipes x seeds (resumable)",
                       description="Train every recipe with every seed into OUT/<recipe>/seed-<seed>/, evaluate "
                                   "each run, and aggregate mean and std over seeds into OUT/sweep.json. Running "
                                   "the same command again skips what is done and resumes what was interrupted.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--recipes", required=True,
                   help="comma-separated recipe names (see `cselab recipes`) or YAML paths; all = every shipped recipe")
    p.add_argument("--seeds", help="comma-separated seeds (default 42,0,1; with --search one seed, default 42)")
    p.add_argument("--out", default="outputs/sweep", help="sweep directory")
    p.add_argument("--corpus", help="training text for every run (same as --set data.corpus=...)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe key in every run, e.g. --set optim.max_steps=500 (repeatable)")
    p.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="train every value of a recipe key (repeatable; the grid is crossed with the recipes and "
                        "seeds; each point goes to OUT/<recipe>/KEY=V/seed-<seed>/), e.g. --grid optim.lr=1e-5,3e-5")
    p.add_argument("--search", type=int, metavar="N",
                   help="instead of a grid, an Optuna search of N trials per recipe over the --space keys, pruning "
                        "on the in-training dev score; the study (OUT/search.db) resumes when run again")
    p.add_argument("--space", action="append", default=[], metavar="KEY=LOW:HIGH[:log]",
                   help="a key the search draws (repeatable), e.g. --space optim.lr=1e-5:1e-4:log; integer bounds "
                        "draw integers")
    p.add_argument("--metric", choices=SEARCH_METRICS, default="stsb_dev",
                   help="what the search optimises: the in-training STS-B dev score (higher is better), or the "
                        "validation MLM loss of a pre-training recipe (lower is better)")
    p.add_argument("--keep-checkpoints", choices=KEEP_CHECKPOINTS, default="all",
                   help="checkpoints of finished runs: all = as training left them (train.keep_checkpoints), "
                        "last = only the final one, none = removed (their models stay)")
    p.add_argument("--eval-split", choices=["dev", "test"], default="dev",
                   help="dev: STS-B dev, SICK trial, SST-2 dev, MRPC train CV; test: the papers' test sets")
    p.add_argument("--tasks", default="all", help="evaluation tasks: sts, transfer, align, all, or task names")
    p.add_argument("--data-dir", help="SentEval data directory (default: $CSELAB_DATA, then "
                                      "~/.cache/cselab/senteval); also the STS-B dev of training")
    p.add_argument("--transfer-mode", choices=["test", "fast"],
                   help="transfer probes: fast = fewer folds and C values, SST-2 trained on 10,000 phrases (about "
                        "4x faster on a CPU); test = SentEval's protocol, for the numbers you report (default: fast, "
                        "or the mode OUT's earlier invocations used, so its stored evaluations stay valid)")
    p.add_argument("--transfer-protocol", choices=["sklearn", "senteval"], default="sklearn",
                   help="transfer classifier: sklearn = scikit-learn logistic regression (fast), senteval = "
                        "SentEval's PyTorch logistic regression with its settings (what the papers report)")
    p.add_argument("--no-eval", action="store_true", help="train only")
    p.add_argument("--dry-run", action="store_true", help="show what would be trained and evaluated, then exit")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run_sweep)


def sweep_settings(args):
    from cselab.evaluate.dev import find_senteval_dir
    from cselab.experiments.sweep import SweepSettings, parse_grid, parse_recipes, parse_seeds

    overrides = list(args.overrides) + ([f"data.corpus={args.corpus}"] if args.corpus else [])
    data_dir = None
    if args.data_dir:
        data_dir = Path(args.data_dir).expanduser()
        if not data_dir.is_dir():
            raise FileNotFoundError(f"{data_dir}: data directory not found")
    elif not args.no_eval:
        data_dir = find_senteval_dir(None)
    seeds = args.seeds or ("42" if args.search is not None else "42,0,1")
    transfer_mode = args.transfer_mode or default_transfer_mode(Path(args.out))
    return SweepSettings(recipes=parse_recipes(args.recipes), seeds=parse_seeds(seeds), out=Path(args.out),
                         overrides=overrides, evaluate=not args.no_eval, eval_split=args.eval_split, tasks=args.tasks,
                         data_dir=data_dir, transfer_mode=transfer_mode,
                         transfer_protocol=args.transfer_protocol, progress=not args.quiet,
                         grid=parse_grid(args.grid, overrides), keep_checkpoints=args.keep_checkpoints)


DEFAULT_TRANSFER_MODE = "fast"  # a sweep compares runs: on a CPU SST-2 alone takes minutes per run in test mode


def default_transfer_mode(out: Path) -> str:
    """The probes' mode when --transfer-mode is not given: the one ``out``'s last invocation used (its
    sweep.json), so a study started before keeps its evaluations; else fast."""
    from cselab.experiments.runs import read_json
    from cselab.run_files import SWEEP_FILE

    earlier = ((read_json(out / SWEEP_FILE) or {}).get("last_invocation") or {}).get("transfer_mode")
    return earlier if earlier in ("test", "fast") else DEFAULT_TRANSFER_MODE


def _run_sweep(args) -> int:
    from cselab.experiments.sweep import SweepStopped, plan_status, run_sweep
    from cselab.run_files import SWEEP_FILE

    settings = sweep_settings(args)
    if args.search is not None or args.space:
        return _run_search(args, settings)
    if args.dry_run:
        for job, training, evaluation in plan_status(settings):
            print(f"{job.name:36s} {training:10s} {evaluation:27s} {job.path}")
        return 0
    try:
        data = run_sweep(settings)
    except SweepStopped as exc:
        print(f"cselab sweep: {exc}", file=sys.stderr)
        return 3
    done = sum(1 for r in data["runs"] if r["finished"])
    print(f"{done}/{counted(len(data['runs']), 'run')} finished; aggregate -> {Path(args.out) / SWEEP_FILE}; "
          f"report: cselab report {args.out}")
    print(disk_sentence(data["disk"], args.out))
    return 0


def _run_search(args, settings) -> int:
    from cselab.experiments import ExperimentError
    from cselab.experiments.search import SEARCH_FILE, parse_space, run_search
    from cselab.experiments.sweep import SweepStopped

    if args.search is None:
        raise ExperimentError("--space is for a search: add --search N (the number of trials)")
    if settings.grid:
        raise ExperimentError("--grid and --search: use one (a grid trains every point, a search draws N)")
    if args.dry_run:
        raise ExperimentError("--dry-run lists a sweep's runs; a search draws its trials as it goes "
                              f"(see {Path(args.out) / SEARCH_FILE} for the trials so far)")
    space = parse_space(args.space, settings.overrides)
    try:
        data = run_search(settings, args.search, space, args.metric)
    except SweepStopped as exc:
        print(f"cselab sweep: {exc}", file=sys.stderr)
        return 3
    for name, study in data["studies"].items():
        best = study["best"]
        found = "no complete trial" if best is None else (
            f"best {args.metric} {best['value']:.4g} (trial {best['number']}: "
            + ", ".join(f"{k}={v:.4g}" for k, v in best["params"].items()) + f") in {best['path']}")
        done = [t["state"] for t in study["trials"] if t["state"] in ("complete", "pruned")]
        print(f"{name}: {counted(len(done), 'trial')} ({done.count('pruned')} pruned), {found}")
    print(f"trials -> {Path(args.out) / SEARCH_FILE}; report: cselab report {args.out}")
    print(disk_sentence(data["disk"], args.out))
    return 0


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def disk_sentence(disk: dict, out: str) -> str:
    """How much the sweep directory keeps, and how to keep less."""
    text = f"{out} holds {_megabytes(disk['bytes'])}"
    if disk["checkpoint_bytes"]:
        text += f", {_megabytes(disk['checkpoint_bytes'])} of it in checkpoints"
        if disk["keep_checkpoints"] != "none":
            text += " (--keep-checkpoints none removes those of finished runs; their models stay)"
    return text + "."


def _add_report(sub) -> None:
    p = sub.add_parser("report", help="tables, paired tests and plots over runs (Markdown + HTML)",
                       description="Compare runs (or whole sweep directories): the papers' tables with mean and "
                                   "std over seeds, a paired t-test against a baseline recipe, training curves, "
                                   "alignment vs uniformity, per-task bars, and every run's configuration and "
                                   "library versions. Writes report.md, report.html (self-contained) and report.json "
                                   "(--name: other names).",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run directories or directories holding them (a sweep's --out)")
    p.add_argument("--out", help="report directory (default: RUN_DIR/report for one directory, else ./report)")
    p.add_argument("--baseline", default="simcse", help="recipe the paired tests compare against ('' for none)")
    p.add_argument("--split", choices=["auto", "dev", "test"], default="auto",
                   help="which evaluation to tabulate; auto = test if every evaluated run has it, else dev")
    p.add_argument("--title", default="cselab experiment report")
    p.add_argument("--name", default="report", type=_report_name,
                   help="file names in --out: NAME.md, NAME.html, NAME.json and the plots in NAME-plots/ "
                        "(report: plots/)")
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write every run's metrics.jsonl as TensorBoard event files under DIR "
                        "(needs the tensorboard package)")
    p.set_defaults(func=_run_report)


def _report_name(text: str) -> str:
    """A file name without a folder or an extension (argparse prints the error in one line)."""
    if not text or text != Path(text).name or text.startswith(".") or Path(text).suffix:
        raise argparse.ArgumentTypeError(f"{text!r}: a file name without a folder or an extension, e.g. my_study")
    return text


def _run_report(args) -> int:
    from cselab.experiments.report import write_report
    from cselab.experiments.runs import find_runs

    if args.out:
        out = Path(args.out)
    elif len(args.runs) == 1 and Path(args.runs[0]).is_dir():
        out = Path(args.runs[0]) / "report"
    else:
        out = Path("report")
    if args.tensorboard:
        from cselab.experiments.tensorboard import summary_writer_class

        summary_writer_class()  # fail before writing anything when tensorboard is missing
    written = write_report(args.runs, out, baseline=args.baseline or None, split=args.split, title=args.title,
                           name=args.name)
    for path in written.values():
        print(f"wrote {path}")
    if args.tensorboard:
        from cselab.experiments.tensorboard import write_events

        counts = write_events(find_runs(args.runs), args.tensorboard)
        print(f"TensorBoard: {counted(sum(counts.values()), 'scalar')} of {counted(len(counts), 'run')} "
              f"-> {args.tensorboard} "
              f"(tensorboard --logdir {args.tensorboard})")
    return 0


def register(subparsers) -> None:
    _add_sweep(subparsers)
    _add_report(subparsers)
