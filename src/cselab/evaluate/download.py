"""``cselab data download``: fetch SentEval's data in its directory layout (and, as ``wiki1m``,
SimCSE's training corpus), safely.

The default source is the SimCSE authors' packaging of SentEval's downstream data (one tar with
every task in SentEval's layout, already preprocessed the way SentEval's get_transfer_data.bash
leaves it). The archive's size is checked against the server's Content-Length, its sha256 against
``--sha256`` when given (and printed either way so it can be pinned), every archive member is
checked before extraction (no absolute paths, no "..", no links or device files), and the result
must contain every file the evaluation reads.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import stat
import tarfile
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from cselab.errors import CselabError, counted
from cselab.file_writes import follow_umask_tree

DEFAULT_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar"
# SimCSE's unsupervised training corpus: 10^6 sentences sampled from English Wikipedia.
WIKI1M_URL = "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/wiki1m_for_simcse.txt"
WIKI1M_NAME = "wiki1m_for_simcse.txt"
BASE_MODEL_COMMAND = "huggingface-cli download bert-base-uncased"


def cselab_home() -> Path:
    """Where cselab keeps downloaded data; read at call time, so a changed $HOME is seen."""
    return Path.home() / ".cache" / "cselab"


def senteval_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The SentEval data directory, by the one rule every command follows (`cselab eval` and `cselab data`,
    training's model selection, sweeps, --paper-setting, `cselab data download`'s destination):
    ``explicit`` (--data-dir, data.dev_dir) when given, else $CSELAB_DATA when set, else
    ~/.cache/cselab/senteval. Where to look, not whether anything is there: each caller checks the files
    it needs, and none falls back to another place (they could then disagree about the data)."""
    chosen = explicit or os.environ.get("CSELAB_DATA") or cselab_home() / "senteval"
    return Path(chosen).expanduser()


def senteval_source() -> str:
    """Which input :func:`senteval_dir` took its answer from when none was given, for messages."""
    return "$CSELAB_DATA" if os.environ.get("CSELAB_DATA") else "the default place"


def default_wiki1m_path() -> Path:
    """Where `cselab data download wiki1m` puts the corpus and `--paper-setting` reads it ($CSELAB_WIKI1M)."""
    return Path(os.environ.get("CSELAB_WIKI1M") or cselab_home() / WIKI1M_NAME).expanduser()


class DownloadError(CselabError, RuntimeError):
    """The download or the archive is not what it should be."""


class UnreachableError(DownloadError):
    """The source could not be reached at all (no network, refused, no such host): nothing was fetched."""


class UnsafeArchiveError(DownloadError):
    """An archive member would be written outside the destination (or is a link/device)."""


def required_files() -> list[str]:
    """Every file a full test- or dev-split evaluation reads, relative to the data directory."""
    from cselab.evaluate import tasks as task_registry  # imports the scorers: not at CLI start-up

    needed: list[str] = []
    for split in task_registry.SPLITS:
        for name in task_registry.resolve("all", split):
            task = task_registry.TASKS.get(name)(data_dir=Path("."), split=split)
            needed += [f for f in task.relative_files() if f not in needed]
    return needed


def fetch(url: str, target: Path, progress: bool = True, timeout: float = 60) -> dict:
    """Stream ``url`` (http(s) or file://) to ``target``; returns bytes written, expected size and sha256.
    ``timeout``: seconds that connecting, or any one read, may take."""
    try:
        response = urllib.request.urlopen(url, timeout=timeout)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        raise UnreachableError(f"{url}: cannot download ({exc})") from None
    try:
        return _stream(response, url, target, progress)
    except (OSError, http.client.HTTPException) as exc:  # the connection broke off mid-file
        raise DownloadError(f"{url}: the download broke off ({exc}); run the command again") from None


def _stream(response, url: str, target: Path, progress: bool) -> dict:
    digest = hashlib.sha256()
    written = 0
    with response:
        length = response.headers.get("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=expected, unit="B", unit_scale=True, desc=f"download {Path(url).name}")
        with open(target, "wb") as handle:
            for block in iter(lambda: response.read(1 << 20), b""):
                handle.write(block)
                digest.update(block)
                written += len(block)
                if bar is not None:
                    bar.update(len(block))
        if bar is not None:
            bar.close()
    return {"bytes": written, "expected_bytes": expected, "sha256": digest.hexdigest()}


def _check_member_name(name: str, archive: Path) -> PurePosixPath:
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{archive}: member {name!r} has an absolute path; refusing to extract")
    if ".." in path.parts:
        raise UnsafeArchiveError(f"{archive}: member {name!r} points outside the destination; refusing to extract")
    return path


def _inside(root: Path, relative: PurePosixPath, archive: Path, name: str) -> None:
    resolved = (root / relative).resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeArchiveError(f"{archive}: member {name!r} resolves outside the destination; refusing to extract")


def check_archive(archive: Path, root: Path) -> None:
    """Refuse archives with members that could write outside ``root``: absolute, "..", links, devices."""
    root = root.resolve()
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                relative = _check_member_name(member.name, archive)
                if member.issym() or member.islnk():
                    raise UnsafeArchiveError(f"{archive}: member {member.name!r} is a link; refusing to extract")
                if not (member.isfile() or member.isdir()):
                    raise UnsafeArchiveError(f"{archive}: member {member.name!r} is not a regular file or directory")
                _inside(root, relative, archive, member.name)
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zipped:
            for info in zipped.infolist():
                relative = _check_member_name(info.filename, archive)
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise UnsafeArchiveError(f"{archive}: member {info.filename!r} is a link; refusing to extract")
                _inside(root, relative, archive, info.filename)
    else:
        raise DownloadError(f"{archive}: not a tar or zip archive")


def safe_extract(archive: Path, root: Path) -> None:
    """Extract after :func:`check_archive`; tarfile's "data" filter is a second guard."""
    try:
        check_archive(archive, root)
        root.mkdir(parents=True, exist_ok=True)
        if tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tar:
                tar.extractall(root, filter="data")
        else:
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(root)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise DownloadError(f"{archive}: damaged archive ({exc}); download it again") from None


def find_layout_root(folder: Path, depth: int = 3) -> Path | None:
    """The directory holding SentEval's layout (``STS/STSBenchmark``) inside an extracted archive."""
    candidates = [folder]
    for _ in range(depth + 1):
        for candidate in candidates:
            if (candidate / "STS" / "STSBenchmark").is_dir():
                return candidate
        candidates = [c for parent in candidates for c in sorted(parent.iterdir()) if c.is_dir()]
    return None


def download(dest: Path | None = None, url: str = DEFAULT_URL, sha256: str | None = None, force: bool = False,
             fetcher: Callable[[str, Path], dict] | None = None, progress: bool = True) -> dict:
    """Download, verify and unpack SentEval's data into ``dest`` (default: :func:`senteval_dir`, where every
    command looks); returns what was done."""
    dest = senteval_dir(dest)
    needed = required_files()
    if not force and dest.is_dir() and all((dest / f).is_file() for f in needed):
        return {"dest": str(dest), "status": "already complete", "files": len(needed)}
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".cselab-download-", dir=dest.parent) as work:
        work_dir = Path(work)
        archive = work_dir / (Path(url).name or "senteval.tar")
        fetched = (fetcher or (lambda u, t: fetch(u, t, progress=progress)))(url, archive)
        _check_fetched(fetched, url, sha256)
        staging = work_dir / "unpacked"
        safe_extract(archive, staging)
        root = find_layout_root(staging)
        if root is None:
            raise DownloadError(f"{url}: the archive has no STS/STSBenchmark directory (not SentEval's layout)")
        absent = [f for f in needed if not (root / f).is_file()]
        if absent:
            more = f" and {counted(len(absent) - 1, 'more file')}" if len(absent) > 1 else ""
            raise DownloadError(f"{url}: the archive lacks {absent[0]}{more}")
        follow_umask_tree(root)  # an archive's members come with its modes, not the user's umask
        dest.mkdir(parents=True, exist_ok=True)
        for item in root.iterdir():
            target = dest / item.name
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            shutil.move(str(item), str(target))
    return {"dest": str(dest), "status": "downloaded", "files": len(needed), "bytes": fetched["bytes"],
            "sha256": fetched["sha256"], "url": url}


def download_file(dest: Path, url: str = WIKI1M_URL, sha256: str | None = None, force: bool = False,
                  fetcher: Callable[[str, Path], dict] | None = None, progress: bool = True) -> dict:
    """Download one file (the wiki1m corpus) to ``dest``: streamed into a partial file beside it, size
    and digest checked, then renamed, so ``dest`` is either absent or complete."""
    dest = Path(dest).expanduser()
    if dest.is_dir():
        raise IsADirectoryError(21, "Is a directory (--dest must name a file)", str(dest))
    if not force and dest.is_file() and dest.stat().st_size > 0:
        return {"dest": str(dest), "status": "already there", "bytes": dest.stat().st_size}
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        fetched = (fetcher or (lambda u, t: fetch(u, t, progress=progress)))(url, partial)
        _check_fetched(fetched, url, sha256)
        if fetched["bytes"] == 0:
            raise DownloadError(f"{url}: the server sent an empty file")
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    return {"dest": str(dest), "status": "downloaded", "bytes": fetched["bytes"], "sha256": fetched["sha256"],
            "url": url}


def _check_fetched(fetched: dict, url: str, sha256: str | None) -> None:
    if fetched.get("expected_bytes") is not None and fetched["bytes"] != fetched["expected_bytes"]:
        raise DownloadError(f"{url}: got {counted(fetched['bytes'], 'byte')}, the server announced "
                            f"{fetched['expected_bytes']} (interrupted download?); run the command again")
    if sha256 and fetched["sha256"].lower() != sha256.lower():
        raise DownloadError(f"{url}: sha256 {fetched['sha256']} does not match the expected {sha256}")


def check(data_dir: Path) -> dict[str, list[str]]:
    """Per split, which tasks' files are present and which are missing."""
    from cselab.evaluate import tasks as task_registry

    report: dict[str, list[str]] = {}
    for split in task_registry.SPLITS:
        for name in task_registry.resolve("all", split):
            task = task_registry.TASKS.get(name)(data_dir=Path(data_dir), split=split)
            report.setdefault(f"{split}: ok" if not task.missing_files() else f"{split}: missing", []).append(name)
    return report


