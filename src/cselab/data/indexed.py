"""Corpora larger than memory: a plain text file read through an on-disk index of line offsets.

The index (one uint64 offset per kept sentence, memory-mapped) is built once per file version
and cached; a sentence is read and cleaned when a batch asks for it. Memory stays flat however
large the file is, and shuffling stays exact and resumable because any line can be reached.

Every other source (``.gz``, CSV/TSV/JSONL, ``hf:`` datasets, ``builtin:``) is first streamed
once into a cached plain text file of its cleaned sentences (:func:`spool`), then read the same
way, so no source is ever held in memory whole. :func:`read_corpus` is the entry point: any
source, as the sentences a run trains on.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from cselab.data.corpus import CorpusError, CorpusStats, clean_line, decode_line, is_file, iter_corpus, text_encoding
from cselab.file_writes import replace_atomically, write_text_atomically

# Part of every index and spool cache key: a reader change (UTF-8 is now checked, not replaced)
# must not reuse what an older one cached.
READER_VERSION = "2"


def cache_dir(kind: str = "line-index") -> Path:
    """``$CSELAB_CACHE/KIND`` (default ``~/.cache/cselab/KIND``): every on-disk cache of cselab.data."""
    return Path(os.environ.get("CSELAB_CACHE", Path.home() / ".cache" / "cselab")) / kind


def _version_key(path: Path, extra: str = "") -> str:
    """A cache key for this version of the file: its path, size and modification time."""
    info = path.stat()
    version = f"{path.resolve()}|{info.st_size}|{info.st_mtime_ns}" + (f"|{extra}" if extra else "")
    return hashlib.sha256(version.encode()).hexdigest()[:24]


def own_part(path: Path) -> Path:
    """This process's temporary name for ``path``: processes of one run may write the same cache file
    at once, each then moves its own finished copy into place."""
    return path.with_name(f".{path.name}.{os.getpid()}.part")


def _add_saved_counts(stats: CorpusStats, stats_file: Path) -> None:
    saved = json.loads(stats_file.read_text())
    stats.kept += saved["kept"]
    stats.skipped.update(saved["skipped"])
    stats.cleaned.update(saved["cleaned"])
    stats.column = saved.get("column")


def spool(spec: str, column: str | None) -> tuple[Path, CorpusStats]:
    """The cleaned sentences of ``spec``, one per line, in a cached text file, and the reader's counts.

    The cache key is the source (a file's path, size and modification time; a dataset's name) and
    the column. A ``hf:`` dataset is fetched once per name and column: delete its files under
    ``$CSELAB_CACHE/spooled`` (default ``~/.cache/cselab/spooled``) to fetch a newer version."""
    path = Path(os.path.expanduser(spec))
    if not spec.startswith(("hf:", "builtin:")) and is_file(path):
        key = _version_key(path, f"{column}|{READER_VERSION}")
    else:
        key = hashlib.sha256(f"{spec}|{column}|{READER_VERSION}".encode()).hexdigest()[:24]
    text_file, stats_file = cache_dir("spooled") / f"{key}.txt", cache_dir("spooled") / f"{key}.stats.json"
    if not (text_file.is_file() and stats_file.is_file()):
        text_file.parent.mkdir(parents=True, exist_ok=True)
        stats = CorpusStats(spec)
        part = own_part(text_file)
        try:
            with open(part, "w", encoding="utf-8", errors="surrogatepass") as out:
                for sentence in iter_corpus(spec, column, stats):  # cleaned: no line breaks inside
                    out.write(sentence + "\n")
            write_text_atomically(stats_file, json.dumps(stats.to_dict()))  # the counts first: whoever
            os.replace(part, text_file)  # sees the text sees its counts
        finally:
            part.unlink(missing_ok=True)
    stats = CorpusStats(spec)
    _add_saved_counts(stats, stats_file)
    return text_file, stats


def content_digest(path: Path) -> str:
    """SHA-256 of the file's bytes, computed once per file version (path, size, mtime) and cached."""
    cached = cache_dir("digests") / f"{_version_key(path)}.sha256"
    try:
        return cached.read_text(encoding="ascii").strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(cached, digest.hexdigest())
    return digest.hexdigest()


class IndexedTextCorpus(Sequence[str]):
    """A read-only sequence of the cleaned, non-empty lines of a UTF-8 text file."""

    def __init__(self, path: str | os.PathLike, stats: CorpusStats | None = None, progress: bool = False):
        self.path = Path(path)
        self.stats = stats if stats is not None else CorpusStats(str(path))
        with open(self.path, "rb"):  # a file unreadable now fails here, not at the first batch (cached index)
            pass
        key = _version_key(self.path, READER_VERSION)
        index_file = cache_dir() / f"{key}.offsets.npy"
        stats_file = cache_dir() / f"{key}.stats.json"
        if not (index_file.is_file() and stats_file.is_file()):
            self._build(index_file, stats_file, progress)
        _add_saved_counts(self.stats, stats_file)
        self.offsets = np.load(index_file, mmap_mode="r", allow_pickle=False)
        self._handle = None

    def _build(self, index_file: Path, stats_file: Path, progress: bool) -> None:
        index_file.parent.mkdir(parents=True, exist_ok=True)
        text_encoding(self.path)  # UTF-32 or BOM-less UTF-16 is refused before any work
        stats = CorpusStats(str(self.path))
        tmp = own_part(index_file.with_suffix(".offsets"))
        try:
            with open(tmp, "wb") as out:
                self._write_offsets(out, stats, progress)
            offsets = np.fromfile(tmp, dtype=np.uint64)
        finally:
            tmp.unlink(missing_ok=True)  # also when a line is not UTF-8: no stray part file in the cache
        write_text_atomically(stats_file, json.dumps(stats.to_dict()))  # the counts first: whoever sees
        with replace_atomically(index_file, "wb") as handle:  # the index sees its counts too
            np.save(handle, offsets, allow_pickle=False)

    def _write_offsets(self, out, stats: CorpusStats, progress: bool) -> None:
        """One pass over the file: the byte offset of every kept line into ``out`` (uint64), counts into ``stats``."""
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.path.stat().st_size, unit="B", unit_scale=True, desc=f"index {self.path.name}")
        buffer: list[int] = []
        number = offset = 0
        with open(self.path, "rb") as handle:
            for chunk in handle:
                # The same splitting as the in-memory reader: \n, \r\n and a lone \r end a line.
                piece_offset = offset
                for piece in chunk.removesuffix(b"\n").removesuffix(b"\r").split(b"\r"):
                    number += 1
                    if clean_line(decode_line(piece, f"{self.path}:{number}"), stats) is not None:
                        stats.kept += 1
                        buffer.append(piece_offset)
                    piece_offset += len(piece) + 1
                offset += len(chunk)
                if len(buffer) >= 1 << 16:
                    out.write(np.asarray(buffer, dtype=np.uint64).tobytes())
                    buffer.clear()
                if bar is not None:
                    bar.update(len(chunk))
        out.write(np.asarray(buffer, dtype=np.uint64).tobytes())
        if bar is not None:
            bar.close()

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if self._handle is None:
            self._handle = open(self.path, "rb")  # one handle per process (data-loader workers fork)
        self._handle.seek(int(self.offsets[i]))
        line = self._handle.readline()
        cut = line.find(b"\r")
        if cut != -1:
            line = line[:cut]
        return clean_line(line.removesuffix(b"\n").decode("utf-8", errors="replace"), CorpusStats("")) or ""

    def approximate_lengths(self) -> np.ndarray:
        """Byte distance to the next kept line: the line's length (plus any skipped lines)."""
        ends = np.append(self.offsets[1:], self.path.stat().st_size).astype(np.int64)
        return ends - self.offsets.astype(np.int64)

    def fingerprint(self) -> str:
        """Identity of the file's content and of the kept lines (a sample keeps fewer): touching or
        moving the file keeps it, editing it changes it."""
        digest = hashlib.sha256(f"{self.path.stat().st_size}|{content_digest(self.path)}".encode())
        digest.update(np.ascontiguousarray(self.offsets).tobytes())
        return digest.hexdigest()

    def select(self, rows: np.ndarray) -> IndexedTextCorpus:
        """The same corpus restricted to ``rows`` (a sample), still read lazily."""
        subset = copy.copy(self)
        subset.offsets = np.asarray(self.offsets[np.sort(rows)])
        subset._handle = None
        return subset

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self)):
            yield self[i]

    def __getstate__(self):  # picklable for worker processes: reopen the file there
        state = dict(self.__dict__)
        state["_handle"] = None
        return state


def _is_plain_text_file(spec: str) -> bool:
    """UTF-8 text read in place through the line index; anything else (UTF-16 too) is spooled first.
    A file in an encoding cselab does not read (UTF-32, ...) is a CorpusError here, before any work."""
    path = Path(os.path.expanduser(spec))
    return (not spec.startswith(("builtin:", "hf:")) and is_file(path)
            and not path.name.endswith((".gz", ".csv", ".tsv", ".jsonl")) and text_encoding(path) == "utf-8")


def read_corpus(spec: str, column: str | None = None, max_sentences: int | None = None,
                seed: int = 0) -> tuple[Sequence[str], CorpusStats]:
    """All cleaned sentences (a seeded sample of ``max_sentences`` when the corpus is larger; None: all,
    whatever the source; the builtin corpus's default cap is the config's, ``data.max_sentences: auto``).

    Read lazily through an on-disk line index (``data/indexed.py``): a plain text file directly,
    any other source after one streaming pass into a cached text file. Memory stays flat for
    corpora of any size and format.
    """
    stats = CorpusStats(spec)
    try:
        if _is_plain_text_file(spec):
            sentences: Sequence[str] = IndexedTextCorpus(os.path.expanduser(spec), stats)
        else:
            text_file, stats = spool(spec, column)
            sentences = IndexedTextCorpus(text_file)  # counts are the source's, not the spooled file's
    except OSError as exc:  # the corpus, or the cache beside it
        where = f": {exc.filename}" if exc.filename and str(exc.filename) != os.path.expanduser(spec) else ""
        raise CorpusError(f"{spec}: cannot read ({exc.strerror or exc}{where})") from None
    keep = sample_rows(len(sentences), max_sentences, seed)
    if keep is not None:
        stats.skipped["over_max_sentences"] += len(sentences) - max_sentences
        sentences = sentences.select(keep) if hasattr(sentences, "select") else [sentences[i] for i in keep]
        stats.kept = len(sentences)
    if len(sentences) < 2:
        skipped = f" ({stats.summary().split('; ', 1)[1]})" if stats.skipped or stats.cleaned else ""
        raise CorpusError(f"{spec}: needs at least 2 sentences, found {len(sentences)}{skipped}")
    return sentences, stats


def sample_rows(total: int, max_sentences: int | None, seed: int) -> list[int] | None:
    """The rows a cap of ``max_sentences`` keeps (a seeded sample, in order); None: every row."""
    if max_sentences is None or total <= max_sentences:
        return None
    return sorted(random.Random(seed).sample(range(total), max_sentences))


def left_out_lines(spec: str, column: str | None, max_sentences: int | None, seed: int, count: int) -> list[str]:
    """Up to ``count`` lines (a seeded pick) that the cap ``max_sentences`` leaves out of training; [] when
    the cap leaves none out."""
    if max_sentences is None:
        return []
    every, _ = read_corpus(spec, column)
    keep = sample_rows(len(every), max_sentences, seed)
    if keep is None:
        return []
    kept = set(keep)
    rest = [row for row in range(len(every)) if row not in kept]
    return [every[row] for row in sorted(random.Random(seed).sample(rest, min(count, len(rest))))]
