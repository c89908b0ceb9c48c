"""The data pipeline's tokenisation: each step's batch built with the corpus's cached token ids
(``data.cache_token_ids``, the default) against tokenising every row at every step, and the one-time
cost of filling the cache.

    python benchmarks/bench_collate.py [--steps N] [--rounds R]

Corpus: ../shared/data/corpus/wiki1m-first-11913.txt; the MiniLM tokenizer at max_seq_len 32 and
batch 64, as the simcse recipe trains. For each recipe the same steps' batches (views, tokenisation,
MLM masking where the recipe has it) are built by cselab's Collator both ways, in alternating rounds
(paired: both see the same machine load). The peer is sentence-transformers' own per-step
tokenisation (``SentenceTransformer.tokenize``, which its data collator calls for each column) of
the simcse recipe's batches (each sentence and its dropout copy, 128 rows) on the same steps, at the
same max_seq_length 32, timed in the same alternating rounds as the simcse recipe.
The one-time cost is ``token_ids`` on an empty cache: the 11,913 wiki lines, and the 463,615 lines of
the pre-training corpus where ../shared has it.
Results: benchmarks/results/collate_speed.{json,md}.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core for both sides: no Rust thread pool
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

RECIPES = ("simcse", "una", "sda-pi", "clear-del-word")  # all rows cached; new negatives; some new positives; MLM


def collator(recipe: str, corpus: Path, cache: bool):
    """The recipe's collator, built as a training run builds it, and the run's first steps."""
    import torch

    from cselab.config import load_config
    from cselab.data.step_dataset import StepDataset
    from cselab.train.setup import build_setup

    config = load_config(recipe, ["model.name_or_path=minilm", "model.max_seq_len=32", "optim.batch_size=64",
                                  f"data.corpus={corpus}", f"data.cache_token_ids={str(cache).lower()}"])
    parts = build_setup(config, torch.device("cpu"))
    return parts.collator, StepDataset(parts.corpus, parts.plan)


def sentence_transformers_tokenize():
    """The peer's per-step tokenisation: sentence-transformers' own, for MiniLM at max_seq_length 32."""
    from sentence_transformers import SentenceTransformer

    from cselab.sources import resolve_model_path

    peer = SentenceTransformer(resolve_model_path("minilm"), device="cpu")
    peer.max_seq_length = 32
    return getattr(peer, "preprocess", peer.tokenize)  # renamed in sentence-transformers 5


def seconds(collator, items) -> float:
    start = time.perf_counter()
    for item in items:
        collator(item)
    return time.perf_counter() - start


def fill_time(corpus) -> float:
    """``token_ids`` on an empty cache (a private $CSELAB_CACHE)."""
    from transformers import AutoTokenizer

    from cselab.data.token_cache import token_ids
    from cselab.sources import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("minilm"))
    with tempfile.TemporaryDirectory() as cache:
        previous, os.environ["CSELAB_CACHE"] = os.environ.get("CSELAB_CACHE"), cache
        try:
            start = time.perf_counter()
            token_ids(corpus, tokenizer)
            return time.perf_counter() - start
        finally:
            os.environ.pop("CSELAB_CACHE") if previous is None else os.environ.__setitem__("CSELAB_CACHE", previous)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per round (default 60)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side (default 5)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    wiki = require_shared() / "corpus" / "wiki1m-first-11913.txt"
    rows, data = [], {"steps": args.steps, "rounds": args.rounds, "batch_size": 64, "max_seq_len": 32, "recipes": {}}
    peer = sentence_transformers_tokenize()
    for recipe in RECIPES:
        with_cache, dataset = collator(recipe, wiki, cache=True)
        without, _ = collator(recipe, wiki, cache=False)
        items = [dataset[k] for k in range(args.steps)]
        sides = {"cached": (with_cache, items), "tokenised": (without, items)}  # name: (builder, its inputs)
        if recipe == "simcse":  # the peer tokenises these same steps' rows, in the same rounds
            sides["peer"] = (peer, [sentences + sentences for _, sentences, _ in items])
        for build, inputs in sides.values():  # warm-up: models loaded, per-sentence caches filled
            seconds(build, inputs)
        timed = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, (build, inputs) in sides.items():
                timed[name].append(seconds(build, inputs) / args.steps * 1000)
        cached, tokenised = statistics.median(timed["cached"]), statistics.median(timed["tokenised"])
        data["recipes"][recipe] = {"ms_per_step": {k: timed[k] for k in ("cached", "tokenised")}}
        rows.append([recipe, round(tokenised, 2), round(cached, 2), round(tokenised / cached, 2)])
        if "peer" in timed:
            peer_ms, simcse_cached = statistics.median(timed["peer"]), cached
            data["sentence_transformers_tokenize_ms_per_step"] = timed["peer"]
    rows.append(["simcse, sentence-transformers tokenize (peer)", round(peer_ms, 2), "",
                 round(peer_ms / simcse_cached, 2)])
    from cselab.data.indexed import read_corpus

    fills = {}
    for path in [wiki, *sorted((wiki.parents[1] / "pretrain-corpus").glob("*.txt.gz"))]:
        lines, _ = read_corpus(str(path))
        fills[path.name] = (len(lines), fill_time(lines))
    data["cache_fill"] = {name: {"lines": n, "seconds": s} for name, (n, s) in fills.items()}
    notes = ["One-time cache fill (`token_ids` on an empty cache, then reused by every run on that corpus "
             "and tokenizer):", ""]
    notes += [f"- {name}: {n:,} lines in {s:.2f} s ({n / s:,.0f} lines/s)" for name, (n, s) in fills.items()]
    notes += ["", f"Median of {args.rounds} alternating rounds of {args.steps} steps, batch 64, max_seq_len 32, "
              "one thread; a step's time includes its views (augmentations) and MLM masking. The peer row's "
              "ratio is its time over cselab's cached SimCSE step. Command: python benchmarks/bench_collate.py "
              f"--steps {args.steps} --rounds {args.rounds}"]
    path = write_results("collate_speed", data, "Building a step's batch: cached token ids vs tokenising every row",
                         ["recipe", "tokenised every step (ms/step)", "cached ids (ms/step)", "cached is faster by"],
                         rows, "\n".join(notes))
    print(path.read_text())


if __name__ == "__main__":
    main()
