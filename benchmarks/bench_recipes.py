"""One-epoch STS-B dev Spearman of every shipped recipe against SimCSE (MiniLM base).

    python benchmarks/bench_recipes.py                                # all recipes, seeds 42,43,44 (hours)
    python benchmarks/bench_recipes.py --recipes simcse,focal,sda-pi --seeds 42,43
    python benchmarks/bench_recipes.py --max-steps 20 --seeds 42 --recipes simcse,focal   # smoke test

Each (recipe, seed) trains on ../shared/data/corpus/wiki1m-first-11913.txt from all-MiniLM-L6-v2
(``minilm``), one epoch with the recipe's own settings, evaluating on the STS-B dev split
(../shared/data/senteval-dev) as the recipe says and at the end; the score is the best dev Spearman
(SimCSE's protocol: keep the best checkpoint). Runs are resumable: a run directory whose
summary.json says ``finished`` is read, not retrained; an interrupted run resumes from its
checkpoint. Results: benchmarks/results/recipes_minilm.{json,md} (mean, std over seeds, training
time). ``mlm-pretrain`` starts from a randomly initialised encoder (its purpose), so its score is
that of a raw model after one epoch, not a fine-tuned MiniLM. Recipes whose augmenters are not
available here are reported as skipped with the reason.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS_NAME = "corpus/wiki1m-first-11913.txt"
DEV_NAME = "senteval-dev"
BASELINE = "simcse"


def shipped_recipes() -> list[str]:
    from cselab.config import list_recipes

    names = list_recipes()
    return [BASELINE] + [n for n in names if n != BASELINE]


def run_dir(root: Path, recipe: str, seed: int, max_steps: int | None) -> Path:
    # Smoke runs (--max-steps) never share a directory with full runs.
    return root / recipe / (f"seed{seed}" + (f"-steps{max_steps}" if max_steps else ""))


def run_one(recipe: str, seed: int, shared: Path, out: Path, max_steps: int | None, extra: list[str]) -> dict:
    """Train one (recipe, seed) unless its finished summary exists; returns the summary."""
    summary_file = out / "summary.json"
    if summary_file.is_file():
        summary = json.loads(summary_file.read_text())
        if summary.get("finished"):
            summary["reused"] = True
            return summary
    from cselab.config import load_config
    from cselab.train.loop import train

    overrides = [f"data.corpus={shared / CORPUS_NAME}", f"data.dev_dir={shared / DEV_NAME}", "data.max_sentences=null",
                 "model.name_or_path=minilm", f"train.seed={seed}", f"train.output_dir={out}", "optim.epochs=1",
                 *extra]
    if max_steps:
        overrides.append(f"optim.max_steps={max_steps}")
    config = load_config(recipe, overrides)
    return train(config, progress=True)


def aggregate(recipe: str, summaries: list[dict]) -> dict:
    scores = [s["best_stsb_dev"] for s in summaries if s.get("best_stsb_dev") is not None]
    seconds = [s["train_seconds"] for s in summaries if s.get("train_seconds") is not None]
    return {
        "recipe": recipe,
        "runs": len(summaries),
        "stsb_dev_mean": statistics.fmean(scores) if scores else None,
        "stsb_dev_std": statistics.stdev(scores) if len(scores) > 1 else 0.0 if scores else None,
        "stsb_dev_per_seed": scores,
        "train_seconds_mean": statistics.fmean(seconds) if seconds else None,
        "wall_seconds_mean": statistics.fmean(s["wall_seconds"] for s in summaries) if summaries else None,
        "sentences_per_second_mean": statistics.fmean(s["sentences_per_second"] for s in summaries
                                                      if s.get("sentences_per_second")) if summaries else None,
        "steps": summaries[0]["total_steps"] if summaries else None,
        "load_average_1min_after": os.getloadavg()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--recipes", help="comma-separated recipe names (default: every shipped recipe)")
    parser.add_argument("--seeds", default="42,43,44", help="comma-separated seeds")
    parser.add_argument("--max-steps", type=int, help="stop each run after this many steps (smoke test)")
    parser.add_argument("--runs-dir", default="outputs/bench_recipes", help="where the runs (checkpoints, models) go")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="extra override for every run, e.g. train.precision=fp32")
    parser.add_argument("--name", default="recipes_minilm", help="results file name (benchmarks/results/NAME.*)")
    args = parser.parse_args(argv)

    shared = require_shared()
    recipes = args.recipes.split(",") if args.recipes else shipped_recipes()
    if BASELINE not in recipes:
        recipes.insert(0, BASELINE)
    seeds = [int(s) for s in args.seeds.split(",")]
    root = Path(args.runs_dir)
    from tqdm.auto import tqdm

    from cselab.config import ConfigError

    results, skipped = [], {}
    started = time.time()
    bar = tqdm(total=len(recipes) * len(seeds), desc="recipes x seeds", unit="run", position=0)
    for recipe in recipes:
        summaries = []
        for seed in seeds:
            bar.set_postfix(recipe=recipe, seed=seed)
            try:
                summaries.append(run_one(recipe, seed, shared, run_dir(root, recipe, seed, args.max_steps),
                                         args.max_steps, args.overrides))
            except (ConfigError, ImportError, RuntimeError) as exc:
                # An augmenter that cannot run here (e.g. no translation model): report, do not hide.
                skipped[recipe] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                bar.update(len(seeds) - len(summaries))
                break
            bar.update(1)
        if recipe not in skipped:
            results.append(aggregate(recipe, summaries))
    bar.close()

    baseline = next((r for r in results if r["recipe"] == BASELINE), None)
    rows = []
    for r in results:
        delta = None
        if baseline and r["stsb_dev_mean"] is not None and baseline["stsb_dev_mean"] is not None:
            delta = r["stsb_dev_mean"] - baseline["stsb_dev_mean"]
        r["delta_vs_simcse"] = delta
        rows.append([r["recipe"], r["runs"], r["steps"], r["stsb_dev_mean"], r["stsb_dev_std"],
                     "-" if delta is None else f"{delta:+.2f}", r["train_seconds_mean"], r["sentences_per_second_mean"]])
    for recipe, reason in skipped.items():
        rows.append([recipe, 0, "-", "-", "-", "-", "-", f"skipped: {reason[:80]}"])
    smoke = f" (SMOKE TEST: {args.max_steps} steps per run, not one epoch)" if args.max_steps else ""
    notes = (f"Base all-MiniLM-L6-v2, corpus {CORPUS_NAME}, one epoch per run{smoke}; seeds {seeds}. "
             "Score: best STS-B dev Spearman x 100 over the run's evaluations. Training seconds are the "
             "loop's model compute (forward, backward, step) on a shared machine: see the load average.")
    write_results(args.name, {"recipes": results, "skipped": skipped, "seeds": seeds, "max_steps": args.max_steps,
                              "corpus": CORPUS_NAME, "base_model": "minilm (all-MiniLM-L6-v2)",
                              "overrides": args.overrides, "wall_seconds": round(time.time() - started, 1)},
                  f"Recipes on MiniLM: STS-B dev{smoke}",
                  ["recipe", "seeds", "steps", "STS-B dev mean", "std", "vs simcse", "train s", "sent/s"], rows, notes)
    print(f"wrote benchmarks/results/{args.name}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
