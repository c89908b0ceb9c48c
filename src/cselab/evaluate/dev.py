"""Model selection during training: Spearman of cosine on STS-B dev (as the papers do).

Thin layer over the evaluation suite's readers and STS scoring, kept for the training loop.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cselab.evaluate import formats
from cselab.evaluate.sts import cosine_rows, spearman100

STSB_DEV = Path("STS/STSBenchmark/sts-dev.csv")

__all__ = ["STSB_DEV", "StsbDev", "cosine_rows", "find_senteval_dir", "read_stsb"]


def find_senteval_dir(explicit: str | None = None) -> Path | None:
    """The SentEval data directory: explicit (``data.dev_dir``, ``--data-dir``), ``$CSELAB_DATA``, or
    where ``cselab data download`` puts it (``~/.cache/cselab/senteval``); None when none has STS-B dev."""
    candidates = [explicit, os.environ.get("CSELAB_DATA"), str(Path.home() / ".cache" / "cselab" / "senteval")]
    for candidate in candidates:
        if candidate and _has_stsb_dev(Path(candidate).expanduser()):
            return Path(candidate).expanduser()
    if explicit:
        raise FileNotFoundError(f"{Path(explicit) / STSB_DEV}: STS-B dev not found "
                                f"(run `cselab data download --dest {explicit}`)")
    return None


def _has_stsb_dev(folder: Path) -> bool:
    try:
        return (folder / STSB_DEV).is_file()
    except (OSError, ValueError):  # a name the system cannot look up (too long, a NUL byte)
        return False


def read_stsb(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """STS-B csv: tab-separated, score in column 5, sentences in 6 and 7; extra columns ignored."""
    pairs = formats.read_stsb(Path(path))
    return pairs.left, pairs.right, pairs.gold


class StsbDev:
    """STS-B dev pairs loaded once; ``score(encode)`` returns Spearman x 100."""

    def __init__(self, data_dir: Path):
        self.left, self.right, self.gold = read_stsb(Path(data_dir) / STSB_DEV)
        self.unique = sorted(set(self.left) | set(self.right))

    def score(self, encode: Callable[[list[str]], np.ndarray]) -> float:
        vectors = encode(self.unique)
        index = {s: i for i, s in enumerate(self.unique)}
        a = vectors[[index[s] for s in self.left]]
        b = vectors[[index[s] for s in self.right]]
        return spearman100(cosine_rows(a, b), self.gold)
