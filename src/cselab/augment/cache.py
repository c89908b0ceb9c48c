"""Reading augmentations precomputed by ``cselab augment`` (AugCSE augments once, then trains).

``cached`` looks each sentence up in a jsonl file of ``{"original", "augmented", "augmentation",
"changed"}`` lines. ``augmentation`` keeps only lines of that augmenter (a file written with
``--aug a,b`` holds both); ``augmenter: {name: ...}`` augments sentences missing from the cache
(without it they come back unchanged). When a sentence has several cached outputs, ``choose:
first`` (default, AugCSE's fixed sampling) takes the first, ``choose: random`` draws one per
(seed, sentence).
"""
from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

from cselab.augment.base import register_augmenter, sentence_seed
from cselab.augment.compose import build_spec


class CacheFileError(ValueError):
    """A malformed line in an augmentation cache file."""


def read_cache(path: str | Path, augmentation: str | None = None) -> dict[str, list[str]]:
    """original -> augmented texts, in file order. A torn (unterminated, unparsable) last line is ignored."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"{path}: augmentation cache not found (write it with `cselab augment`)")
    table: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    torn_last = lines and lines[-1] != ""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            original, augmented = record["original"], record["augmented"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            if torn_last and number == len(lines):
                warnings.warn(f"{path}:{number}: ignoring a torn last line (an interrupted `cselab augment`)",
                              stacklevel=2)
                continue
            raise CacheFileError(f"{path}:{number}: not a cache line with 'original' and 'augmented' ({exc})") from None
        if augmentation is not None and record.get("augmentation") != augmentation:
            continue
        table.setdefault(original, []).append(augmented)
    return table


@register_augmenter
class Cached:
    name = "cached"
    tag = "possibly-altering"  # per instance: the tag of the cached augmenter when known
    description = "look augmentations up in a `cselab augment` jsonl (params: path, augmentation, augmenter)"

    def __init__(self, path: str, augmentation: str | None = None, augmenter: Any = None, choose: str = "first"):
        if choose not in ("first", "random"):
            raise ValueError(f"cached: 'choose' must be 'first' or 'random', got {choose!r}")
        self.path = str(path)
        self.augmentation = augmentation
        self.choose = choose
        self.table = read_cache(path, augmentation)
        if not self.table:
            warnings.warn(f"{path}: no cached augmentations" + (f" named {augmentation!r}" if augmentation else ""),
                          stacklevel=2)
        self.fallback = None if augmenter is None else build_spec(augmenter, "cached.augmenter")
        if self.fallback is not None:
            self.tag = getattr(self.fallback, "tag", self.tag)
        elif augmentation:
            from cselab.augment import AUGMENTERS, load_all

            load_all()
            if augmentation in AUGMENTERS:
                self.tag = getattr(AUGMENTERS.get(augmentation), "tag", self.tag)
        self.hits = 0
        self.misses = 0
        self._rng = random.Random(0)

    def augment(self, sentences: list[str], seed: int) -> list[str]:
        out = list(sentences)
        missing = []
        for i, sentence in enumerate(sentences):
            options = self.table.get(sentence)
            if not options:
                missing.append(i)
            elif len(options) == 1 or self.choose == "first":
                out[i] = options[0]
            else:
                self._rng.seed(sentence_seed(seed, sentence))
                out[i] = options[self._rng.randrange(len(options))]
        self.hits += len(sentences) - len(missing)
        self.misses += len(missing)
        if missing and self.fallback is not None:
            for i, text in zip(missing, self.fallback.augment([sentences[i] for i in missing], seed), strict=True):
                out[i] = text
        return out
