"""UNA benchmarks: TF-IDF fitting cost, negatives per second, training overhead, example negatives.

    python benchmarks/bench_una.py                       # fit, negatives, train, examples (a few minutes)
    python benchmarks/bench_una.py --parts fit --sizes 10000,100000,1000000
    python benchmarks/bench_una.py --parts train --train-steps 30 --repeats 2

Results go to benchmarks/results/una_{fit,train,examples}.{json,md}. The STS-B dev study of simcse,
una, una-paraphrase and the three ablations is part of the reproduction study
(``bash benchmarks/reproduction.sh``), reported on its own in benchmarks/results/una_study/.

* fit: UNA's TF-IDF on synthetic sentences with a Zipfian vocabulary (10k / 100k / 1M), each size
  in a fresh subprocess. Memory is the psutil RSS of that process sampled every 5 ms during
  ``fit``: peak minus the RSS just before ``fit`` (the corpus itself is already in memory).
  Negatives per second are measured on the same fitted model (batches of 64, as in training).
* train: the same short run (MiniLM base, wiki1m-first-11913, batch 64) with ``simcse`` and ``una``
  (f = 5), in this process. Reported per recipe: the UNA fit, the loop time = model compute
  (forward/backward/step, ``summary.train_seconds``) + data time (views, including UNA's
  augmentation, and tokenisation, timed around the collator), steps/s and anchor sentences/s
  over the loop, and the whole wall time. The ratio una/simcse is reported as measured.
* examples: UNA negatives of 10 corpus sentences (like the paper's Table B2), fitted on the corpus.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, SHARED, markdown_table, require_shared, run_worker, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS_NAME = "corpus/wiki1m-first-11913.txt"


# Synthetic corpus -----------------------------------------------------------------------------

def zipf_sentences(num_sentences: int, vocab_size: int = 300_000, exponent: float = 1.07, seed: int = 0) -> list[str]:
    """Sentences of 5-29 pseudo-words drawn from a Zipf(exponent) vocabulary, ending with a period."""
    import numpy as np

    rng = np.random.default_rng(seed)
    syllables = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]  # 85 syllables

    def word(k: int) -> str:
        parts = []
        k += 1
        while k:
            k, r = divmod(k, len(syllables))
            parts.append(syllables[r])
        return "".join(parts)

    words = np.array([word(k) for k in range(vocab_size)], dtype=object)
    weights = 1.0 / np.arange(1, vocab_size + 1) ** exponent
    lengths = rng.integers(5, 30, size=num_sentences)
    ids = rng.choice(vocab_size, size=int(lengths.sum()), p=weights / weights.sum())
    tokens = words[ids]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [" ".join(tokens[bounds[i]:bounds[i + 1]]) + "." for i in range(num_sentences)]


# Fit benchmark (one subprocess per size) ------------------------------------------------------

def fit_worker(size: int) -> dict:
    import psutil
    import sklearn.feature_extraction.text  # noqa: F401  imported before the baseline: not part of fit

    from cselab.augment import build_augmenter

    started = time.perf_counter()
    corpus = zipf_sentences(size)
    generate_seconds = time.perf_counter() - started
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = [baseline]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    augmenter = build_augmenter("una")
    tick = time.perf_counter()
    augmenter.fit(corpus)
    fit_seconds = time.perf_counter() - tick
    done.set()
    sampler.join()
    kept_rss = process.memory_info().rss - baseline
    import pickle

    # What the fitted model holds (the RSS above also counts freed memory the allocator keeps).
    model_mib = len(pickle.dumps(augmenter)) / 2**20
    # Negatives per second: batches of 64, as in training, over up to 20 000 sentences.
    sample_sentences = corpus[:20_000]
    tick = time.perf_counter()
    for start in range(0, len(sample_sentences), 64):
        augmenter.augment(sample_sentences[start:start + 64], start)
    negatives_seconds = time.perf_counter() - tick
    return {"sentences": size, "tokens": sum(len(s.split()) + 1 for s in corpus), "vocabulary": augmenter.stats.size,
            "generate_seconds": round(generate_seconds, 2), "fit_seconds": round(fit_seconds, 2),
            "fit_peak_rss_delta_mib": round((peak[0] - baseline) / 2**20, 1),
            "rss_kept_after_fit_mib": round(kept_rss / 2**20, 1), "fitted_model_pickle_mib": round(model_mib, 1),
            "negatives_per_second": round(len(sample_sentences) / negatives_seconds, 1),
            "load_average_1min": os.getloadavg()[0]}


def bench_fit(sizes: list[int]) -> list[dict]:
    rows = []
    for size in sizes:
        print(f"fit: {size} synthetic sentences ...", flush=True)
        rows.append(run_worker(__file__, "--fit-worker", str(size)))
        print("   ", rows[-1], flush=True)
    return rows


def real_corpus_negatives(corpus: list[str]) -> dict:
    import sklearn.feature_extraction.text  # noqa: F401  (import time is not fit time)

    from cselab.augment import build_augmenter

    augmenter = build_augmenter("una")
    tick = time.perf_counter()
    augmenter.fit(corpus)
    fit_seconds = time.perf_counter() - tick
    tick = time.perf_counter()
    for start in range(0, len(corpus), 64):
        augmenter.augment(corpus[start:start + 64], start)
    seconds = time.perf_counter() - tick
    return {"sentences": len(corpus), "vocabulary": augmenter.stats.size, "fit_seconds": round(fit_seconds, 2),
            "negatives_per_second": round(len(corpus) / seconds, 1), "load_average_1min": os.getloadavg()[0]}


# Training overhead -----------------------------------------------------------------------------

def timed_training(recipe: str, corpus: Path, steps: int, out: Path) -> dict:
    import cselab.train.setup as parts
    from cselab.augment.una import UNAAugmenter
    from cselab.config import load_config
    from cselab.train.loop import train

    timers = {"data": 0.0, "fit": 0.0}
    original_collator, original_fit = parts.Collator, UNAAugmenter.fit

    class TimedCollator(original_collator):
        def __call__(self, item):
            tick = time.perf_counter()
            try:
                return super().__call__(item)
            finally:
                timers["data"] += time.perf_counter() - tick

    def timed_fit(self, sentences):
        tick = time.perf_counter()
        try:
            return original_fit(self, sentences)
        finally:
            timers["fit"] += time.perf_counter() - tick

    overrides = [f"data.corpus={corpus}", "data.max_sentences=null", f"optim.max_steps={steps}",
                 "train.eval_steps=0", "train.save_steps=0", f"train.output_dir={out}"]
    config = load_config(recipe, overrides)
    parts.Collator, UNAAugmenter.fit = TimedCollator, timed_fit
    try:
        load_before = os.getloadavg()[0]
        tick = time.perf_counter()
        summary = train(config, resume=False, progress=False)
        wall = time.perf_counter() - tick
    finally:
        parts.Collator, UNAAugmenter.fit = original_collator, original_fit
    # train_seconds is the loop's wall time between log windows: the collator (data) included.
    loop_seconds = summary["train_seconds"]
    anchors = summary["steps"] * config.optim.batch_size
    return {"recipe": recipe, "steps": summary["steps"], "batch_size": config.optim.batch_size,
            "negative_every": config.views.negative_every if config.views.negative != "none" else None,
            "compute_seconds": round(loop_seconds - timers["data"], 2), "data_seconds": round(timers["data"], 2),
            "una_fit_seconds": round(timers["fit"], 2), "loop_seconds": round(loop_seconds, 2),
            "steps_per_second": round(summary["steps"] / loop_seconds, 3),
            "anchor_sentences_per_second": round(anchors / loop_seconds, 2),
            "wall_seconds": round(wall, 2), "load_average_1min_before": load_before,
            "load_average_1min_after": os.getloadavg()[0],
            "command": f"cselab train --recipe {recipe} --corpus {corpus} --max-steps {steps} "
                       f"--set train.eval_steps=0 --set train.save_steps=0 --set data.max_sentences=null"}


def bench_train(corpus: Path, steps: int, repeats: int, scratch: Path) -> dict:
    runs = []
    for repeat in range(repeats):
        # Alternate the order so drifting machine load does not favour one recipe.
        for recipe in (("simcse", "una") if repeat % 2 == 0 else ("una", "simcse")):
            print(f"train: {recipe} ({steps} steps, repeat {repeat + 1}/{repeats}) ...", flush=True)
            runs.append(timed_training(recipe, corpus, steps, scratch / f"{recipe}-{repeat}"))
            print("   ", {k: runs[-1][k] for k in ("loop_seconds", "steps_per_second", "una_fit_seconds",
                                                   "wall_seconds", "load_average_1min_after")}, flush=True)

    def mean(recipe: str, key: str) -> float:
        return statistics.mean(r[key] for r in runs if r["recipe"] == recipe)

    ratios = {key: round(mean("una", key) / mean("simcse", key), 3)
              for key in ("loop_seconds", "compute_seconds", "wall_seconds")}
    return {"runs": runs, "una_over_simcse": ratios}


def bench_step_cost(corpus_path: Path, pairs: int, seed: int = 0) -> dict:
    """Interleaved timing of one plain step (2N rows) and one UNA step (3N rows), same weights.

    Alternating the two kinds of step inside one process exposes both to the same machine load,
    which whole-run wall times on a shared machine do not. Each timing covers what the loop does
    per step: views and tokenisation (the collator), forward, loss, backward and the AdamW step.
    """
    import torch

    from cselab.config import load_config
    from cselab.data.collate import Collator
    from cselab.data.views import ViewBuilder
    from cselab.hardware import choose_precision
    from cselab.losses import build_objective
    from cselab.model.heads import build_head
    from cselab.train.setup import build_encoder
    from cselab.train.steps import PlainStep, StepForward

    config = load_config("una", [f"data.corpus={corpus_path}"])
    corpus = [line for line in corpus_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    torch.manual_seed(seed)
    encoder = build_encoder(config.model)
    head = build_head(config.model.projection, encoder.hidden_size, **config.model.projection_params)
    objective = build_objective(config.objective)
    params = [p for p in list(encoder.parameters()) + list(head.parameters()) if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.optim.lr)
    collator = Collator(encoder.tokenize, ViewBuilder(config.views, corpus, seed))
    device = torch.device("cpu")
    precision = choose_precision(config.train.precision, device, encoder.hidden_size).precision
    step_fn = PlainStep(StepForward(encoder, head, objective, device, precision))
    rng = random.Random(seed)
    timings: dict[str, list[float]] = {"plain": [], "una": []}
    augment_seconds = []
    encoder.train()
    head.train()
    for pair in range(pairs):
        for kind in (("plain", "una") if pair % 2 == 0 else ("una", "plain")):
            anchors = rng.sample(corpus, config.optim.batch_size)
            step = 0 if kind == "una" else 1  # step % negative_every == 0: the UNA steps
            tick = time.perf_counter()
            step_fn(collator((step, anchors)))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            timings[kind].append(time.perf_counter() - tick)
            if kind == "una":
                tock = time.perf_counter()
                collator.view_builder.negative.augment(anchors, pair)
                augment_seconds.append(time.perf_counter() - tock)
        print(f"   pair {pair + 1}/{pairs}: plain {timings['plain'][-1]:.2f} s, una {timings['una'][-1]:.2f} s",
              flush=True)
    plain, una = statistics.median(timings["plain"]), statistics.median(timings["una"])
    f = config.views.negative_every
    return {"pairs": pairs, "batch_size": config.optim.batch_size, "negative_every": f,
            "plain_step_seconds": timings["plain"], "una_step_seconds": timings["una"],
            "median_plain_step_seconds": round(plain, 3), "median_una_step_seconds": round(una, 3),
            "una_step_over_plain_step": round(una / plain, 3),
            "median_augment_seconds_per_batch": round(statistics.median(augment_seconds), 4),
            # A run with UNA on 1 step in f: (f - 1) plain steps and one UNA step per f.
            "expected_run_time_ratio": round(((f - 1) * plain + una) / (f * plain), 3),
            "load_average_1min": os.getloadavg()[0]}


# Examples (Table B2) ---------------------------------------------------------------------------

def bench_examples(corpus: list[str], count: int = 10, seed: int = 0) -> dict:
    from cselab.augment import build_augmenter

    augmenter = build_augmenter("una").fit(corpus)
    candidates = [s for s in corpus if 5 <= len(s.split()) <= 22]
    picked = random.Random(seed).sample(candidates, count)
    records = [augmenter.explain(sentence, seed) for sentence in picked]
    return {"vocabulary": augmenter.stats.size, "params": {"p": augmenter.p, "radius": augmenter.radius,
                                                           "tf": augmenter.tf}, "examples": records}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Main ----------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="fit,negatives,stepcost,train,examples",
                        help="comma-separated: fit, negatives, stepcost, train, examples")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="synthetic corpus sizes for the fit benchmark")
    parser.add_argument("--train-steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=1, help="training runs per recipe (order alternates)")
    parser.add_argument("--pairs", type=int, default=6, help="interleaved plain/UNA step pairs (part stepcost)")
    parser.add_argument("--fit-worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.fit_worker:
        print(json.dumps(fit_worker(args.fit_worker)))
        return

    parts = set(args.parts.split(","))
    if parts & {"fit", "negatives"}:
        data: dict = {}
        rows = []
        if "fit" in parts:
            data["synthetic"] = bench_fit([int(s) for s in args.sizes.split(",")])
            rows += [[f"synthetic {r['sentences']}", r["vocabulary"], r["fit_seconds"], r["fit_peak_rss_delta_mib"],
                      r["rss_kept_after_fit_mib"], r["fitted_model_pickle_mib"], r["negatives_per_second"],
                      r["load_average_1min"]]
                     for r in data["synthetic"]]
        if "negatives" in parts and SHARED.is_dir():
            corpus = [line for line in (SHARED / CORPUS_NAME).read_text(encoding="utf-8").splitlines() if line.strip()]
            data["wiki"] = real_corpus_negatives(corpus)
            w = data["wiki"]
            rows.append([f"wiki1m-first-11913 ({w['sentences']})", w["vocabulary"], w["fit_seconds"], "", "", "",
                         w["negatives_per_second"], w["load_average_1min"]])
        write_results("una_fit", data, "UNA: TF-IDF fit cost and negatives per second",
                      ["corpus", "vocabulary", "fit s", "fit peak RSS delta MiB", "RSS kept MiB", "model pickle MiB",
                       "negatives/s",
                       "load 1 min"], rows,
                      notes="Synthetic: 5-29 pseudo-words per sentence from a Zipf(1.07) vocabulary of 300k words. "
                            "Memory: psutil RSS of a fresh process sampled every 5 ms during fit, peak minus the RSS "
                            "before fit (corpus already loaded); 'kept' = RSS after fit minus before (includes "
                            "memory the allocator keeps after freeing); 'model pickle' = size of the fitted "
                            "augmenter. Negatives/s: augment() on batches of 64 (up to 20k sentences), one core, "
                            "machine shared.")
    if "train" in parts:
        require_shared()
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bench_una_") as scratch:
            result = bench_train(SHARED / CORPUS_NAME, args.train_steps, args.repeats, Path(scratch))
        rows = [[r["recipe"], r["steps"], r["loop_seconds"], r["compute_seconds"], r["data_seconds"],
                 r["una_fit_seconds"], r["steps_per_second"], r["anchor_sentences_per_second"], r["wall_seconds"],
                 r["load_average_1min_after"]] for r in result["runs"]]
        ratio = result["una_over_simcse"]
        write_results("una_train", result, f"UNA (f = 5) vs SimCSE: {args.train_steps} training steps, MiniLM base",
                      ["recipe", "steps", "loop s", "compute s", "data s", "UNA fit s", "steps/s", "anchors/s",
                       "wall s", "load 1 min"], rows,
                      notes=f"Ratios una/simcse (mean over repeats): loop time {ratio['loop_seconds']}, compute "
                            f"{ratio['compute_seconds']}, whole wall {ratio['wall_seconds']}. Loop = compute "
                            "(forward/backward/step) + data (views incl. UNA augmentation, tokenisation). "
                            "On UNA steps (1 in 5) the forward pass encodes 3N rows instead of 2N. The machine "
                            "was shared with other jobs (see the load averages): whole-run ratios there mostly "
                            "measure load changes between the runs; una_stepcost.md interleaves the two kinds of "
                            "step in one process instead.")
    if "stepcost" in parts:
        require_shared()
        print(f"stepcost: {args.pairs} interleaved plain/UNA step pairs ...", flush=True)
        result = bench_step_cost(SHARED / CORPUS_NAME, args.pairs)
        rows = [["plain (2N rows)", result["median_plain_step_seconds"], ""],
                ["UNA step (3N rows, incl. augmentation)", result["median_una_step_seconds"],
                 result["una_step_over_plain_step"]],
                [f"run with UNA on 1 step in {result['negative_every']} (expected)", "",
                 result["expected_run_time_ratio"]]]
        write_results("una_stepcost", result, "UNA step cost: interleaved plain and UNA steps (MiniLM, batch 64)",
                      ["step", "median s", "ratio to plain"], rows,
                      notes=f"{result['pairs']} pairs, alternating order, same process and weights; each timing is "
                            "collator (views, UNA augmentation, tokenisation) + forward + loss + backward + AdamW "
                            f"step. UNA's augmentation alone: {result['median_augment_seconds_per_batch']} s per batch "
                            "of 64. Expected run ratio = ((f - 1) x plain + UNA) / (f x plain). The machine was "
                            "shared (load average in the JSON).")
    if "examples" in parts:
        require_shared()
        corpus = [line for line in (SHARED / CORPUS_NAME).read_text(encoding="utf-8").splitlines() if line.strip()]
        result = bench_examples(corpus)
        rows = [[_cell(r["original"]), _cell(r["negative"])] for r in result["examples"]]
        first = result["examples"][0]
        detail = markdown_table(["token", "TF-IDF", "p", "rank", "chosen"],
                                [[_cell(t["term"]), t["tfidf"], t["p"], t["rank"], "yes" if t["chosen"] else ""]
                                 for t in first["tokens"]])
        write_results("una_examples", result, "UNA negatives of 10 wiki1m sentences (cf. the paper's Table B2)",
                      ["sentence", "UNA negative"], rows,
                      notes=f"TF-IDF fitted on wiki1m-first-11913 ({result['vocabulary']} terms), p = 0.5, r = 4000, "
                            f"seed 0. Negatives are lowercased (UNA's only preprocessing).\n\n"
                            f"How the first negative was made (step 2 probabilities; rank in the max-TF-IDF "
                            f"ordering):\n\n{detail}")
    print(f"results in {RESULTS}")


if __name__ == "__main__":
    main()
