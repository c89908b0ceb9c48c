"""Embedding each unique sentence once per run, with an on-disk cache per model and task.

The cache file of a task is ``<cache>/<model key>/<task>-<data key>.npy`` (plain float32 arrays,
read with ``allow_pickle=False``): the model key covers the weights (path, sizes, mtimes), pooler,
precision and sequence length; the data key covers the bytes of the task's files. A re-run, or a
run interrupted after some tasks, reuses finished tasks instead of encoding again.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from cselab.errors import counted
from cselab.file_writes import replace_atomically

log = logging.getLogger(__name__)

# Bump when readers or scoring inputs change so old cache entries are not reused.
CACHE_FORMAT = "cselab-eval-1"


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns sentences into one row of floats each can be evaluated."""

    def encode(self, sentences: list[str]) -> np.ndarray: ...


def default_cache_dir() -> Path:
    base = os.environ.get("CSELAB_CACHE") or str(Path.home() / ".cache" / "cselab")
    return Path(base) / "embeddings"


_file_hashes: dict[tuple[str, int, int], str] = {}


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (memoised by path, size and mtime within the process)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _file_hashes:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _file_hashes[key] = digest.hexdigest()
    return _file_hashes[key]


def data_key(files: Iterable[Path]) -> str:
    digest = hashlib.sha256(CACHE_FORMAT.encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + file_digest(path).encode())
    return digest.hexdigest()[:16]


class EmbeddingStore:
    """Embeds sentences task by task: memory first (this run), then the disk cache, then the encoder."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], model_key: str | None = None,
                 cache_dir: Path | None = None):
        self.encode = encode
        self.folder = Path(cache_dir) / model_key if (cache_dir is not None and model_key) else None
        self.memory: dict[str, np.ndarray] = {}
        self.stats = {"encoded": 0, "from_memory": 0, "from_cache": 0, "cache_files_written": 0}

    def cache_path(self, task_name: str, files: list[Path]) -> Path | None:
        return None if self.folder is None else self.folder / f"{task_name}-{data_key(files)}.npy"

    def embed(self, task_name: str, files: list[Path], sentences: list[str]) -> np.ndarray:
        """Rows for ``sentences`` (unique, in the given order)."""
        path = self.cache_path(task_name, files)
        if path is not None and path.is_file():
            try:
                cached = np.load(path, allow_pickle=False)
            except (ValueError, OSError) as exc:
                log.warning("ignoring unreadable cache file %s (%s)", path, exc)
            else:
                if cached.ndim == 2 and cached.shape[0] == len(sentences):
                    self.stats["from_cache"] += len(sentences)
                    self.memory.update(zip(sentences, cached, strict=True))
                    return cached
                log.warning("ignoring cache file %s: %s rows for %d sentences", path, cached.shape, len(sentences))
        todo = [s for s in sentences if s not in self.memory]
        self.stats["from_memory"] += len(sentences) - len(todo)
        if todo:
            vectors = np.asarray(self.encode(todo), dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != len(todo):
                raise ValueError(f"encoder returned shape {vectors.shape} for {counted(len(todo), 'sentence')}")
            self.memory.update(zip(todo, vectors, strict=True))
            self.stats["encoded"] += len(todo)
        result = np.stack([self.memory[s] for s in sentences]) if sentences else np.zeros((0, 0), np.float32)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # atomic: an interrupted write never leaves a half file (np.save on a handle keeps the exact name)
            with replace_atomically(path, "wb") as handle:
                np.save(handle, result, allow_pickle=False)
            self.stats["cache_files_written"] += 1
        return result


class SentenceLookup:
    """Maps sentences to rows of one task's embedding matrix."""

    def __init__(self, sentences: list[str], vectors: np.ndarray):
        self.index = {s: i for i, s in enumerate(sentences)}
        self.vectors = vectors

    def __call__(self, sentences: list[str]) -> np.ndarray:
        return self.vectors[[self.index[s] for s in sentences]]
