"""Training corpora: text files (plain or .gz), CSV/TSV/JSONL columns, Hugging Face datasets, and
the offline default (WordNet usage examples). Lines are cleaned; what is skipped is counted by reason.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

# Longer lines are cut: the tokenizer keeps at most max_seq_len tokens anyway.
MAX_CHARS = 10_000
WORDNET_DIRS = ("/usr/share/wordnet",)


class CorpusError(ValueError):
    """The corpus cannot be read; the message names the file (and line where it applies)."""


@dataclass
class CorpusStats:
    source: str
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    cleaned: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        parts = [f"{self.kept} sentences from {self.source}"]
        if self.skipped:
            parts.append("skipped: " + ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())))
        if self.cleaned:
            parts.append("cleaned: " + ", ".join(f"{k} {v}" for k, v in sorted(self.cleaned.items())))
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"source": self.source, "kept": self.kept, "skipped": dict(self.skipped), "cleaned": dict(self.cleaned)}


def clean_line(line: str, stats: CorpusStats) -> str | None:
    """One sentence or None; every change and skip is counted in ``stats``."""
    if "\ufeff" in line:
        line = line.replace("\ufeff", "")
        stats.cleaned["bom"] += 1
    if "\x00" in line:
        line = line.replace("\x00", "")
        stats.cleaned["nul_bytes"] += 1
    if "\ufffd" in line:
        stats.cleaned["invalid_utf8"] += 1
    text = " ".join(line.split())  # folds \r, tabs and runs of spaces
    if not text:
        stats.skipped["empty"] += 1
        return None
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        stats.cleaned["truncated_long_line"] += 1
    return text


def _open_text(path: Path) -> io.TextIOBase:
    raw = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")


def _lines(path: Path) -> Iterator[str]:
    # newline="" splits on \n, \r\n and a lone \r (old Mac) alike and keeps the ending.
    with _open_text(path) as handle:
        for line in handle:
            yield line.rstrip("\r\n")


def _table_rows(path: Path, column: str | None) -> Iterator[str]:
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        key = column or "text"
        with _open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    yield ""
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
                if not isinstance(record, dict) or key not in record:
                    raise CorpusError(f"{path}:{number}: no key {key!r} (set data.column)")
                yield str(record[key] if record[key] is not None else "")
        return
    delimiter = "\t" if name.endswith(".tsv") else ","
    with _open_text(path) as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        fields = reader.fieldnames or []
        key = column or ("text" if "text" in fields else (fields[0] if len(fields) == 1 else None))
        if key is None or key not in fields:
            raise CorpusError(f"{path}:1: column {column or 'text'!r} not in header {fields} (set data.column)")
        for row in reader:
            yield row.get(key) or ""


def wordnet_examples(min_words: int = 5) -> Iterator[str]:
    """WordNet 3.0 usage examples (Debian's wordnet-base): natural English sentences, offline."""
    root = next((Path(d) for d in WORDNET_DIRS if (Path(d) / "data.noun").is_file()), None)
    if root is None:
        raise CorpusError("builtin:wordnet-glosses needs WordNet at /usr/share/wordnet "
                          "(apt-get install wordnet-base, or run scripts/setup.sh); or pass --corpus FILE")
    for pos in ("noun", "verb", "adj", "adv"):
        with open(root / f"data.{pos}", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header
                for part in line.split(" | ", 1)[1].split(";"):
                    part = part.strip()
                    if part.startswith('"'):
                        text = part.strip('" ')
                        if len(text.split()) >= min_words:
                            yield text


def iter_corpus(spec: str, column: str | None = None, stats: CorpusStats | None = None) -> Iterator[str]:
    """Stream cleaned sentences from ``spec``; counts go into ``stats``."""
    stats = stats if stats is not None else CorpusStats(spec)
    if spec == "builtin:wordnet-glosses":
        raw: Iterator[str] = wordnet_examples()
    elif spec.startswith("hf:"):
        raw = _hf_rows(spec[3:], column)
    else:
        path = Path(os.path.expanduser(spec))
        if not path.is_file():
            raise CorpusError(f"{spec}: corpus file not found")
        name = path.name.removesuffix(".gz")
        raw = _table_rows(path, column) if name.endswith((".csv", ".tsv", ".jsonl")) else _lines(path)
    for line in raw:
        text = clean_line(line, stats)
        if text is not None:
            stats.kept += 1
            yield text


def _hf_rows(name: str, column: str | None) -> Iterator[str]:
    """A Hugging Face dataset, ``NAME`` or ``NAME:SPLIT`` (needs the network or a local cache)."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise CorpusError(f"hf:{name}: needs the 'datasets' package (pip install 'cselab[data]')") from None
    dataset_name, _, split = name.partition(":")
    dataset = load_dataset(dataset_name, split=split or "train", streaming=True)
    key = column or "text"
    for row in dataset:
        if key not in row:
            raise CorpusError(f"hf:{name}: no column {key!r} (set data.column)")
        yield str(row[key] or "")


def read_corpus(spec: str, column: str | None = None, max_sentences: int | None = None,
                seed: int = 0) -> tuple[list[str], CorpusStats]:
    """All cleaned sentences (a seeded sample of ``max_sentences`` when the corpus is larger)."""
    stats = CorpusStats(spec)
    sentences = list(iter_corpus(spec, column, stats))
    if max_sentences is not None and len(sentences) > max_sentences:
        rng = random.Random(seed)
        keep = sorted(rng.sample(range(len(sentences)), max_sentences))
        stats.skipped["over_max_sentences"] += len(sentences) - max_sentences
        sentences = [sentences[i] for i in keep]
        stats.kept = len(sentences)
    if len(sentences) < 2:
        raise CorpusError(f"{spec}: needs at least 2 sentences, found {len(sentences)}")
    return sentences, stats
