"""ESimCSE's cost per training step against SimCSE's, in one paired run, and how much longer its positives are.

    python benchmarks/bench_esimcse_cost.py                  # 12 step pairs, then the repetition lengths
    python benchmarks/bench_esimcse_cost.py --pairs 20

Results go to benchmarks/results/esimcse_cost.{json,md}.

* cost: the ``simcse`` and ``esimcse`` recipes as the training loop builds them (``build_setup``: MiniLM,
  the offline base, batch 64, max_seq_len 32, the recipe's precision on this machine), on the wiki
  sample (wiki1m-first-11913), one step of each in turn in this process (the order alternating), so
  both see the same machine load. A step is what the loop does per step: the collator (views,
  ESimCSE's word repetition on the token ids, tokenisation from the token cache), the forward pass,
  the loss (ESimCSE's: the momentum update, the momentum encoder's forward over the batch, the
  queue), the backward pass and AdamW's step. The first 3 steps of each are not counted (ESimCSE's
  queue is full, 160 keys, from its third step on). Reported: each recipe's median step time, CPU
  (this process's, torch on one thread by default: the step's work, which other jobs on a shared
  machine change little) and wall, the median of the pair-by-pair ratios, and the encoded tokens per step.
* lengths: on the whole wiki sample, with MiniLM's tokenizer (BERT's uncased WordPiece) at max_seq_len 32:
  the share of sentences cut at 32 pieces and the extra pieces of the positive over the anchor after
  truncation, by the anchor's length, for word_repetition as ``unit: subword`` (count paper and
  code: the repetition on the token ids after truncation) and as ``unit: word`` (in the text, before
  truncation: the form cselab had before).
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import markdown_table, require_shared, write_results  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CORPUS_NAME = "corpus/wiki1m-first-11913.txt"
WARMUP = 3


def step_runner(recipe: str, corpus: Path, out: Path):
    """(collator, one training step on a batch, the setup) for ``recipe`` as the loop builds them."""
    import torch

    from cselab.config import load_config
    from cselab.hardware import choose_precision
    from cselab.train.setup import build_setup
    from cselab.train.steps import PlainStep, StepForward

    config = load_config(recipe, [f"data.corpus={corpus}", "data.max_sentences=null", f"train.output_dir={out}"])
    device = torch.device("cpu")
    setup = build_setup(config, device)
    precision = choose_precision(config.train.precision, device, setup.encoder.hidden_size).precision
    step = PlainStep(StepForward(setup.encoder, setup.head, setup.objective, device, precision))
    optimizer = torch.optim.AdamW([p for p in setup.trainable.parameters() if p.requires_grad], lr=config.optim.lr)
    setup.trainable.train()

    def train_step(batch) -> None:
        step(batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return setup.collator, train_step, config, precision


def bench_cost(corpus: Path, pairs: int, scratch: Path, seed: int = 0) -> dict:
    sentences = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    runners = {recipe: step_runner(recipe, corpus, scratch / recipe) for recipe in ("simcse", "esimcse")}
    batch_size = runners["simcse"][2].optim.batch_size
    rng = random.Random(seed)
    timings: dict[str, list[float]] = {"simcse": [], "esimcse": []}
    cpu: dict[str, list[float]] = {"simcse": [], "esimcse": []}
    tokens: dict[str, list[int]] = {"simcse": [], "esimcse": []}
    load_before = os.getloadavg()[0]
    for pair in range(WARMUP + pairs):
        anchors = rng.sample(sentences, batch_size)  # the same sentences for both in a pair
        for recipe in (("simcse", "esimcse") if pair % 2 == 0 else ("esimcse", "simcse")):
            collator, train_step, _, _ = runners[recipe]
            tick, tock = time.perf_counter(), time.process_time()
            batch = collator((pair, anchors))
            train_step(batch)
            seconds, cpu_seconds = time.perf_counter() - tick, time.process_time() - tock
            if pair >= WARMUP:
                timings[recipe].append(seconds)
                cpu[recipe].append(cpu_seconds)
                tokens[recipe].append(batch.real_tokens)
        if pair >= WARMUP:
            print(f"pair {pair - WARMUP + 1}/{pairs}: simcse {timings['simcse'][-1]:.3f} s "
                  f"(cpu {cpu['simcse'][-1]:.3f}), esimcse {timings['esimcse'][-1]:.3f} s "
                  f"(cpu {cpu['esimcse'][-1]:.3f})", flush=True)

    def ratios(seconds: dict[str, list[float]]) -> list[float]:
        return [e / s for s, e in zip(seconds["simcse"], seconds["esimcse"], strict=True)]

    return {"pairs": pairs, "warmup_steps": WARMUP, "batch_size": batch_size, "threads": torch_threads(),
            "precision": {recipe: runner[3] for recipe, runner in runners.items()},
            "step_seconds": timings, "step_cpu_seconds": cpu, "real_tokens": tokens,
            "median_step_seconds": {r: round(statistics.median(t), 4) for r, t in timings.items()},
            "median_step_cpu_seconds": {r: round(statistics.median(t), 4) for r, t in cpu.items()},
            "mean_real_tokens": {r: round(statistics.mean(t), 1) for r, t in tokens.items()},
            "esimcse_over_simcse_cpu": summary(ratios(cpu)), "esimcse_over_simcse_wall": summary(ratios(timings)),
            "load_average_1min_before": load_before, "load_average_1min_after": os.getloadavg()[0]}


def summary(ratios: list[float]) -> dict[str, float]:
    """The median of the pair-by-pair ratios, and their quartiles."""
    quartiles = statistics.quantiles(ratios, n=4)
    return {"median": round(statistics.median(ratios), 3), "q1": round(quartiles[0], 3),
            "q3": round(quartiles[2], 3)}


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


BUCKETS = ((1, 16), (17, 31), (32, 32), (33, 48), (49, 10_000))  # pieces with [CLS]/[SEP], before truncation


def bench_lengths(corpus: Path, max_seq_len: int = 32, seed: int = 0) -> dict:
    from cselab.augment import build_augmenter
    from cselab.augment.base import sentence_seed
    from cselab.model.encoder import SentenceEncoder

    tokenizer = SentenceEncoder.from_pretrained("minilm", max_seq_len=max_seq_len).tokenizer
    sentences = [line for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    full = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
    cut = tokenizer(sentences, truncation=True, max_length=max_seq_len)["input_ids"]
    forms = {}
    for count in ("paper", "code"):
        augmenter = build_augmenter("word_repetition", unit="subword", count=count)
        augmenter.use_tokenizer(tokenizer)
        extra = []
        rng = random.Random(0)
        for sentence, ids in zip(sentences, cut, strict=True):
            rng.seed(sentence_seed(seed, sentence))
            plan = augmenter.token_plan(ids, rng)
            extra.append(0 if plan is None else len(plan) - len(ids))
        forms[f"subword, count {count}"] = extra
    text = build_augmenter("word_repetition").augment(sentences, seed)
    text_ids = tokenizer(text, truncation=True, max_length=max_seq_len)["input_ids"]
    forms["word, in the text (before)"] = [len(p) - len(a) for p, a in zip(text_ids, cut, strict=True)]
    table = []
    for low, high in BUCKETS:
        rows = [i for i, n in enumerate(full) if low <= n <= high]
        if rows:
            table.append({"pieces": f"{low}-{high}" if high < 10_000 else f"{low}+", "sentences": len(rows),
                          **{form: round(statistics.mean(extra[i] for i in rows), 2) for form, extra in forms.items()}})
    return {"sentences": len(sentences), "max_seq_len": max_seq_len,
            "share_cut_at_max_seq_len": round(sum(n > max_seq_len for n in full) / len(full), 4),
            "by_length": table,
            "overall_mean_extra": {form: round(statistics.mean(extra), 2) for form, extra in forms.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=12, help="counted step pairs (after 3 warm-up pairs)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: each step's CPU time is its work, whatever else runs on the machine)")
    args = parser.parse_args()
    corpus = require_shared() / CORPUS_NAME
    import tempfile

    import torch

    torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="cselab-esimcse-cost-") as scratch:
        cost = bench_cost(corpus, args.pairs, Path(scratch))
    lengths = bench_lengths(corpus)
    rows = [[recipe, cost["median_step_cpu_seconds"][recipe], cost["median_step_seconds"][recipe],
             cost["mean_real_tokens"][recipe], cost["precision"][recipe]] for recipe in ("simcse", "esimcse")]
    forms = list(lengths["overall_mean_extra"])
    length_rows = [[row["pieces"], row["sentences"], *(row[form] for form in forms)] for row in lengths["by_length"]]
    length_rows.append(["all", lengths["sentences"], *lengths["overall_mean_extra"].values()])
    cpu, wall = cost["esimcse_over_simcse_cpu"], cost["esimcse_over_simcse_wall"]
    notes = (f"Median of {cost['pairs']} steps each, interleaved in one process after {cost['warmup_steps']} warm-up "
             f"steps each, the same 64 sentences for both in a pair, torch on {cost['threads']} thread(s). "
             f"**esimcse / simcse per step: {cpu['median']} in CPU time** (the median of the pair-by-pair ratios; "
             f"quartiles {cpu['q1']}-{cpu['q3']}), {wall['median']} in wall time "
             f"(quartiles {wall['q1']}-{wall['q3']}). "
             f"Load average (1 min) {cost['load_average_1min_before']:.2f} before, "
             f"{cost['load_average_1min_after']:.2f} after, on 2 cores shared with other jobs: the wall times "
             f"carry their load; quote the CPU-time ratio.\n\n"
             f"## The positives' extra pieces after truncation at max_seq_len {lengths['max_seq_len']}\n\n"
             f"{lengths['sentences']} sentences of the wiki sample; {100 * lengths['share_cut_at_max_seq_len']:.1f}% "
             f"are cut at {lengths['max_seq_len']} pieces. Mean extra pieces of the positive over its anchor, by the "
             f"sentence's length in pieces ([CLS] and [SEP] included, before truncation):\n\n"
             + markdown_table(["pieces", "sentences", *forms], length_rows))
    command = f"python benchmarks/bench_esimcse_cost.py --pairs {args.pairs} --threads {args.threads}"
    write_results("esimcse_cost", {"command": command,
                                   "cost": cost, "lengths": lengths},
                  "ESimCSE vs SimCSE: cost per training step (MiniLM, batch 64, CPU)",
                  ["recipe", "median step CPU s", "median step wall s", "real tokens per step", "precision"], rows,
                  f"Command: `{command}`.\n\n" + notes)


if __name__ == "__main__":
    main()
