"""Training corpora: text files (plain or .gz), CSV/TSV/JSONL columns, Hugging Face datasets, and
the offline default (WordNet usage examples). Lines are cleaned; what is skipped is counted by reason.

Bad input never crashes the reader: a line ends at \\n, \\r\\n or a lone \\r; invalid UTF-8 becomes
U+FFFD, BOMs, NUL bytes and control characters are removed, whitespace runs become one space,
over-long lines are cut, and each of these is counted in ``CorpusStats.cleaned``. Lines left
empty, invalid JSONL records, non-string values and rows missing their column are skipped and
counted in ``CorpusStats.skipped``. Only a file that cannot be read as a whole (missing, a
truncated or corrupt gzip stream, a wrong column name) is a ``CorpusError`` naming the file and line.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import itertools
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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

    def sample_note(self) -> str | None:
        """The line printed before training when a cap left sentences out (never silently)."""
        left_out = self.skipped.get("over_max_sentences", 0)
        if not left_out:
            return None
        return (f"corpus: training on a seeded sample of {self.kept} of {self.kept + left_out} sentences of "
                f"{self.source} (data.max_sentences; --set data.max_sentences=null for all)")

    def to_dict(self) -> dict:
        return {"source": self.source, "kept": self.kept, "skipped": dict(self.skipped), "cleaned": dict(self.cleaned)}


# C0/C1 control characters other than whitespace (which str.split folds anyway).
_CONTROL = re.compile("[\x01-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


def clean_line(line: str, stats: CorpusStats) -> str | None:
    """One sentence or None; every change and skip is counted in ``stats``."""
    if "\ufeff" in line:
        line = line.replace("\ufeff", "")
        stats.cleaned["bom"] += 1
    if "\x00" in line:
        line = line.replace("\x00", "")
        stats.cleaned["nul_bytes"] += 1
    if _CONTROL.search(line):
        line = _CONTROL.sub("", line)
        stats.cleaned["control_chars"] += 1
    text = " ".join(line.split())  # folds tabs, form feeds and runs of spaces
    if not text:
        stats.skipped["empty"] += 1
        return None
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS]
        stats.cleaned["truncated_long_line"] += 1
    return text


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _decode(raw: bytes, stats: CorpusStats) -> str:
    """UTF-8, with each invalid byte sequence replaced by U+FFFD and the line counted."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        stats.cleaned["invalid_utf8"] += 1
        return raw.decode("utf-8", errors="replace")


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def is_utf16(path: Path) -> bool:
    """Whether the (decompressed) file starts with a UTF-16 byte-order mark (Windows' "Unicode")."""
    try:
        with _open_binary(path) as handle:
            return handle.read(2) in UTF16_BOMS
    except (OSError, EOFError, zlib.error):
        return False


def _utf16_lines(handle) -> Iterator[bytes]:
    """The lines of a UTF-16 stream as UTF-8 bytes, decoded block by block (memory stays flat)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")  # the BOM gives the byte order
    pending = b""
    for block in itertools.chain(iter(lambda: handle.read(1 << 16), b""), [None]):  # None: the end
        pending += (decoder.decode(block) if block is not None else decoder.decode(b"", final=True)).encode("utf-8")
        *lines, pending = pending.split(b"\n")
        yield from (line + b"\n" for line in lines)
    if pending:
        yield pending


def _raw_lines(path: Path) -> Iterator[bytes]:
    """Byte lines split at \\n, \\r\\n and a lone \\r (old Mac); a broken gzip stream is a CorpusError.
    A file that starts with a UTF-16 byte-order mark is decoded as UTF-16 and read as UTF-8."""
    number = 0
    try:
        with _open_binary(path) as handle:
            utf16 = handle.read(2) in UTF16_BOMS
            handle.seek(0)
            for chunk in _utf16_lines(handle) if utf16 else handle:
                for piece in chunk.removesuffix(b"\n").removesuffix(b"\r").split(b"\r"):
                    number += 1
                    yield piece
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CorpusError(f"{path}:{number + 1}: gzip data is truncated or corrupt ({exc}); "
                          f"{number} lines were readable") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _lines(path: Path, stats: CorpusStats) -> Iterator[str]:
    for raw in _raw_lines(path):
        yield _decode(raw, stats)


def _text_stream(path: Path, stats: CorpusStats) -> Iterator[str]:
    """Lines with their endings normalised to \\n, for the csv module (which needs one stream)."""
    for raw in _raw_lines(path):
        yield _decode(raw, stats) + "\n"


def _table_rows(path: Path, column: str | None, stats: CorpusStats) -> Iterator[str | None]:
    """The text column of each record; None for a record skipped (and counted) here."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        key = column or "text"
        for number, line in enumerate(_lines(path, stats), start=1):
            if not line.strip():
                yield ""
                continue
            try:
                record = json.loads(line)
            except ValueError:  # e.g. the last record of a file whose writer was killed
                stats.skipped["invalid_json"] += 1
                yield None
                continue
            if not isinstance(record, dict):
                stats.skipped["not_a_json_object"] += 1
                yield None
            elif key not in record:
                raise CorpusError(f"{path}:{number}: no key {key!r} in {sorted(record)[:10]} (set data.column)")
            elif record[key] is None:
                yield ""
            elif not isinstance(record[key], str):
                stats.skipped["not_a_string"] += 1
                yield None
            else:
                yield record[key]
        return
    delimiter = "\t" if name.endswith(".tsv") else ","
    reader = csv.reader(_text_stream(path, stats), delimiter=delimiter)
    try:
        fields = next(reader)
    except StopIteration:
        raise CorpusError(f"{path}:1: empty file, expected a header row") from None
    except csv.Error as exc:
        raise CorpusError(f"{path}:1: unreadable header ({exc})") from None
    key = column or ("text" if "text" in fields else (fields[0] if len(fields) == 1 else None))
    if key is None or key not in fields:
        raise CorpusError(f"{path}:1: column {column or 'text'!r} not in header {fields} (set data.column)")
    index = fields.index(key)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error:  # e.g. a field over the csv module's size limit
            stats.skipped["unreadable_row"] += 1
            yield None
            continue
        if not row:
            yield ""
        elif index >= len(row):
            stats.skipped["missing_column"] += 1
            yield None
        else:
            yield row[index]


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
        raw = _table_rows(path, column, stats) if name.endswith((".csv", ".tsv", ".jsonl")) else _lines(path, stats)
    for line in raw:
        if line is None:
            continue  # skipped and counted by the reader
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


def corpus_fingerprint(sentences: Sequence[str]) -> str:
    """SHA-256 of the cleaned sentences in order: a resume can tell the corpus changed under it."""
    if hasattr(sentences, "fingerprint"):
        return sentences.fingerprint()  # a file-backed corpus knows its identity without reading it all
    digest = hashlib.sha256()
    for sentence in sentences:
        digest.update(sentence.encode("utf-8", errors="surrogatepass") + b"\n")
    return digest.hexdigest()
