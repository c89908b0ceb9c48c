"""Loading the encoders to evaluate (cselab, sentence-transformers or plain Hugging Face) and keying their cache."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np

from cselab.errors import UnknownNameError
from cselab.evaluate.embeddings import CACHE_FORMAT
from cselab.model.card import CARD, EVAL_RESULTS
from cselab.run_files import CHECKPOINTS, EVAL_FILE, RUN_CONFIG, SUMMARY, SWEEP_FILE, VERSIONS

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".json", ".txt", ".model")
# Files written beside a model that change without the weights changing: a training run's and a sweep's,
# and the card with the results `cselab eval --update-card` records in it.
RUN_FILES = (SUMMARY, RUN_CONFIG, VERSIONS, SWEEP_FILE, CARD, EVAL_RESULTS)


def _is_model_file(file: Path, root: Path) -> bool:
    relative = file.relative_to(root)
    return (file.suffix in WEIGHT_SUFFIXES and len(relative.parts) <= 3
            and CHECKPOINTS not in relative.parts and file.name not in RUN_FILES
            and not fnmatchcase(file.name, EVAL_FILE.format(split="*")))


def weights_fingerprint(path: Path) -> str | None:
    """Hash of the names, sizes and mtimes of a model directory's weight/config files (None if not a directory)."""
    if not path.is_dir():
        return None
    entries = []
    for file in sorted(path.rglob("*")):
        if file.is_file() and _is_model_file(file, path):
            stat = file.stat()
            entries.append([str(file.relative_to(path)), stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


@dataclass
class LoadedModel:
    """An encoder with the settings it is evaluated with."""

    name: str
    path: str
    encoder: object
    pooler: str
    max_seq_len: int
    precision: str = "fp32"
    batch_size: int = 128
    fingerprint: str | None = None
    show_progress: bool = True
    details: dict = field(default_factory=dict)

    def encode(self, sentences: list[str]) -> np.ndarray:
        return self.encoder.encode(sentences, batch_size=self.batch_size, precision=self.precision,
                                   show_progress=self.show_progress and len(sentences) > self.batch_size)

    @property
    def cache_key(self) -> str | None:
        """Directory name of this model's cache entries; None when the weights cannot be fingerprinted."""
        if self.fingerprint is None:
            return None
        parts = [CACHE_FORMAT, str(Path(self.path).resolve()), self.fingerprint, self.pooler,
                 str(self.max_seq_len), self.precision]
        digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]
        readable = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.name).name or "model")
        return f"{readable}-{digest}"

    def describe(self) -> dict:
        return {"model": self.name, "path": self.path, "pooler": self.pooler, "max_seq_len": self.max_seq_len,
                "precision": self.precision, **self.details}


def load_model(name_or_path: str, pooler: str = "auto", max_seq_len: int | None = None,
               precision: str = "fp32", batch_size: int = 128, device=None) -> LoadedModel:
    """``cselab.load`` with evaluation settings: by default no truncation below the model's own limit.

    ``device``: a torch device (default: the CPU); ``precision``: fp32, bf16, fp16, or auto, resolved
    here for the device (hardware.py), so results and cached embeddings name the precision used.
    """
    import torch

    import cselab
    from cselab.hardware import PRECISIONS, choose_precision
    from cselab.model.encoder import usable_length
    from cselab.sources import resolve_model_path

    if precision not in PRECISIONS:
        raise UnknownNameError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    device = torch.device("cpu") if device is None else torch.device(device)
    resolved = resolve_model_path(name_or_path)
    local = Path(resolved)
    if not local.exists() and (name_or_path.startswith((".", "/", "~")) or Path(name_or_path).suffix):
        raise FileNotFoundError(f"{name_or_path}: model directory not found")
    encoder = cselab.load(name_or_path, pooler=pooler, max_seq_len=max_seq_len).to(device)
    precision = choose_precision(precision, device, encoder.hidden_size).precision
    if max_seq_len is None:
        encoder.max_seq_len = usable_length(encoder.backbone, encoder.tokenizer)
    return LoadedModel(name=name_or_path, path=str(local.resolve()) if local.exists() else resolved, encoder=encoder,
                       pooler=encoder.pooler, max_seq_len=encoder.max_seq_len, precision=precision,
                       batch_size=batch_size, fingerprint=weights_fingerprint(local),
                       details={"mlp_at_eval": bool(encoder.mlp is not None and not encoder.mlp_only_train)})
