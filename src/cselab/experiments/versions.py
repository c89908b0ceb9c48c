"""The software a run was made with: Python, the libraries that decide the numbers, cselab's git commit."""
from __future__ import annotations

import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

# Distributions whose version can change a result (training, tokenisation, evaluation probes).
LIBRARIES = ("cselab", "torch", "transformers", "sentence-transformers", "tokenizers", "accelerate", "numpy",
             "scipy", "scikit-learn", "spacy", "nltk")


def git_commit(directory: Path) -> dict | None:
    """HEAD of the git checkout holding ``directory`` and whether its tree has changes; None if not in one."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def library_versions() -> dict:
    """Versions now; recorded into each run directory when it is trained and when it is evaluated."""
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    import cselab

    versions["git"] = git_commit(Path(cselab.__file__).resolve().parent)
    versions["executable"] = sys.executable
    versions["date"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    return versions
