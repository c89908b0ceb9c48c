"""Resumable checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint is a directory ``step-NNNNNNNN`` holding the encoder's weights
(``encoder.safetensors``), the other trainable weights (``heads.safetensors``: training head, MLM
head, discriminator), the optimiser, scheduler and RNG states, the trainer state (data position =
the step, best dev score, ...) and the run's config.

Size: the encoder's weights are stored once. When the final model in the output directory was
saved at the checkpoint's step (the best model so far, or the last step's), the checkpoint's
``encoder.safetensors`` is a hard link to that file, not a copy; the final model is always replaced
(unlinked, then written), never written through the link. AdamW's moments are stored with their
all-zero rows left out (the embedding rows of tokens the run has not seen), losslessly. The newest
``keep`` checkpoints are kept (``train.keep_checkpoints``, default 1).
It is written under a temporary name, every file is fsynced, a manifest of SHA-256 digests is
written last, and only then is the directory renamed into place, so a process killed at any
moment leaves either a complete checkpoint or an ignored ``.step-*.tmp`` directory.

Off the critical path: the loop only takes a :class:`Snapshot` (every tensor copied to the host);
a :class:`CheckpointWriter` thread writes it (digests computed on the bytes as they are written,
not by reading the files back) while training goes on, and the next save waits only while it is
still writing. On resume a
checkpoint that fails its manifest (truncated, bit-flipped, missing files) is moved aside to
``corrupt-step-*`` with a warning and the previous one is used. Nothing is ever unpickled.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import random
import shutil
import struct
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model

from cselab.config import Config
from cselab.errors import CselabError, counted

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
FILES = ("encoder.safetensors", "heads.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json")
LEGACY_FILES = ("model.safetensors", "optimizer.safetensors", "rng.safetensors", "state.json")  # before the split

# Keys that may differ between the checkpoint's run and the resuming one: where files go, how
# often they are written, and how data is loaded (views are seeded by (seed, step), not by worker).
RESUME_SAFE_KEYS = frozenset({"train.output_dir", "train.save_steps", "train.save_minutes",
                              "train.async_checkpoint", "train.log_steps", "train.num_workers",
                              "train.dist_timeout_minutes",
                              "train.compile", "model.unpad", "data.dev_dir", "model.trust_remote_code",
                              "train.keep_checkpoints", "data.cache_token_ids", "train.report_to",
                              "recipe"})  # the name: the settings themselves are compared


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
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # unique across processes and machines
    try:
        with open(tmp, "x", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=2))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
# A moment matrix is stored by its non-zero rows when at least this share of its rows are zero.
SPARSE_ROWS_FROM = 0.25


def _zero_rows(value: torch.Tensor) -> torch.Tensor:
    """Rows whose every element is +0.0 bit for bit (so leaving them out and restoring is lossless)."""
    return (value.view(_BITS[value.element_size()]) == 0).all(dim=1)


def _flatten_optimizer(state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """Tensors for safetensors plus JSON metadata. AdamW's moments of an embedding matrix are zero in
    every row of a token the run has not seen yet: such matrices keep only their non-zero rows."""
    tensors, meta = {}, {"param_groups": state["param_groups"], "state": {}}
    for pid, values in state["state"].items():
        meta["state"][str(pid)] = {}
        for key, value in values.items():
            name = f"{pid}.{key}"
            if not torch.is_tensor(value):
                meta["state"][str(pid)][key] = value
            elif value.dim() == 2 and (zero := _zero_rows(value)).float().mean() >= SPARSE_ROWS_FROM:
                rows = (~zero).nonzero().flatten()
                tensors[f"{name}.rows"], tensors[f"{name}.index"] = value[rows].contiguous(), rows
                meta["state"][str(pid)][key] = {"sparse_rows": list(value.shape)}
            else:
                tensors[name] = value.contiguous()
                meta["state"][str(pid)][key] = "__tensor__"
    return tensors, meta


def _unflatten_optimizer(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state = {}
    for pid, values in meta["state"].items():
        state[int(pid)] = {key: _restore(tensors, f"{pid}.{key}", value) for key, value in values.items()}
    return {"state": state, "param_groups": meta["param_groups"]}


def _restore(tensors: dict[str, torch.Tensor], name: str, value: Any) -> Any:
    if value == "__tensor__":
        return tensors[name]
    if isinstance(value, dict) and "sparse_rows" in value:
        rows = tensors[f"{name}.rows"]
        full = torch.zeros(value["sparse_rows"], dtype=rows.dtype)
        full[tensors[f"{name}.index"]] = rows
        return full
    return value


def rng_state() -> tuple[dict[str, torch.Tensor], dict]:
    """torch (CPU and CUDA: dropout), Python and NumPy generator states."""
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


@dataclass
class Snapshot:
    """A checkpoint's contents copied to the host: training may change every live tensor once it exists."""

    directory: Path
    step: int
    keep: int
    tensors: dict[str, dict[str, torch.Tensor]]  # safetensors file name -> its tensors (host copies)
    optimizer: dict  # the optimiser's state dict, its tensors host copies (flattened by the writer)
    state: dict  # state.json without the optimiser's part

    @property
    def tmp(self) -> Path:
        return self.directory / f".step-{self.step:08d}.tmp"

    @property
    def final(self) -> Path:
        return self.directory / f"step-{self.step:08d}"


def snapshot(directory: Path, step: int, model: torch.nn.Module, optimizer, scheduler,
             trainer_state: dict[str, Any], config: dict | None = None,
             rank_rng: list[tuple[dict[str, torch.Tensor], dict]] | None = None, *,
             backbone: torch.nn.Module, keep: int = 1, saved_backbone: Path | None = None) -> Snapshot:
    """What the loop must do itself before it goes on: copy every tensor to the host and link the
    final model's file into the temporary directory (now: a best model saved later replaces that
    file, and the link keeps this one's bytes). The rest is :func:`write_snapshot`'s.

    ``model``: every trainable module, ``backbone`` among them. ``saved_backbone``: a file already
    holding the backbone's current weights (the final model saved at this step), linked, not copied.
    ``rank_rng``: every process's RNG state (:func:`rng_state`), rank order, in a multi-process run
    (each process draws its own dropout masks); None = this process's."""
    snap = Snapshot(directory, step, keep, {}, {}, {})
    directory.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(snap.tmp, ignore_errors=True)
    snap.tmp.mkdir()
    own, heads, aliases = _split_state(model, backbone)
    target = snap.tmp / "encoder.safetensors"
    linked = saved_backbone is not None and _same_layout(saved_backbone, own) and _link(saved_backbone, target)
    ranks = rank_rng or [rng_state()]
    # Rank 0's tensors keep their plain names (the single-process layout); rank r's are "rankR.NAME".
    rng_tensors = {(name if r == 0 else f"rank{r}.{name}"): tensor
                   for r, (tensors, _) in enumerate(ranks) for name, tensor in tensors.items()}
    optimizer_state = optimizer.state_dict()
    moments = {f"{pid}.{key}": value for pid, values in optimizer_state["state"].items()
               for key, value in values.items() if torch.is_tensor(value)}
    files = {"heads.safetensors": heads, "rng.safetensors": rng_tensors, "optimizer": moments}
    if not linked:
        files["encoder.safetensors"] = own
    copies = _host_copies(files)
    moments = copies.pop("optimizer")
    snap.tensors = copies
    snap.optimizer = {"param_groups": copy.deepcopy(optimizer_state["param_groups"]),
                      "state": {pid: {key: moments[f"{pid}.{key}"] if torch.is_tensor(value) else copy.deepcopy(value)
                                      for key, value in values.items()}
                                for pid, values in optimizer_state["state"].items()}}
    snap.state = copy.deepcopy({"step": step, "scheduler": scheduler.state_dict(), "rng": ranks[0][1],
                                "trainer": trainer_state, "config": config,
                                "backbone_prefix": _backbone_prefix(model, backbone), "heads_aliases": aliases})
    if len(ranks) > 1:
        snap.state["rng_ranks"] = [meta for _, meta in ranks]
    return snap


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
    """Write a :class:`Snapshot` as ``step-N``: every file written under the temporary name, hashed
    as its bytes are written and fsynced; the manifest of digests last; then the rename, then the
    oldest checkpoints beyond ``keep`` removed. Safe to run in a thread of its own."""
    digests = {}
    opt_tensors, opt_meta = _flatten_optimizer(snap.optimizer)
    for name, tensors in (*snap.tensors.items(), ("optimizer.safetensors", opt_tensors)):
        digests[name] = _write_safetensors(snap.tmp / name, tensors)
    digests["state.json"] = _write_hashed(snap.tmp / "state.json", [json.dumps({**snap.state,
                                                                                 "optimizer": opt_meta}).encode()])
    if "encoder.safetensors" not in digests:  # the final model's file, linked: not written here, so read
        digests["encoder.safetensors"] = _digest(snap.tmp / "encoder.safetensors")
        _fsync(snap.tmp / "encoder.safetensors")
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
        self._error: BaseException | None = None
        self._writing: Path | None = None  # the checkpoint being written, for the error (not its tensors)

    def save(self, snap: Snapshot) -> None:
        self.wait()
        if not self.background:
            self._write(snap)
            self.wait()
            return
        self._thread = threading.Thread(target=self._write, args=(snap,), name=f"checkpoint-{snap.step}")
        self._thread.start()

    def _write(self, snap: Snapshot) -> None:
        self._writing = snap.final
        try:
            write_snapshot(snap)
        except BaseException as exc:  # re-raised in the loop's thread by wait()
            self._error = exc

    def wait(self) -> None:
        """Until the checkpoint being written is on disk; raises what writing it raised."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
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


def _backbone_prefix(model: torch.nn.Module, backbone: torch.nn.Module) -> str:
    name = next(name for name, module in model.named_modules() if module is backbone)
    return f"{name}." if name else ""


def _split_state(model: torch.nn.Module, backbone: torch.nn.Module) -> tuple[dict, dict, dict[str, str]]:
    """(the backbone's own state, the other tensors of ``model``, aliases): a tensor tied to one seen
    before (an MLM decoder tied to the word embeddings) is saved once and named in ``aliases``."""
    prefix = _backbone_prefix(model, backbone)
    own = backbone.state_dict()
    seen = {tensor.data_ptr(): prefix + name for name, tensor in own.items()}
    heads, aliases = {}, {}
    for name, tensor in model.state_dict().items():
        if name.startswith(prefix):
            continue
        if tensor.data_ptr() in seen:
            aliases[name] = seen[tensor.data_ptr()]
        else:
            heads[name] = tensor
            seen[tensor.data_ptr()] = name
    return own, heads, aliases


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
        if not isinstance(digests, dict) or not (set(FILES) <= set(digests) or set(LEGACY_FILES) <= set(digests)):
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


def config_differences(saved: dict | None, current: dict) -> list[str]:
    """Dotted keys (``optim.lr``, ``objective``) whose values differ, except ``RESUME_SAFE_KEYS``.

    A key the saved config lacks (a checkpoint made before the setting existed, e.g. ``train.select_on``)
    counts as that setting's default: the run that made it behaved so."""
    if saved is None:
        return []
    old, new = {**_flatten(Config().to_dict()), **_flatten(saved)}, _flatten(current)
    keys = sorted(set(old) | set(new))
    return [k for k in keys if k not in RESUME_SAFE_KEYS and old.get(k) != new.get(k)]


def read_state(path: Path) -> dict:
    return json.loads((path / "state.json").read_text())


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer, scheduler, rank: int = 0) -> dict:
    """Restore model, optimiser, scheduler and (process ``rank``'s) RNG states; returns the trainer state."""
    state = read_state(path)
    try:
        _load_weights(path, model, state)
        optimizer_tensors = load_file(str(path / "optimizer.safetensors"))
        optimizer.load_state_dict(_unflatten_optimizer(optimizer_tensors, state["optimizer"]))
        scheduler.load_state_dict(state["scheduler"])
        set_rng_state(*_rank_rng(load_file(str(path / "rng.safetensors")), state, rank))
    except (RuntimeError, KeyError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: does not fit this model ({first}); "
                              f"use --no-resume or another train.output_dir") from None
    return {"step": state["step"], **state["trainer"]}


def _load_weights(path: Path, model: torch.nn.Module, state: dict) -> None:
    """Strict: every tensor of ``model`` must come from the checkpoint with its shape."""
    if not (path / "encoder.safetensors").is_file():  # checkpoints written before the encoder was split out
        load_model(model, str(path / "model.safetensors"))
        return
    expected = model.state_dict().keys()
    weights = {name: v for k, v in load_file(str(path / "encoder.safetensors")).items()
               if (name := state["backbone_prefix"] + k) in expected}
    weights.update(load_file(str(path / "heads.safetensors")))
    weights.update({k: weights[source] for k, source in state.get("heads_aliases", {}).items()})
    model.load_state_dict(weights, strict=True)


def _rank_rng(tensors: dict[str, torch.Tensor], state: dict, rank: int) -> tuple[dict[str, torch.Tensor], dict]:
    """Process ``rank``'s RNG state from a checkpoint (saved by as many processes as now run)."""
    if rank == 0:
        return {k: v for k, v in tensors.items() if not k.startswith("rank")}, state["rng"]
    metas = state.get("rng_ranks", [])
    if rank >= len(metas):
        saved_by = counted(max(1, len(metas)), "process", "processes")
        raise KeyError(f"no RNG state of process {rank}: it was saved by {saved_by}")
    prefix = f"rank{rank}."
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}, metas[rank]
