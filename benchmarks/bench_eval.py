"""STS evaluation speed: cselab's evaluator vs a straightforward SentEval-style loop, same model, same data.

SentEval-style loop: for each file, pairs in file order, batches of 64 pairs, each batch's left and
right sentences encoded as they come (a sentence seen twice is encoded twice, no length sorting
across the file). cselab: every unique sentence of the whole run encoded once, in length-sorted
batches, then cosine + Spearman per file. Both use the MiniLM base (`cselab.load("minilm")`, no
truncation below 512 tokens), no gradient, fp32.

Only STS-style files that exist here are used (no held-out test data): STS-B dev, SICK trial,
STS-B train, SICK train from ../shared/data/senteval-dev.

    python benchmarks/bench_eval.py
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

from cselab.evaluate import formats  # noqa: E402
from cselab.evaluate.embeddings import EmbeddingStore, SentenceLookup  # noqa: E402
from cselab.evaluate.models import load_model  # noqa: E402
from cselab.evaluate.sts import cosine_rows, spearman100  # noqa: E402

FILES = [("STS-B dev", "STS/STSBenchmark/sts-dev.csv", formats.read_stsb),
         ("SICK trial", "SICK/SICK_trial.txt", formats.read_sick),
         ("STS-B train", "STS/STSBenchmark/sts-train.csv", formats.read_stsb),
         ("SICK train", "SICK/SICK_train.txt", formats.read_sick)]


def senteval_style(encoder, pairs: formats.SentencePairs, batch_size: int = 64) -> float:
    """SentEval's STS loop without its length sort: batch after batch, both sides encoded per batch."""
    similarities = []
    for start in range(0, len(pairs), batch_size):
        left = encoder.encode(pairs.left[start:start + batch_size], batch_size=batch_size)
        right = encoder.encode(pairs.right[start:start + batch_size], batch_size=batch_size)
        similarities.append(cosine_rows(left, right))
    return spearman100(np.concatenate(similarities), pairs.gold)


def cselab_style(model, data: dict[str, formats.SentencePairs], data_dir: Path) -> dict[str, float]:
    """cselab's path: unique sentences of the run once (memory store, no disk cache), length-sorted batches."""
    store = EmbeddingStore(model.encode)
    scores = {}
    for name, relative, _ in FILES:
        pairs = data[name]
        sentences = sorted(set(pairs.left) | set(pairs.right))
        lookup = SentenceLookup(sentences, store.embed(name, [data_dir / relative], sentences))
        scores[name] = spearman100(cosine_rows(lookup(pairs.left), lookup(pairs.right)), pairs.gold)
    scores["_encoded"] = store.stats["encoded"]
    return scores


def main() -> None:
    data_dir = require_shared() / "senteval-dev"
    data = {name: reader(data_dir / relative) for name, relative, reader in FILES}
    total_pairs = sum(len(p) for p in data.values())
    unique = len(set().union(*(set(p.left) | set(p.right) for p in data.values())))
    model = load_model("minilm")  # cselab eval's default batch of 128 (length-sorted)
    model.show_progress = False
    model.encoder.encode(["warm up the kernels once"] * 8)
    load_before = os.getloadavg()[0]

    start = time.perf_counter()
    with torch.no_grad():
        ours = cselab_style(model, data, data_dir)
    ours_seconds = time.perf_counter() - start
    print(f"cselab: {ours_seconds:.1f} s", flush=True)

    start = time.perf_counter()
    baseline = {name: senteval_style(model.encoder, data[name]) for name, _, _ in FILES}
    baseline_seconds = time.perf_counter() - start
    print(f"SentEval-style: {baseline_seconds:.1f} s", flush=True)
    load_after = os.getloadavg()[0]

    names = [name for name, _, _ in FILES]
    max_difference = max(abs(ours[n] - baseline[n]) for n in names)
    rows = [[n, len(data[n]), f"{baseline[n]:.4f}", f"{ours[n]:.4f}"] for n in names]
    rows.append(["wall time (s)", total_pairs, f"{baseline_seconds:.1f}", f"{ours_seconds:.1f}"])
    ratio = baseline_seconds / ours_seconds
    notes = (f"Speed-up: **{ratio:.2f}x** (SentEval-style {baseline_seconds:.1f} s / cselab {ours_seconds:.1f} s). "
             f"Largest score difference {max_difference:.4f} Spearman points (x100 scale). "
             f"Sentences encoded: SentEval-style {2 * total_pairs}, cselab {ours['_encoded']} "
             f"(unique over the run: {unique}). "
             "Data: only the STS-style files of ../shared/data/senteval-dev (STS-B dev + SICK trial + STS-B train + "
             "SICK train); the held-out STS12-16/STS-B test/SICK test files do not exist here. "
             "Model: all-MiniLM-L6-v2 (`minilm`), mean pooling, fp32, max 512 tokens; batches of 64 pairs for the "
             "SentEval-style loop, cselab's default 128 length-sorted sentences. "
             f"The machine was shared with other jobs: 1-minute load average {load_before:.2f} before, "
             f"{load_after:.2f} after.")
    write_results("eval_speed", {
        "data_dir": str(data_dir), "files": {n: r for n, r, _ in FILES}, "pairs": {n: len(data[n]) for n in names},
        "unique_sentences": unique,
        "sentences_encoded": {"senteval_style": 2 * total_pairs, "cselab": ours["_encoded"]},
        "seconds": {"senteval_style": baseline_seconds, "cselab": ours_seconds}, "speedup": ratio,
        "spearman_x100": {"senteval_style": {n: baseline[n] for n in names}, "cselab": {n: ours[n] for n in names}},
        "max_abs_score_difference": max_difference,
        "batch_size": {"senteval_style": 64, "cselab": model.batch_size}, "model": "minilm", "pooler": model.pooler,
        "load_average_1min_before": load_before, "load_average_1min_after": load_after,
    }, "STS evaluation speed: cselab vs a SentEval-style loop (MiniLM base)",
        ["File", "Pairs", "SentEval-style Spearman x100", "cselab Spearman x100"], rows, notes)
    print(f"speed-up {ratio:.2f}x, max score difference {max_difference:.4f}")


if __name__ == "__main__":
    main()
