"""Model selection during training: Spearman of cosine on STS-B dev (as the papers do)."""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.stats import spearmanr

STSB_DEV = Path("STS/STSBenchmark/sts-dev.csv")


def find_senteval_dir(explicit: str | None = None) -> Path | None:
    """The SentEval data directory: explicit, $CSELAB_DATA, cselab's download cache, or ../shared."""
    candidates = [explicit, os.environ.get("CSELAB_DATA"),
                  str(Path.home() / ".cache" / "cselab" / "senteval"),
                  "data/senteval", "../shared/data/senteval-dev"]
    for candidate in candidates:
        if candidate and (Path(candidate) / STSB_DEV).is_file():
            return Path(candidate)
    if explicit:
        raise FileNotFoundError(f"{Path(explicit) / STSB_DEV}: STS-B dev not found (run `cselab data download --dest {explicit}`)")
    return None


def read_stsb(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B csv: tab-separated, score in column 5, sentences in 6 and 7; extra columns ignored."""
    left, right, scores = [], [], []
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if len(row) < 7:
                raise ValueError(f"{path}:{number}: expected at least 7 tab-separated columns, found {len(row)}")
            scores.append(float(row[4]))
            left.append(row[5])
            right.append(row[6])
    return left, right, np.asarray(scores)


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True).clip(min=1e-12)
    b = b / np.linalg.norm(b, axis=1, keepdims=True).clip(min=1e-12)
    return (a * b).sum(axis=1)


class StsbDev:
    """STS-B dev pairs loaded once; ``score(encode)`` returns Spearman x 100."""

    def __init__(self, data_dir: Path):
        self.left, self.right, self.gold = read_stsb(data_dir / STSB_DEV)
        self.unique = sorted(set(self.left) | set(self.right))

    def score(self, encode: Callable[[list[str]], np.ndarray]) -> float:
        vectors = encode(self.unique)
        index = {s: i for i, s in enumerate(self.unique)}
        a = vectors[[index[s] for s in self.left]]
        b = vectors[[index[s] for s in self.right]]
        return float(spearmanr(cosine_rows(a, b), self.gold).correlation * 100)
