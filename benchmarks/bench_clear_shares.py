"""CLEAR's span deletion and reordering: the share of a sentence's units they delete and move, by length.

The paper's rates (Sec. 4.1: 5 spans of 5% deleted, 5 pairs of ~5% spans swapped) were set for
512-token inputs; on a sentence they should keep the paper's proportions, about 25% deleted and 50%
moved. For every line of wiki1m-first-11913.txt this runs each augmenter's own plan, seeded as the
augmenter seeds it, at both levels (``token``: the MiniLM/BERT WordPiece pieces the clear-* recipes
count; ``word``: cselab's word tokens), and records per sentence:

* deleted share = deleted units / units (``clear_span_deletion``),
* moved share = units whose position changed / units (``clear_reorder``),

then averages them by sentence length in whitespace-separated words. Writes
benchmarks/results/clear_shares.{json,md}; ``--baseline OLD.json`` adds an earlier run's column.

    python benchmarks/bench_clear_shares.py [--lines 11913] [--seeds 3] [--baseline OLD_clear_shares.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import require_shared, write_results  # noqa: E402

from cselab.augment import build_augmenter, lexical  # noqa: E402
from cselab.augment.base import sentence_seed  # noqa: E402
from cselab.augment.tokenize import tokenize  # noqa: E402

#: Sentence lengths in whitespace-separated words: (label, shortest, longest).
BUCKETS = [("1-5", 1, 5), ("6-12", 6, 12), ("13-20", 13, 20), ("21-30", 21, 30), ("31-50", 31, 50),
           ("51+", 51, 10**9)]
LEVELS = ("token", "word")


def units_of(sentences: list[str], level: str, augmenter) -> list[list[str]]:
    if level == "word":
        return [tokenize(s) for s in sentences]
    return [[piece.text for piece in pieces] for pieces in augmenter.splitter().split(sentences)]


def shares(sentences: list[str], level: str, seeds: range) -> dict[str, list[float | None]]:
    """Per sentence and seed: the deleted share of span deletion and the moved share of reordering."""
    deletion = build_augmenter("clear_span_deletion", level=level, placeholder=None)  # a plan of kept units
    reorder = build_augmenter("clear_reorder", level=level)
    units = units_of(sentences, level, deletion)
    rng = random.Random(0)  # reseeded per sentence as the augmenters reseed theirs
    deleted, moved = [], []
    for sentence, sentence_units in zip(sentences, units, strict=True):
        n = len(sentence_units)
        for seed in seeds:
            if n == 0:
                deleted.append(None)
                moved.append(None)
                continue
            rng.seed(sentence_seed(seed, sentence))
            kept = deletion.plan(sentence_units, rng)
            deleted.append(0.0 if kept is None else 1 - len(kept) / n)
            rng.seed(sentence_seed(seed, sentence))
            order = reorder.plan(sentence_units, rng)
            moved.append(0.0 if order is None else sum(item != i for i, item in enumerate(order)) / n)
    return {"deleted": deleted, "moved": moved, "units": [len(u) for u in units for _ in seeds]}


def by_bucket(sentences: list[str], measured: dict, seeds: range) -> list[dict]:
    words = [len(s.split()) for s in sentences for _ in seeds]
    rows = []
    for label, low, high in BUCKETS:
        picked = [i for i, w in enumerate(words) if low <= w <= high and measured["deleted"][i] is not None]
        if not picked:
            continue
        deleted = [measured["deleted"][i] for i in picked]
        moved = [measured["moved"][i] for i in picked]
        rows.append({"words": label, "sentences": len(picked) // len(seeds),
                     "mean_units": round(statistics.mean(measured["units"][i] for i in picked), 1),
                     "deleted_mean": statistics.mean(deleted), "deleted_p10": quantile(deleted, 0.1),
                     "deleted_p90": quantile(deleted, 0.9), "moved_mean": statistics.mean(moved),
                     "moved_p10": quantile(moved, 0.1), "moved_p90": quantile(moved, 0.9)})
    return rows


def code_identity() -> str:
    """Which lexical.py (span deletion and reordering) produced the numbers."""
    return hashlib.sha256(Path(lexical.__file__).read_bytes()).hexdigest()[:16]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=None, help="first N lines of the sample (default: all)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 per sentence")
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier clear_shares.json ('before')")
    args = parser.parse_args()

    corpus = require_shared() / "corpus" / "wiki1m-first-11913.txt"
    sentences = [s for s in corpus.read_text(encoding="utf-8").splitlines()[: args.lines] if s.strip()]
    seeds = range(args.seeds)
    results = {level: by_bucket(sentences, shares(sentences, level, seeds), seeds) for level in LEVELS}
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    before = {(level, row["words"]): row for level in LEVELS for row in (baseline or {}).get("by_length", {})
              .get(level, [])}

    def cell(mean: float, low: float, high: float) -> str:
        return f"{mean:.1%} ({low:.0%}-{high:.0%})"

    rows = []
    for level in LEVELS:
        for row in results[level]:
            old = before.get((level, row["words"]))
            rows.append([level, row["words"], row["sentences"], row["mean_units"],
                         cell(row["deleted_mean"], row["deleted_p10"], row["deleted_p90"]),
                         cell(row["moved_mean"], row["moved_p10"], row["moved_p90"]),
                         f"{old['deleted_mean']:.1%} / {old['moved_mean']:.1%}" if old else "-"])
    headers = ["level", "words", "sentences", "mean units", "deleted by span deletion, mean (p10-p90)",
               "moved by reordering, mean (p10-p90)", "before: deleted / moved"]
    notes = (f"Sample: the {len(sentences)} non-blank lines of the first {args.lines or 11913} of "
             f"`wiki1m-first-11913.txt`, seeds 0-{args.seeds - 1}; the paper's rates (5 spans of 5%, 5 pairs of "
             "~5% spans) as defaults; `token` counts MiniLM's WordPiece pieces (what the clear-* recipes count), "
             "`word` cselab's word tokens. Target: about 25% deleted and 50% moved at every length. "
             + f"Code: lexical.py sha256 {code_identity()}. "
            + (f"'before': the same benchmark on the earlier rules (lexical.py sha256 {baseline['code']})." if baseline
               else "No baseline given ('before' empty)."))
    data = {"lines": len(sentences), "seeds": list(seeds), "code": code_identity(), "by_length": results}
    write_results("clear_shares", data, "CLEAR span deletion and reordering: shares of a sentence's units by length",
                  headers, rows, notes)
    print((Path(__file__).parent / "results" / "clear_shares.md").read_text())


if __name__ == "__main__":
    main()
