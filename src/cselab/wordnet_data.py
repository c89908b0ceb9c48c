"""WordNet 3.0's database, shipped inside cselab and unpacked once where NLTK reads it.

cselab carries Princeton WordNet 3.0 (its licence allows redistribution with the notice, which is
packed with it) as ``resources/wordnet-3.0.tar.xz``, so that a plain ``pip install`` has the
default corpus and the WordNet augmenters without root or system packages. On first use the
archive is unpacked into ``<root>/corpora/wordnet/``, the layout of NLTK's
``WordNetCorpusReader``, where ``<root>`` is ``$NLTK_DATA`` (its first entry) or
``~/.cache/cselab/nltk_data``. Unpacking is atomic, so concurrent first uses are safe. Explicitly::

    python -m cselab.augment.wordnet --setup [--root DIR] [--force]
"""
from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

PACKED_ARCHIVE = Path(__file__).resolve().parent / "resources" / "wordnet-3.0.tar.xz"
DEFAULT_ROOT = Path("~/.cache/cselab/nltk_data")

# The files NLTK's reader opens (WordNetCorpusReader._FILES); lexnames is written by the packer.
DATABASE_FILES = ("cntlist.rev", "index.sense", "index.adj", "index.adv", "index.noun", "index.verb",
                  "data.adj", "data.adv", "data.noun", "data.verb", "adj.exc", "adv.exc", "noun.exc", "verb.exc")
_UNPACKED_FILES = (*DATABASE_FILES, "lexnames", "LICENSE")


class WordNetUnavailable(RuntimeError):
    """The shipped WordNet archive is missing or cannot be unpacked (the message says what to do)."""


def nltk_data_root() -> Path:
    """``$NLTK_DATA`` (first entry) if set, else ``~/.cache/cselab/nltk_data``."""
    env = os.environ.get("NLTK_DATA", "").split(os.pathsep)[0].strip()
    return Path(env).expanduser() if env else DEFAULT_ROOT.expanduser()


def is_complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in _UNPACKED_FILES)


def wordnet_dir(root: str | Path | None = None, force: bool = False) -> Path:
    """The unpacked WordNet directory under ``root``, unpacking the shipped archive on first use."""
    target = (Path(root).expanduser() if root else nltk_data_root()) / "corpora" / "wordnet"
    if is_complete(target) and not force:
        return target
    if not PACKED_ARCHIVE.is_file():
        raise WordNetUnavailable(f"{PACKED_ARCHIVE}: the WordNet archive shipped with cselab is missing; "
                                 "reinstall cselab (pip install --force-reinstall cselab)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _unpack_into(target, force)
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise WordNetUnavailable(f"cannot unpack WordNet into {target}: {exc}; "
                                 "set NLTK_DATA to a writable directory") from None
    return target


def _unpack_into(target: Path, force: bool) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        with tarfile.open(PACKED_ARCHIVE, "r:xz") as archive:
            archive.extractall(staging, filter="data")  # refuses links and paths outside staging
        unpacked = staging / "wordnet"
        if not is_complete(unpacked):
            raise tarfile.TarError(f"{PACKED_ARCHIVE} lacks some of {', '.join(_UNPACKED_FILES)}")
        if target.exists():
            if not force and is_complete(target):
                return  # another process finished first
            shutil.rmtree(target)
        try:
            os.replace(unpacked, target)
        except OSError:
            if not is_complete(target):  # not a concurrent first use that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
