"""How cselab writes a file: whole or not at all, with the permissions the user's umask gives.

A file a program opens for writing gets ``0666 & ~umask`` (a folder ``0777 & ~umask``): with the usual
umask 022, others may read it, so a shared model loads for everyone. Three ways of writing ignore the
umask, and what they write is given the mode an ordinary ``open()`` would have given it
(:func:`follow_umask`): ``tempfile``'s files and folders (0600, 0700), safetensors' writer (0600, used by
transformers and sentence-transformers too) and an archive's members (the archive's modes).
:func:`replace_atomically` is the temporary-then-rename write: readers see the old file or the new one,
never half of one.
"""
from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def current_umask() -> int:
    """The process's umask. Linux tells it in /proc; elsewhere it is read by setting it, which leaves a
    moment in which a file another thread creates would get the wrong mode."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def umask_mode(directory: bool = False) -> int:
    """The mode ``open()`` (``mkdir()`` for a folder) gives a new file under the current umask."""
    return (0o777 if directory else 0o666) & ~current_umask()


def follow_umask(*paths: str | os.PathLike) -> None:
    """Give each file or folder the mode the umask gives a new one (a symbolic link is left alone)."""
    for path in map(Path, paths):
        if not path.is_symlink():
            os.chmod(path, umask_mode(path.is_dir()))


def follow_umask_tree(root: str | os.PathLike) -> None:
    """:func:`follow_umask` on ``root`` and everything under it (an unpacked archive, a staged folder)."""
    root = Path(root)
    follow_umask(root, *root.rglob("*"))


@contextlib.contextmanager
def replace_atomically(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                       durable: bool = False) -> Iterator[IO]:
    """A new file beside ``path`` to write into (``mode`` ``"w"`` or ``"wb"``), renamed over ``path`` once
    the block ends, removed if it fails. Its name is unique per call, so two writers of one file never
    write into, or rename away, each other's file. ``durable``: on disk (fsync) before the rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    binary = "b" in mode
    try:
        with open(tmp, "xb" if binary else "x", encoding=None if binary else encoding) as handle:
            yield handle
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | os.PathLike, text: str, durable: bool = False) -> None:
    """``path`` replaced by ``text`` (UTF-8) whole: see :func:`replace_atomically`."""
    with replace_atomically(path, durable=durable) as handle:
        handle.write(text)
