"""Cost of a training step of a method against SimCSE's, measured in one paired run on this machine.

    python benchmarks/bench_method_cost.py [--methods diffcse] [--model minilm] [--pairs 6] [--warmup 2]
                                            [--batch-size 64]

Each method is its shipped recipe (``--methods``: recipe names, comma-separated; each is compared with
``simcse``), built as the training loop builds it (``train/setup.py: build_setup``: the same speed-ups,
token passes, heads) from the same base model, on the same corpus lines. The two kinds of step then
alternate in one process, A B, B A, ... (``--pairs`` pairs after ``--warmup`` uncounted steps of each),
each on a fresh random batch of the recipe's batch size, so both see the same machine load; a shared
machine drifts, whole-run times would mostly measure that. Each timing is what the loop does per step: the collator
(views, tokenisation, a token pass's masks), forward, the objective, backward, clipping and the AdamW
step, by the wall clock and by this process's CPU time (less disturbed by other processes on a shared
machine). Reported: the median step time of each, the median of the per-pair ratios, and the
parameters each trains.

A term that loads a model of its own (``LossTerm.models``: DiffCSE's generator, ``distilbert-base-uncased``,
not available offline) gets a stand-in of the paper's proportions: a masked language model with the base
model's vocabulary and width and half its layers (DistilBERT is BERT-base with half the layers), random
weights. The weights change which tokens are replaced, not the work a step does: the generator runs at
every position whatever it predicts.

Results: benchmarks/results/method_cost.json and .md (the machine and its load average included).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASELINE = "simcse"


def stand_in_generator(model: str, directory: Path) -> Path:
    """A masked language model with ``model``'s tokenizer and width and half its layers, random weights."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    from cselab.sources import resolve_model_path

    path = resolve_model_path(model)
    config = AutoConfig.from_pretrained(path)
    config.num_hidden_layers = max(1, config.num_hidden_layers // 2)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        AutoModelForMaskedLM.from_config(config).save_pretrained(directory)
    AutoTokenizer.from_pretrained(path).save_pretrained(directory)
    return directory


def stand_in_overrides(recipe: str, model: str, scratch: Path) -> tuple[list[str], list[str]]:
    """(--set items, notes) giving each term-loaded model of ``recipe`` its stand-in."""
    from cselab.config import load_config
    from cselab.losses import LOSSES

    overrides, notes = [], []
    for i, term in enumerate(load_config(recipe).objective):
        for key in LOSSES.get(term["name"]).models:
            directory = stand_in_generator(model, scratch / f"{recipe}-{i}-{key}")
            overrides.append(f"objective[{i}].{key}={directory}")
            notes.append(f"{recipe}: objective[{i}].{key} {term.get(key)!r} replaced by a random-weight masked "
                         f"language model with {model}'s vocabulary and width and half its layers")
    return overrides, notes


class Method:
    """One recipe, built as the training loop builds it, stepping on batches of the given sentences."""

    def __init__(self, recipe: str, overrides: list[str]):
        import torch

        from cselab.config import load_config
        from cselab.hardware import choose_precision
        from cselab.train.optimizer import OptimizerStep, gradient_scaler, make_optimizer
        from cselab.train.setup import build_setup
        from cselab.train.steps import StepForward, choose_step

        self.recipe = recipe
        config = load_config(recipe, overrides)
        device = torch.device("cpu")
        self.parts = build_setup(config, device)
        precision = choose_precision(config.train.precision, device, self.parts.encoder.hidden_size).precision
        optimizer, scheduler = make_optimizer(self.parts.trainable, config.optim, 1000)
        parameters = list(self.parts.trainable.parameters())
        self.update = OptimizerStep(optimizer, scheduler, parameters, config.optim.max_grad_norm,
                                    gradient_scaler(precision, device))
        forward = StepForward(self.parts.encoder, self.parts.head, self.parts.objective, device, precision)
        self.step = choose_step(forward, config.optim.grad_cache_chunk, self.update.scale)
        self.batch_size, self.precision = config.optim.batch_size, precision
        self.trained = sum(p.numel() for p in parameters if p.requires_grad)
        self.parts.trainable.train()
        self.taken = 0

    def timed_step(self, sentences: list[str]) -> tuple[float, float]:
        """(wall seconds, this process's CPU seconds) of one step."""
        wall, cpu = time.perf_counter(), time.process_time()
        self.step(self.parts.collator((self.taken, sentences)))
        self.update()
        self.taken += 1
        return time.perf_counter() - wall, time.process_time() - cpu


def compare(method: str, model: str, pairs: int, batch_size: int | None, scratch: Path, warmup: int = 2,
            seed: int = 0) -> dict:
    common = [f"model.name_or_path={model}", "train.eval_steps=0", "train.save_steps=0",
              f"train.output_dir={scratch / 'unused'}"]
    if batch_size:
        common.append(f"optim.batch_size={batch_size}")
    extra, notes = stand_in_overrides(method, model, scratch)
    baseline, other = Method(BASELINE, common), Method(method, common + extra)
    if baseline.batch_size != other.batch_size:
        raise SystemExit(f"{method} has batch {other.batch_size}, {BASELINE} {baseline.batch_size}: pass --batch-size")
    corpus = list(baseline.parts.corpus)
    rng = random.Random(seed)
    for _ in range(warmup):  # not counted: first-step allocations, lazy initialisation
        for side in (baseline, other):
            side.timed_step(rng.sample(corpus, side.batch_size))
    wall: dict[str, list[float]] = {BASELINE: [], method: []}
    cpu: dict[str, list[float]] = {BASELINE: [], method: []}
    load_before = os.getloadavg()[0]
    for pair in range(pairs):
        for side in ((baseline, other) if pair % 2 == 0 else (other, baseline)):
            seconds, cpu_seconds = side.timed_step(rng.sample(corpus, side.batch_size))
            wall[side.recipe].append(seconds)
            cpu[side.recipe].append(cpu_seconds)
        print(f"  pair {pair + 1}/{pairs}: {BASELINE} {wall[BASELINE][-1]:.2f} s ({cpu[BASELINE][-1]:.2f} s CPU), "
              f"{method} {wall[method][-1]:.2f} s ({cpu[method][-1]:.2f} s CPU)", flush=True)

    def summary(times: dict[str, list[float]]) -> dict:
        ratios = [b / a for a, b in zip(times[BASELINE], times[method], strict=True)]
        return {"step_seconds": times, "median_step_seconds": {k: round(statistics.median(v), 3)
                                                               for k, v in times.items()},
                "median_ratio": round(statistics.median(ratios), 3), "ratios": [round(r, 3) for r in ratios]}

    return {"method": method, "baseline": BASELINE, "model": model, "batch_size": other.batch_size,
            "precision": other.precision, "pairs": pairs, "warmup_steps": warmup, "wall": summary(wall),
            "cpu": summary(cpu), "trained_parameters": {BASELINE: baseline.trained, method: other.trained},
            "stand_ins": notes, "load_average_1min_before": load_before,
            "load_average_1min_after": os.getloadavg()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="diffcse", help="recipes to compare with simcse, comma-separated")
    parser.add_argument("--model", default="minilm", help="base model of every recipe (default: the offline MiniLM)")
    parser.add_argument("--pairs", type=int, default=6, help="counted step pairs per method")
    parser.add_argument("--batch-size", type=int, help="batch size of both (default: the recipes', if equal)")
    parser.add_argument("--warmup", type=int, default=2, help="uncounted steps of each before the pairs")
    parser.add_argument("--threads", type=int, help="torch's intra-op threads (default: torch's own choice)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    results = []
    with tempfile.TemporaryDirectory(prefix="bench_method_cost_") as scratch:
        for method in args.methods.split(","):
            print(f"{method} vs {BASELINE}: {args.pairs} pairs ...", flush=True)
            results.append(compare(method, args.model, args.pairs, args.batch_size, Path(scratch), args.warmup))
    rows = [[r["method"], r["model"], r["batch_size"], clock, r[clock]["median_step_seconds"][BASELINE],
             r[clock]["median_step_seconds"][r["method"]], r[clock]["median_ratio"],
             f"{min(r[clock]['ratios']):.3g}–{max(r[clock]['ratios']):.3g}", r["trained_parameters"][BASELINE],
             r["trained_parameters"][r["method"]],
             f"{r['load_average_1min_before']:.2f} / {r['load_average_1min_after']:.2f}"]
            for r in results for clock in ("wall", "cpu")]
    stand_ins = "; ".join(note for r in results for note in r["stand_ins"])
    path = write_results(
        "method_cost", {"results": results, "torch_threads": torch.get_num_threads()},
        f"Cost of a training step against {BASELINE}'s (CPU, paired, one process)",
        ["method", "base model", "batch", "clock", f"{BASELINE} s/step", "method s/step", "ratio (median of pairs)",
         "ratio range", f"{BASELINE} trained params", "method trained params", "load 1 min before / after"], rows,
        notes=f"Command: `python benchmarks/bench_method_cost.py --methods {args.methods} --model {args.model} "
              f"--pairs {args.pairs} --warmup {args.warmup}"
              + (f" --batch-size {args.batch_size}" if args.batch_size else "")
              + (f" --threads {args.threads}" if args.threads else "") + "`. "
              "Each recipe built by the training loop's own build_setup; steps alternate A B / B A after the "
              "warm-up steps; precision as the recipes' `auto` picks it here "
              f"({results[0]['precision'] if results else '-'}); "
              "a step = collator + forward + objective + backward + clip + AdamW. Clocks: wall time, and this "
              "process's CPU time (all its threads), which other processes on a shared machine disturb less. "
              f"{stand_ins + '. ' if stand_ins else ''}The machine is shared (load averages in the table).")
    print(f"results in {path}")


if __name__ == "__main__":
    main()
