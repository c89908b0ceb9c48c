"""Resumable checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint is a directory written under a temporary name and renamed when complete, with a
manifest of SHA-256 digests written last; one that fails its manifest is skipped with a warning
and the previous one is used.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
KEEP = 2


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _flatten_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors, meta = {}, {"param_groups": state["param_groups"], "state": {}}
    for pid, values in state["state"].items():
        meta["state"][str(pid)] = {}
        for key, value in values.items():
            if torch.is_tensor(value):
                tensors[f"{pid}.{key}"] = value.contiguous()
                meta["state"][str(pid)][key] = "__tensor__"
            else:
                meta["state"][str(pid)][key] = value
    return tensors, meta


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state = {}
    for pid, values in meta["state"].items():
        state[int(pid)] = {k: tensors[f"{pid}.{k}"] if v == "__tensor__" else v for k, v in values.items()}
    return {"state": state, "param_groups": meta["param_groups"]}


def rng_state() -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, s in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"cuda{i}"] = s
    py = random.getstate()
    np_state = np.random.get_state()
    meta = {"python": [py[0], list(py[1]), py[2]],
            "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])]}
    return tensors, meta


def set_rng_state(tensors: dict[str, torch.Tensor], meta: dict) -> None:
    torch.set_rng_state(tensors["torch"])
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            if f"cuda{i}" in tensors:
                torch.cuda.set_rng_state(tensors[f"cuda{i}"], i)
    version, internal, gauss = meta["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = meta["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def save_checkpoint(directory: Path, step: int, model: torch.nn.Module, optimizer, scheduler,
                    trainer_state: dict[str, Any]) -> Path:
    """Write ``directory/step-N`` atomically and keep the newest ``KEEP`` checkpoints."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"step-{step:08d}"
    tmp = directory / f".step-{step:08d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_model(model, str(tmp / "model.safetensors"))  # handles tied weights
    opt_tensors, opt_meta = _flatten_optimizer(optimizer.state_dict())
    save_file({k: v.cpu() for k, v in opt_tensors.items()}, str(tmp / "optimizer.safetensors"))
    rng_tensors, rng_meta = rng_state()
    save_file(rng_tensors, str(tmp / "rng.safetensors"))
    state = {"step": step, "optimizer": opt_meta, "scheduler": scheduler.state_dict(), "rng": rng_meta,
             "trainer": trainer_state}
    (tmp / "state.json").write_text(json.dumps(state))
    files = sorted(p.name for p in tmp.iterdir())
    (tmp / MANIFEST).write_text(json.dumps({name: _digest(tmp / name) for name in files}))
    for handle_path in [tmp / name for name in files + [MANIFEST]]:
        with open(handle_path, "rb") as handle:
            os.fsync(handle.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    for old in list_checkpoints(directory)[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("step-*") if p.is_dir())


def verify(path: Path) -> bool:
    manifest = path / MANIFEST
    try:
        digests = json.loads(manifest.read_text())
        return all(_digest(path / name) == digest for name, digest in digests.items())
    except (OSError, ValueError):
        return False


def latest_valid_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint whose files match their manifest; broken ones are reported."""
    for path in reversed(list_checkpoints(directory)):
        if verify(path):
            return path
        log.warning("checkpoint %s is incomplete or corrupt; trying the previous one", path)
    return None


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer, scheduler) -> dict:
    """Restore model, optimiser, scheduler and RNG states; returns the saved trainer state."""
    state = json.loads((path / "state.json").read_text())
    load_model(model, str(path / "model.safetensors"))
    optimizer.load_state_dict(_unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), state["optimizer"]))
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(load_file(str(path / "rng.safetensors")), state["rng"])
    return {"step": state["step"], **state["trainer"]}
