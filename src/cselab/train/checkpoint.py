"""Resumable checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint is ``{component name: its state_dict()}`` plus a manifest (the step, the run's config,
its precision). Each stateful part of a run (``train/components.py``: the loader position, the
encoder's weights, the other trainable weights, the optimiser step, the RNG streams, the run clock,
the metrics log, model selection, the starting model's geometry) saves itself with ``state_dict()``
and resumes with ``load_state_dict()``; a directory ``step-NNNNNNNN`` holds each component's tensors in
``NAME.safetensors`` and the rest, with the manifest, in ``state.json``.

Size: the encoder's weights are stored once. When the final model in the output directory was
saved at the checkpoint's step (the best model so far, or the last step's), the checkpoint's
``encoder.safetensors`` is a hard link to that file, not a copy; the final model is always replaced
(unlinked, then written), never written through the link. A matrix with many all-zero rows (AdamW's
moments of the embedding rows of tokens the run has not seen) is stored by its other rows,
losslessly. The newest ``keep`` checkpoints are kept (``train.keep_checkpoints``, default 1).
It is written under a temporary name, every file is fsynced, a manifest of SHA-256 digests is
written last, and only then is the directory renamed into place, so a process killed at any
moment leaves either a complete checkpoint or an ignored ``.step-*.tmp`` directory.

Off the critical path: the loop only takes a :class:`Snapshot` (every tensor copied to the host);
a :class:`CheckpointWriter` thread writes it (digests computed on the bytes as they are written,
not by reading the files back) while training goes on, and the next save waits only while it is
still writing. On resume a checkpoint that fails its manifest (truncated, bit-flipped, missing
files) is moved aside to ``corrupt-step-*`` with a warning and the previous one is used. Nothing is
ever unpickled.

Each component's ``version`` is kept beside its state: a checkpoint whose component has another
version is refused naming it, and a component the checkpoint lacks (one added to cselab, or to the
run's objective, after it was written) keeps its starting state, so adding one refuses no older
checkpoint.

When the loop saves (``Checkpointing``: every ``save_steps``, every ``save_minutes``, at the end, on a
signal) and the run's output directory (``open_run``: its lock, its resolved config, the checkpoint to
resume from) are here too.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from cselab.config import Config, TrainConfig
from cselab.config.schema import resume_safe_keys
from cselab.errors import ConfigError, CselabError, first_line
from cselab.file_writes import write_text_atomically
from cselab.run_files import BEST_MODEL, CHECKPOINTS, KEPT_DIR, LOCK, METRICS, RUN_CONFIG
from cselab.sources import holder_is_gone, lock_holder
from cselab.train.distributed import from_main, gather_objects
from cselab.train.rank import RankContext

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"

class CheckpointError(CselabError, RuntimeError):
    """A checkpoint cannot be used for this run; the message says why in one line."""


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    """Flush a file or directory entry to disk (a rename is durable only once its directory is)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON; readers see the old or the new file, never half of one.
    The temporary file is a fresh one per call: two writers of one file (two sweeps sharing an
    output folder) would otherwise write into, and rename away, each other's temporary file."""
    write_text_atomically(path, json.dumps(data, indent=2), durable=True)


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# A matrix is stored by its non-zero rows when at least this share of its rows are zero.
SPARSE_ROWS_FROM = 0.25
TENSOR, SPARSE, INT_KEYS = "__tensor__", "__sparse_rows__", "__int_keys__"


def _zero_rows(value: torch.Tensor) -> torch.Tensor:
    """Rows whose every element is +0.0 bit for bit (so leaving them out and restoring is lossless)."""
    return (value.view(_BITS[value.element_size()]) == 0).all(dim=1)


def split_tensors(state: Any, path: str = "") -> tuple[Any, dict[str, torch.Tensor]]:
    """A component's state as (its JSON skeleton, its tensors by dotted path): each tensor's place in
    the skeleton holds ``{"__tensor__": path}``. Dicts with integer keys (an optimiser's per-parameter
    state) keep them as ``{"__int_keys__": [[key, value], ...]}``, since JSON keys are strings."""
    if torch.is_tensor(state):
        return {TENSOR: path}, {path: state}
    tensors: dict[str, torch.Tensor] = {}
    if isinstance(state, dict):
        skeleton: dict = {}
        for key, value in state.items():
            skeleton[key], found = split_tensors(value, f"{path}.{key}" if path else str(key))
            if found.keys() & tensors.keys():  # {"a.b": x, "a": {"b": y}}: both would be stored as a.b
                raise CheckpointError(f"state {path or '(top)'}: two tensors at {min(found.keys() & tensors.keys())}")
            tensors.update(found)
        if state and all(isinstance(key, int) for key in state):
            return {INT_KEYS: [[key, value] for key, value in skeleton.items()]}, tensors
        return skeleton, tensors
    if isinstance(state, (list, tuple)):
        items = []
        for i, value in enumerate(state):
            item, found = split_tensors(value, f"{path}.{i}" if path else str(i))
            items.append(item)
            tensors.update(found)
        return items, tensors
    return state, tensors


def join_tensors(skeleton: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of :func:`split_tensors` (tuples come back as lists)."""
    if isinstance(skeleton, dict):
        if set(skeleton) == {TENSOR}:
            return tensors[skeleton[TENSOR]]
        if set(skeleton) == {INT_KEYS}:
            return {key: join_tensors(value, tensors) for key, value in skeleton[INT_KEYS]}
        return {key: join_tensors(value, tensors) for key, value in skeleton.items()}
    if isinstance(skeleton, list):
        return [join_tensors(value, tensors) for value in skeleton]
    return skeleton


def _sparse_rows(tensors: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, list[int]]]:
    """AdamW's moments of an embedding matrix are zero in every row of a token the run has not seen
    yet: a matrix with enough zero rows is stored as its non-zero rows (``NAME.rows``) and their
    indices (``NAME.index``); returns the stored tensors and each such matrix's shape."""
    stored, shapes = {}, {}
    for name, value in tensors.items():
        taken = f"{name}.rows" in tensors or f"{name}.index" in tensors  # the names the sparse form would use
        if (value.dim() == 2 and value.shape[0] and not taken
                and (zero := _zero_rows(value)).float().mean() >= SPARSE_ROWS_FROM):
            rows = (~zero).nonzero().flatten()
            stored[f"{name}.rows"], stored[f"{name}.index"] = value[rows].contiguous(), rows
            shapes[name] = list(value.shape)
        else:
            stored[name] = value
    return stored, shapes


def _dense_rows(stored: dict[str, torch.Tensor], shapes: dict[str, list[int]]) -> dict[str, torch.Tensor]:
    tensors = {name: value for name, value in stored.items()
               if not (name.endswith((".rows", ".index")) and name.rsplit(".", 1)[0] in shapes)}
    for name, shape in shapes.items():
        rows = stored[f"{name}.rows"]
        full = torch.zeros(shape, dtype=rows.dtype)
        full[stored[f"{name}.index"]] = rows
        tensors[name] = full
    return tensors


@dataclass
class Snapshot:
    """A checkpoint's contents copied to the host: training may change every live tensor once it exists."""

    directory: Path
    step: int
    keep: int
    tensors: dict[str, dict[str, torch.Tensor]]  # component name -> its tensors by path (host copies)
    state: dict  # state.json: the manifest (step, config, precision) and every component's skeleton

    @property
    def tmp(self) -> Path:
        return self.directory / f".step-{self.step:08d}.tmp"

    @property
    def final(self) -> Path:
        return self.directory / f"step-{self.step:08d}"


@dataclass
class CheckpointDir:
    """``OUTPUT_DIR/checkpoints``: where snapshots go, and how many are kept."""

    directory: Path
    keep: int = 1

    def snapshot(self, states: dict[str, Any], manifest: dict, link: dict[str, Path] | None = None,
                 versions: dict[str, int] | None = None) -> Snapshot:
        """What the loop must do itself before it goes on: copy every tensor of ``states`` ({component
        name: its state_dict()}) to the host, and link files that already hold a component's tensors
        (``link``: {component: file}, the final model saved at this step holding the encoder's weights)
        into the temporary directory now (a best model saved later replaces that file; the link keeps
        these bytes). ``manifest``: ``step`` and what else describes the run (its config, precision);
        ``versions``: each component's state layout version.
        The rest is :func:`write_snapshot`'s, in the writer's thread."""
        snap = Snapshot(self.directory, manifest["step"], self.keep, {}, {})
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(snap.tmp, ignore_errors=True)
        snap.tmp.mkdir()
        skeletons, tensors = {}, {}
        for name, state in states.items():
            skeletons[name], tensors[name] = split_tensors(state)
        for name, source in (link or {}).items():  # where the link fails, the tensors are written as a copy
            if _same_layout(source, tensors[name]) and _link(source, snap.tmp / f"{name}.safetensors"):
                tensors[name] = {}
        snap.state = {"format": FORMAT, **manifest, "components": skeletons}
        if versions:
            snap.state["versions"] = versions
        json.dumps(snap.state)  # what JSON cannot hold fails here, in the loop, not later in the writer's thread
        snap.tensors = _host_copies(tensors)
        return snap


FORMAT = 2  # state.json's layout: components by name (before it: one fixed record of the trainer's state)


def _host_copies(files: dict[str, dict[str, torch.Tensor]]) -> dict[str, dict[str, torch.Tensor]]:
    """Each tensor copied to (new) host memory. From a GPU the copies go into pinned memory without
    waiting one by one (torch's host allocator reuses pinned blocks from one checkpoint to the next),
    then the loop waits once for all of them."""
    copies: dict[str, dict[str, torch.Tensor]] = {}
    waits = set()
    for file, tensors in files.items():
        copies[file] = {}
        for name, tensor in tensors.items():
            tensor = tensor.detach()
            if tensor.device.type == "cpu":
                copies[file][name] = tensor.clone(memory_format=torch.contiguous_format)
            elif tensor.device.type == "cuda":
                host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
                copies[file][name] = host.copy_(tensor, non_blocking=True)
                waits.add(tensor.device)
            else:
                copies[file][name] = tensor.to("cpu", copy=True)
    for device in waits:
        torch.cuda.synchronize(device)
    return copies


def write_snapshot(snap: Snapshot) -> Path:
    """Write a :class:`Snapshot` as ``step-N``: each component's tensors in ``NAME.safetensors``
    (hashed as its bytes are written, and fsynced), ``state.json``, the manifest of digests last; then
    the rename, then the oldest checkpoints beyond ``keep`` removed. Safe to run in a thread of its own."""
    digests, state = {}, dict(snap.state)  # only a top-level key (the sparse shapes) is added
    for name, tensors in snap.tensors.items():
        file = f"{name}.safetensors"
        if (snap.tmp / file).exists():  # linked, not written here: read to hash it
            digests[file] = _digest(snap.tmp / file)
            _fsync(snap.tmp / file)
            continue
        if not tensors:
            continue
        tensors, sparse = _sparse_rows(tensors)
        if sparse:
            state.setdefault(SPARSE, {})[name] = sparse
        digests[file] = _write_safetensors(snap.tmp / file, tensors)
    digests["state.json"] = _write_hashed(snap.tmp / "state.json", [json.dumps(state).encode()])
    # The manifest is written last: a directory without a valid one was never finished.
    _write_hashed(snap.tmp / MANIFEST, [json.dumps(dict(sorted(digests.items()))).encode()])
    _fsync(snap.tmp)
    shutil.rmtree(snap.final, ignore_errors=True)
    os.replace(snap.tmp, snap.final)
    _fsync(snap.directory)
    for old in list_checkpoints(snap.directory)[:-snap.keep]:
        shutil.rmtree(old, ignore_errors=True)
    return snap.final


def _write_hashed(path: Path, pieces) -> str:
    """Write ``pieces`` (buffers) to a new file, fsync it, and return the SHA-256 of what was written."""
    h = hashlib.sha256()
    with open(path, "wb") as handle:
        for piece in pieces:
            h.update(piece)
            handle.write(piece)
        handle.flush()
        os.fsync(handle.fileno())
    return h.hexdigest()


def _write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> str:
    """``tensors`` in the safetensors format, hashed as written; returns the digest.

    Written by hand because safetensors' own writers either write a file we would have to read back
    to hash (``save_file``) or build the whole file as one bytes object first (``save``: a second
    copy of every moment in memory). The format is an 8-byte little-endian header length, a JSON
    header (name -> dtype, shape, byte offsets) padded with spaces to 8 bytes, then the raw bytes
    back to back; ``safetensors.torch.load_file`` reads it back (tested)."""
    header, offset, pieces = {}, 0, []
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        if tensor.dtype not in _SAFETENSORS_DTYPES:
            raise CheckpointError(f"{path}: {name}: no safetensors dtype for {tensor.dtype}")
        data = tensor.reshape(-1).view(torch.uint8).numpy()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + data.nbytes]}
        offset += data.nbytes
        pieces.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return _write_hashed(path, [struct.pack("<Q", len(text)), text, *pieces])


class CheckpointWriter:
    """Writes checkpoints behind the training loop, one at a time, in a thread of its own.

    ``save`` waits only while the previous checkpoint is still being written, then starts this one
    and returns. What went wrong in the thread is raised in the loop's thread at the next ``save``,
    ``wait`` or the end of the ``with`` block, never lost. ``background=False`` writes in ``save``
    itself (``train.async_checkpoint: false``; the benchmark's "before")."""

    def __init__(self, background: bool = True):
        self.background = background
        self._thread: threading.Thread | None = None
        self._written = threading.Event()  # set when the thread's checkpoint is written (or failed)
        self._error: BaseException | None = None
        self._writing: Path | None = None  # the checkpoint being written, for the error (not its tensors)

    def save(self, snap: Snapshot) -> None:
        self.wait()
        if not self.background:
            self._write(snap)
            self.wait()
            return
        self._written.clear()
        self._thread = threading.Thread(target=self._write, args=(snap,), name=f"checkpoint-{snap.step}")
        self._thread.start()

    def _write(self, snap: Snapshot) -> None:
        self._writing = snap.final
        try:
            write_snapshot(snap)
        except BaseException as exc:  # re-raised in the loop's thread by wait()
            self._error = exc
        finally:
            self._written.set()

    def wait(self) -> None:
        """Until the checkpoint being written is on disk; raises what writing it raised.

        It waits on an event, and joins the thread only once it has written: a Ctrl-C inside
        ``Thread.join`` makes CPython (3.12 and before, gh-90882) mark a thread still writing as
        stopped, so the interpreter would end under it and abort ("terminate called without an
        active exception"); interrupted here, the next ``wait`` (the block's end) waits on."""
        if self._thread is not None:
            self._written.wait()
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            first = first_line(error)
            raise CheckpointError(f"{self._writing}: writing the checkpoint failed ({first}); "
                                  f"the previous checkpoint is still the resume point") from error

    def __enter__(self) -> CheckpointWriter:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.wait()
            return
        try:  # the run is failing already: finish the checkpoint under way, and report a failure of it too
            self.wait()
        except CheckpointError as error:
            log.error("%s", error)


def _same_layout(path: Path, state: dict[str, torch.Tensor]) -> bool:
    """The file holds ``state``'s names with their shapes and dtypes (its values are the caller's word);
    it may hold more (a saved model's unused BERT pooler), which loading leaves out."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            if not set(state) <= set(handle.keys()):
                return False
            return all(tuple(handle.get_slice(k).get_shape()) == tuple(v.shape)
                       and handle.get_slice(k).get_dtype() == _SAFETENSORS_DTYPES.get(v.dtype)
                       for k, v in state.items())
    except (OSError, ValueError, RuntimeError):
        return False


# safetensors' names of the dtypes a checkpoint can hold.
_SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                       torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                       torch.uint8: "U8", torch.bool: "BOOL"}


def _link(source: Path, target: Path) -> bool:
    try:
        os.link(source, target)
        return True
    except OSError:  # a file system without hard links: the caller writes a copy
        return False


def list_checkpoints(directory: Path) -> list[Path]:
    """Finished checkpoint directories, oldest first (temporary and set-aside ones excluded)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("step-*") if p.is_dir())


def verify(path: Path) -> bool:
    """True when every expected file is present and matches the manifest's SHA-256."""
    try:
        digests = json.loads((path / MANIFEST).read_text())
        if not isinstance(digests, dict) or "state.json" not in digests:
            return False
        return all(_digest(path / name) == digest for name, digest in digests.items())
    except (OSError, ValueError):
        return False


def latest_valid_checkpoint(directory: Path) -> Path | None:
    """The newest checkpoint whose files match their manifest; broken ones are set aside with a warning."""
    for path in reversed(list_checkpoints(directory)):
        if verify(path):
            return path
        aside = path.with_name(f"corrupt-{path.name}")
        shutil.rmtree(aside, ignore_errors=True)
        path.rename(aside)
        log.warning("checkpoint %s is incomplete or corrupt (moved to %s); using the previous one", path, aside.name)
    return None


def checkpoint_step(path: Path) -> int:
    return int(path.name.rsplit("-", 1)[1])


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data and prefix.count(".") < 1:
        flat: dict[str, Any] = {}
        for key, value in data.items():
            flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: data}


def _then_and_now(saved: dict, current: dict) -> tuple[dict, dict]:
    """Both configs flat (dotted keys); a key the saved one lacks has its default."""
    return {**_flatten(Config().to_dict()), **_flatten(saved)}, _flatten(current)


def config_differences(saved: dict | None, current: dict) -> list[str]:
    """Dotted keys (``optim.lr``, ``objective``) whose values differ, except those that may change on
    resume (where files go, how often they are written, how data is loaded: ``resume_safe`` on their
    fields, ``config.schema``).

    A key the saved config lacks (a checkpoint made before the setting existed, e.g. ``train.select_on``)
    counts as that setting's default: the run that made it behaved so."""
    if saved is None:
        return []
    old, new = _then_and_now(saved, current)
    keys = sorted(set(old) | set(new))
    safe = resume_safe_keys()
    return [k for k in keys if k not in safe and old.get(k) != new.get(k)]


def describe_differences(saved: dict | None, current: dict, keys: list[str], limit: int = 60) -> str:
    """``keys`` (from :func:`config_differences`) with their values then and now, for the one-line refusal:
    ``optim.lr (3e-05 then, 1e-05 now)``; a long value (an objective's list) is cut at ``limit`` characters."""
    old, new = _then_and_now(saved or {}, current)

    def shown(value) -> str:
        text = json.dumps(value, separators=(", ", ": ")) if value is not None else "unset"
        return text if len(text) <= limit else text[:limit - 3] + "..."

    return ", ".join(f"{key} ({shown(old.get(key))} then, {shown(new.get(key))} now)" for key in keys)


def read_state(path: Path) -> dict:
    return json.loads((path / "state.json").read_text())


@dataclass
class SavedRun:
    """A checkpoint read back: its manifest (step, config, precision) and every component's state."""

    path: Path
    manifest: dict
    states: dict[str, Any]
    versions: dict[str, int] = field(default_factory=dict)  # each component's state layout (absent: its first)


def check_layout(path: Path, state: dict) -> None:
    if state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: written by an earlier cselab in another layout; resume it with the version "
                              f"that wrote it, or pass --no-resume (or another train.output_dir) to start over")


def read_checkpoint(path: Path) -> SavedRun:
    """Every component's state from checkpoint ``path`` (tensors on the CPU); nothing is unpickled."""
    state = read_state(path)
    check_layout(path, state)
    states = {}
    for name, skeleton in state["components"].items():
        file = path / f"{name}.safetensors"
        tensors = load_file(str(file)) if file.is_file() else {}
        states[name] = join_tensors(skeleton, _dense_rows(tensors, state.get(SPARSE, {}).get(name, {})))
    manifest = {k: v for k, v in state.items() if k not in ("components", SPARSE, "format", "versions")}
    # A checkpoint written before components had versions holds each one's first.
    versions = {name: state.get("versions", {}).get(name, 1) for name in states}
    return SavedRun(path, manifest, states, versions)


def version_of(component) -> int:
    """The layout version of a component's state (``version``; 1 for one that declares none)."""
    return getattr(component, "version", 1)


def restore(components: dict[str, Any], saved: SavedRun) -> None:
    """``load_state_dict`` of every component from ``saved``; one that does not fit, or was saved in
    another version of its layout, fails naming the checkpoint and the component, in one line; one the
    checkpoint lacks keeps its starting state (it was added after the checkpoint was written). Each
    state is let go once loaded (``saved`` is emptied): the run keeps no second copy of the weights
    and moments in host memory."""
    for name, component in components.items():
        if name not in saved.states:
            log.info("%s: holds no %s (added since it was written); it starts fresh", saved.path, name)
            continue
        version, found = version_of(component), saved.versions.get(name, 1)
        if found != version:
            raise CheckpointError(f"{saved.path}: its {name} is version {found} of that state, "
                                  f"this cselab reads version {version}; resume it with the cselab that wrote it, "
                                  f"or pass --no-resume (or another train.output_dir) to start over")
        try:
            component.load_state_dict(saved.states.pop(name))
        except CselabError as exc:  # the run's data or settings differ: named with the checkpoint
            raise type(exc)(f"{saved.path}: {exc}") from None
        except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as exc:
            # torch's load_state_dict opens with "Error(s) in loading state_dict for X:"; the cause is next.
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
            first = lines[1] if lines[0].endswith(":") and len(lines) > 1 else lines[0]
            raise CheckpointError(f"{saved.path}: its {name} does not fit this run ({first}); "
                                  f"use --no-resume or another train.output_dir") from None

# -- when the loop saves ------------------------------------------------------------------------------

class Checkpointing:
    """Saves every ``train.save_steps`` steps and every ``train.save_minutes`` minutes, whichever comes
    first (0 turns either off), and after the last step when one is on.

    The clock is read only where a log window closes, by the main process, and its answer is shared
    with the others (one small collective per window), so every process saves at the same step.
    ``manifest``: what describes the run beside its components (its config, its precision)."""

    def __init__(self, process: RankContext, train: TrainConfig, manifest: dict, writer: CheckpointWriter):
        self.process, self.manifest, self.writer = process, manifest, writer
        self.keep_optimizer_state = train.keep_optimizer_state  # the last step's too (else without AdamW's moments)
        self.steps, self.seconds = train.save_steps, train.save_minutes * 60
        self.directory = CheckpointDir(process.out_dir / CHECKPOINTS, train.keep_checkpoints)
        self.last_save = time.monotonic()

    def due(self, step: int, last: bool, window: bool) -> bool:
        if self.steps and (step % self.steps == 0 or last):
            return True
        if not self.seconds or not (last or window):
            return False
        if last:
            return True
        late = time.monotonic() - self.last_save >= self.seconds if self.process.main else None
        return bool(from_main(late))

    def save(self, step: int, states: dict[str, Any], versions: dict[str, int], link_encoder: bool) -> None:
        """Hand this step's checkpoint (``states``: every component's, ``versions``: their layouts') to
        the writer, after the one it may still be writing: the loop waits for the host copy, not for the
        disk. The main process writes; ``link_encoder``: the final model in the output directory holds
        this step's weights (the best so far, or the last step's), so the checkpoint links its file."""
        if self.process.main:
            link = {"encoder": self.process.out_dir / "model.safetensors"} if link_encoder else None
            self.writer.wait()  # one host copy at a time: memory stays at one checkpoint's
            self.writer.save(self.directory.snapshot(states, {"step": step, **self.manifest}, link, versions))
        self.process.barrier()
        self.last_save = time.monotonic()

# -- the run's output directory: its lock, its resolved config, the checkpoint to resume from ---------

@contextlib.contextmanager
def open_run(process, config: Config, resume: bool) -> Iterator[Path | None]:
    """The output directory, locked while the run lasts; yields the checkpoint to resume from
    (None = start over), after checking it belongs to this config.

    Starting over clears the directory's old checkpoints, metrics and ``best-METRIC/`` models, so a
    later resume (or ``cselab eval``) can never pick up what an earlier, different run left;
    resuming cuts the metrics back to the checkpoint's step. Only the main process looks (and writes,
    and sets broken checkpoints aside); it tells the others which checkpoint it resumes from
    (:func:`shared_resume_point`), so all of them start at its step or none does.
    A run that fails before its first checkpoint removes the directory if it created it.
    """
    out_dir = process.out_dir
    created = _first_missing(out_dir) if process.main else None
    try:
        with output_lock(out_dir) if process.main else contextlib.nullcontext():
            latest, error = None, None
            if process.main:
                try:
                    latest = _open_run(out_dir, config, resume)
                except (CselabError, OSError, ValueError) as exc:  # raised on every process below
                    error = exc
            yield shared_resume_point(process, latest, error)
    except BaseException:
        if created is not None and not list_checkpoints(out_dir / CHECKPOINTS):
            shutil.rmtree(created, ignore_errors=True)
        raise


def shared_resume_point(process, latest: Path | None, error: BaseException | None = None) -> Path | None:
    """The main process's resume point (or its error) on every process. Each process reads the
    checkpoint's files itself (its own RNG state is in there), under its own ``train.output_dir``: on
    machines that do not share that directory a process cannot, and every process fails with one
    line naming the path, instead of one process starting over at step 0 beside the others."""
    if process.processes == 1:
        if error is not None:
            raise error
        return latest
    error, name = from_main((error, None if latest is None else latest.name))
    if error is not None:
        raise error
    if name is None:
        return None
    path = process.out_dir / CHECKPOINTS / name
    missing = None if process.main else _missing_files(path)
    problems = [(rank, what) for rank, what in enumerate(gather_objects(missing)) if what]
    if problems:
        rank, what = problems[0]
        raise CheckpointError(f"{path}: process {rank} of {process.processes} cannot read {what} of the "
                                   f"checkpoint the main process resumes from; every machine needs the same "
                                   f"train.output_dir (a shared file system), or a copy of that checkpoint in it")
    return path


def _missing_files(path: Path) -> str | None:
    """What of checkpoint ``path`` this process cannot find (None: every file is there). Existence
    only: the main process has checked the digests."""
    try:
        names = list(json.loads((path / MANIFEST).read_text()))
    except (OSError, ValueError):
        return MANIFEST
    absent = [name for name in names if not (path / name).is_file()]
    return ", ".join(absent) or None


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet (what a failed run must remove)."""
    missing = None
    for candidate in (path.absolute(), *path.absolute().parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


@contextlib.contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """``OUT_DIR/.cselab-train.lock`` (pid, host, start time) while the block runs: a second run on
    the same directory is refused, naming the holder; a lock whose process has died is taken over."""
    _refuse_file_in_path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK
    mine = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    while True:
        try:
            with open(path, "x", encoding="utf-8") as handle:
                json.dump(mine, handle)
            break
        except FileExistsError:
            holder = lock_holder(path)
            if holder is not None and not holder_is_gone(holder):
                who = f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"
                raise ConfigError(f"{out_dir}: another training run is using this directory ({who}); wait for it, "
                                  f"use another train.output_dir, or delete {path} if that run is gone") from None
            path.unlink(missing_ok=True)  # a dead run's lock (or an unreadable one): taken over
    try:
        yield
    finally:
        if lock_holder(path) == mine:
            path.unlink(missing_ok=True)


def _refuse_file_in_path(out_dir: Path) -> None:
    """An existing file where the output folder (or a folder above it) would be: say so, and what goes there."""
    for candidate in (out_dir, *out_dir.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise ConfigError(f"train.output_dir: {candidate} is an existing file, not a folder; the output "
                                  f"directory is a folder for the model, metrics.jsonl, summary.json and checkpoints "
                                  f"(pass a new folder, or a run's to resume it)")
            return


def _open_run(out_dir: Path, config: Config, resume: bool) -> Path | None:
    checkpoint_dir = out_dir / CHECKPOINTS
    out_dir.mkdir(parents=True, exist_ok=True)
    latest = latest_valid_checkpoint(checkpoint_dir) if resume else None
    if latest is None:
        for old in [*checkpoint_dir.glob("step-*"), *checkpoint_dir.glob(".step-*.tmp")]:
            shutil.rmtree(old, ignore_errors=True)
        (out_dir / METRICS).unlink(missing_ok=True)
        (out_dir / BEST_MODEL).unlink(missing_ok=True)
        for kept in out_dir.glob(KEPT_DIR.format(metric="*")):
            if kept.is_dir():  # an earlier run's further best models (derived) are never adopted nor left to load
                shutil.rmtree(kept, ignore_errors=True)
    else:
        state = read_state(latest)
        check_layout(latest, state)  # before its settings are compared (an older layout keeps them elsewhere)
        current = config.to_dict()
        differing = config_differences(state.get("config"), current)
        if differing:
            changed = describe_differences(state.get("config"), current, differing)
            raise ConfigError(f"{out_dir}: its checkpoint {latest.name} was made with a different "
                              f"{changed}; run with the same settings to resume, or pass --no-resume "
                              f"(or another train.output_dir) to start over")
        trim_metrics(out_dir / METRICS, checkpoint_step(latest))
    write_json_atomic(out_dir / RUN_CONFIG, config.to_dict())
    return latest


def trim_metrics(path: Path, last_step: int) -> None:
    """Keep the records up to ``last_step`` (the resume point), so a resumed run adds no duplicates."""
    if not path.is_file():
        return
    kept = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            if json.loads(line)["step"] <= last_step:
                kept.append(line)
        except (ValueError, KeyError, TypeError):
            pass  # a record cut short by the crash
    write_text_atomically(path, "".join(line + "\n" for line in kept))
