"""Every shipped recipe on a CUDA GPU, with the GPU's own host-sync check inside the steps, and a short
MLM pre-training of a BERT-base-shaped encoder that is stopped by a signal.

    python benchmarks/gpu_recipes.py [--steps 20] [--recipes all] [--pretrain-seconds 120]

Recipes: each trains ``--steps`` steps from all-MiniLM-L6-v2 (the pre-training recipes from their own
config) at batch 32 on the shared Wiki sample, one after another in this process. While a step runs
(the forward and backward, the optimiser update, the metrics' per-step ``add``),
``torch.cuda.set_sync_debug_mode("warn")`` is on and every warning it gives is counted: a correct
step makes none (the log window's single read-back, evaluation and checkpoints are outside steps).
A recipe whose augmenter needs a package this machine lacks is reported as such, not hidden.
Reported per recipe: status, precision, host syncs in steps, ms per step (after the first log window),
``loader_wait`` and peak GPU memory. A model a recipe's term loads of its own (``diffcse``'s generator)
is replaced by a random-weight stand-in of the paper's proportions (``bench_method_cost.py``), offline.

Pre-training: ``mlm-pretrain`` with a 12 x 768 BERT at max_seq_len 128, batch 128, on the shared
pre-training corpus, for ``--pretrain-seconds`` of training; then a SIGINT, which the loop answers by
saving a checkpoint and stopping (the GPU path of Ctrl-C). Reported: tokens/s, model TFLOP/s as the
log computes them, the last MLM loss, and whether the checkpoint was written. Without a CUDA GPU every
row is "not measured" (``--device cpu`` runs the same code on a CPU as a smoke test; nothing is written).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BERT_BASE = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}


@contextlib.contextmanager
def sync_warnings_in_steps(device: str):
    """A list that collects the CUDA sync-debug warnings raised while a step's own calls run."""
    import torch

    from cselab.train.host_syncs import around_steps

    caught: list[str] = []

    @contextlib.contextmanager
    def region():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            if device == "cuda":
                torch.cuda.set_sync_debug_mode("warn")
            try:
                yield
            finally:
                if device == "cuda":
                    torch.cuda.set_sync_debug_mode("default")
                caught.extend(str(w.message).splitlines()[0] for w in seen if "synchroniz" in str(w.message))

    with around_steps(region):
        yield caught


def train_recipe(recipe: str, steps: int, work: Path, device: str) -> dict:
    import torch
    from bench_method_cost import stand_in_overrides

    from cselab.config import load_config
    from cselab.experiments.runs import read_metrics
    from cselab.run_files import METRICS
    from cselab.train.loop import train

    overrides = [f"data.corpus={SHARED / 'corpus' / 'wiki1m-first-11913.txt'}", "data.max_sentences=null",
                 "optim.batch_size=32", f"optim.max_steps={steps}", "train.eval_steps=0", "train.save_steps=0",
                 "train.log_steps=5", f"train.device={device}", f"train.output_dir={work / recipe}"]
    # A model a term loads of its own (diffcse's generator, a Hub model) gets an offline stand-in of its size.
    stand_ins, _ = stand_in_overrides(recipe, "minilm", work)
    overrides += stand_ins
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with sync_warnings_in_steps(device) as syncs:
        summary = train(load_config(recipe, overrides), resume=False, progress=False)
    windows = [r for r in read_metrics(work / recipe / METRICS) if "window_seconds" in r][1:]  # after the first window
    ms = 1000 * sum(r["window_seconds"] for r in windows) / max(1, sum(r["window_steps"] for r in windows))
    waits = [r["loader_wait"] for r in windows if "loader_wait" in r]
    return {"status": "trained" if summary.get("finished") else "stopped early",
            "precision": summary["precision"]["precision"],
            "host_syncs_in_steps": len(syncs) if device == "cuda" else None,
            "sync_sites": sorted(set(syncs))[:3], "ms_per_step": round(ms, 1) if windows else None,
            "loader_wait": round(sum(waits) / len(waits), 3) if waits else None,
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None}


def run_recipes(recipes: list[str], steps: int, device: str) -> dict:
    from cselab.augment.base import AugmenterUnavailable

    results = {}
    with tempfile.TemporaryDirectory(prefix="cselab-gpu-recipes-") as work:
        for recipe in recipes:
            try:
                results[recipe] = train_recipe(recipe, steps, Path(work), device)
            except AugmenterUnavailable as error:  # this machine lacks the augmenter's package
                results[recipe] = {"status": f"not run here: {str(error).splitlines()[0]}"}
            except Exception as error:  # noqa: BLE001 - a crash is a result to report, and the next recipe runs
                results[recipe] = {"status": f"FAILED: {type(error).__name__}: {str(error).splitlines()[0][:300]}"}
            print(recipe, results[recipe], flush=True)
    return results


def run_pretraining(seconds: float, device: str) -> dict:
    from cselab.config import load_config
    from cselab.experiments.runs import read_metrics
    from cselab.run_files import METRICS
    from cselab.train.loop import train

    corpus = SHARED / "pretrain-corpus" / "offline-english-4.8m-words.txt.gz"
    with tempfile.TemporaryDirectory(prefix="cselab-gpu-pretrain-") as work:
        run = Path(work) / "run"
        overrides = [f"data.corpus={corpus}", f"model.from_config={json.dumps(BERT_BASE)}", "model.max_seq_len=128",
                     "optim.batch_size=128", "optim.max_steps=1000000", "train.log_steps=50", "train.eval_steps=0",
                     "train.save_steps=0", f"train.device={device}", f"train.output_dir={run}"]
        started = time.perf_counter()
        # The clock starts with training: the corpus's one-time tokenisation and packing come first.
        timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))

        def start_timer_on_first_window(original):
            @functools.wraps(original)
            def add(*args, **kwargs):
                if not timer.is_alive() and not timer.finished.is_set():
                    timer.start()
                return original(*args, **kwargs)

            return add

        from cselab.train.metrics import MetricsLog

        original_add = MetricsLog.add
        MetricsLog.add = start_timer_on_first_window(original_add)
        try:
            summary = train(load_config("mlm-pretrain", overrides), resume=False, progress=False)
        finally:
            MetricsLog.add = original_add
            timer.cancel()
        records = [r for r in read_metrics(run / METRICS) if "window_seconds" in r][1:]
        seconds_trained = sum(r["window_seconds"] for r in records)
        tokens = sum(r["window_steps"] for r in records) * 128 * 128  # packed blocks: every token is real
        checkpoints = sorted(p.name for p in (run / "checkpoints").glob("*")) if (run / "checkpoints").is_dir() else []
        return {"steps": summary.get("steps", summary.get("step")), "precision": summary["precision"]["precision"],
                "tokens_per_second": round(tokens / seconds_trained) if seconds_trained and tokens else None,
                "model_tflops": round(sum(r.get("model_tflops", 0) * r["window_seconds"] for r in records)
                                      / seconds_trained, 1) if seconds_trained else None,
                "last_mlm_loss": records[-1].get("loss") if records else None,
                "stopped_by_signal_with_checkpoint": bool(checkpoints) and not summary.get("finished", True),
                "wall_seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--recipes", default="all", help="comma-separated recipe names, or all")
    parser.add_argument("--pretrain-seconds", type=float, default=120.0, help="0: no pre-training run")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke test, nothing written")
    args = parser.parse_args()
    import torch

    from cselab.config import list_recipes

    recipes = list_recipes() if args.recipes == "all" else args.recipes.split(",")
    if args.device == "cpu":
        run_recipes(recipes, args.steps, "cpu")
        if args.pretrain_seconds:
            print("pretraining", run_pretraining(args.pretrain_seconds, "cpu"), flush=True)
        return
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    results = run_recipes(recipes, args.steps, "cuda") if device else dict.fromkeys(recipes, "not measured")
    pretrain = (run_pretraining(args.pretrain_seconds, "cuda") if device and args.pretrain_seconds else "not measured")
    print("pretraining", pretrain, flush=True)
    keys = ("status", "precision", "host_syncs_in_steps", "ms_per_step", "loader_wait", "peak_memory_gib")
    rows = [[recipe, *([r.get(k, "-") for k in keys] if isinstance(r, dict) else [r] * len(keys))]
            for recipe, r in results.items()]
    notes = (f"Device: {device or 'no CUDA GPU on this machine: nothing was measured'}. {args.steps} steps per "
             "recipe from all-MiniLM-L6-v2 at batch 32 (max_seq_len as each recipe says), host syncs counted by "
             "torch.cuda.set_sync_debug_mode('warn') inside steps only. Pre-training (mlm-pretrain, 12 x 768 BERT, "
             f"max_seq_len 128, batch 128, stopped by SIGINT after {args.pretrain_seconds:g} s of training): "
             f"{json.dumps(pretrain)}. Command: python benchmarks/gpu_recipes.py")
    write_results("gpu_recipes", {"device": device, "steps": args.steps, "results": results, "pretraining": pretrain},
                  "Every recipe on the GPU: host syncs inside steps, speed, loader wait",
                  ["recipe", *keys], rows, notes)


if __name__ == "__main__":
    main()
