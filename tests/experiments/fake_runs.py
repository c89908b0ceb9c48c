"""Synthetic run directories in the layout `cselab sweep` writes (no training, no model)."""
from __future__ import annotations

import json
import random
from pathlib import Path

DEV_STS = ["STSBenchmark", "SICKRelatedness"]
DEV_TRANSFER = ["SST2", "MRPC"]
# deliberately not in the papers' order: the report must order the columns itself
TEST_STS = ["SICKRelatedness", "STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"]
TEST_TRANSFER = ["MRPC", "MR", "CR", "SUBJ", "MPQA", "SST2", "TREC"]


BASE_DEV = 66.5  # the fake base model's STS-B dev before training
PRECISION = {"precision": "bf16", "requested": "auto", "reason": "faster in the matmul probe", "probe": None}


def fake_eval(rng: random.Random, level: float, split: str = "dev") -> dict:
    """An evaluation result dict shaped like cselab.evaluate.runner.evaluate's."""
    sts, transfer = (DEV_STS, DEV_TRANSFER) if split == "dev" else (TEST_STS, TEST_TRANSFER)
    tasks = {name: {"score": level + rng.uniform(-2, 2)} for name in sts}
    tasks.update({name: {"score": 70 + level / 10 + rng.uniform(-1, 1), "devacc": 0.0} for name in transfer})
    tasks["align"] = {"alignment": 0.2 + rng.uniform(0, 0.1), "uniformity": -2.0 - level / 100 + rng.uniform(-0.1, 0.1)}
    # the final evaluation encodes in fp32 at the model's full length, as cselab sweep does
    return {"model": "fake", "pooler": "avg", "max_seq_len": 512, "precision": "fp32", "split": split, "tasks": tasks,
            "avg": sum(tasks[n]["score"] for n in sts) / len(sts), "avg_over": sts,
            "transfer_avg": sum(tasks[n]["score"] for n in transfer) / len(transfer), "transfer_avg_over": transfer}


def make_run(root: Path, recipe: str, seed: int, level: float, steps: int = 40, split: str | None = "dev",
             finished: bool = True, base_dev: float | None = BASE_DEV, precision: dict | None = PRECISION,
             model: dict | None = None) -> Path:
    """One run directory; ``base_dev``/``precision`` None: a summary.json from before cselab recorded them;
    ``model``: the recipe's model section (default: minilm, 32 tokens)."""
    rng = random.Random(f"{recipe}-{seed}")
    path = root / recipe / f"seed-{seed}"
    path.mkdir(parents=True, exist_ok=True)
    config = {"recipe": recipe, "train": {"seed": seed, "output_dir": str(path), "precision": "auto"},
              "model": model or {"name_or_path": "minilm", "pooler": "auto", "max_seq_len": 32}, "optim": {"lr": 3e-5},
              "objective": [{"name": "infonce", "temperature": 0.05}]}
    (path / "train_config.json").write_text(json.dumps(config))
    records = []
    for step in range(1, steps + 1):
        record = {"step": step, "loss": 3.0 / step + rng.uniform(0, 0.05), "lr": 3e-5 * (1 - step / steps)}
        if step % 10 == 0:
            record["stsb_dev"] = level * step / steps + rng.uniform(-1, 1)
        records.append(record)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    best = max((r for r in records if "stsb_dev" in r), key=lambda r: r["stsb_dev"])
    summary = {
        "recipe": recipe, "finished": finished, "steps": steps, "total_steps": steps, "first_loss": records[0]["loss"],
        "final_loss": records[-1]["loss"], "best_stsb_dev": best["stsb_dev"], "best_step": best["step"],
        "train_seconds": 10.0 * steps + seed, "wall_seconds": 12.0 * steps + seed,
        "sentences_per_second": 64 * steps / (10.0 * steps + seed)}
    if base_dev is not None:
        summary["base_stsb_dev"] = base_dev
    if precision is not None:
        summary["precision"] = precision
    (path / "summary.json").write_text(json.dumps(summary))
    (path / "versions.json").write_text(json.dumps({"train": {"python": "3.11", "torch": "2.x", "cselab": "0.1.0",
                                                              "git": {"commit": "0123456789abcdef", "dirty": False},
                                                              "date": "2026-01-01"}}))
    if split:
        (path / f"eval-{split}.json").write_text(json.dumps(fake_eval(rng, level, split)))
    return path


def make_sweep(root: Path, levels: dict[str, float], seeds=(42, 0, 1)) -> Path:
    for recipe, level in levels.items():
        for seed in seeds:
            make_run(root, recipe, seed, level)
    return root
