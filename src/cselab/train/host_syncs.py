"""Count the operations that make the host wait for the device (a "host sync") inside training steps.

On a GPU every such operation stalls the CPU until the device's queue of kernels drains, so a step
that makes one no longer overlaps the next step's Python work with this step's kernels. The loop is
written to read values back once per log window (``train/metrics.py``); :class:`HostSyncCounter`
proves it on any device, the CPU included, by recording what *would* sync on CUDA.

The rule (the same on CPU and GPU, so a CPU test is meaningful for a GPU run):

* **Ops whose output size or value depends on tensor data** are counted whatever device their
  inputs are on, as every tensor inside a step is treated as a device tensor: ``nonzero`` (and
  ``argwhere``), ``_local_scalar_dense`` (``item``, ``float()``, ``int()``, ``bool()``), ``is_nonzero``,
  ``equal``, ``masked_select``, indexing or index-assignment with a boolean mask (a ``nonzero``
  inside), ``unique``, ``bincount``, ``repeat_interleave`` without ``output_size``.
* **Tensors made from host data** (``torch.tensor``, ``new_tensor``: a pageable host-to-device copy,
  synchronous on CUDA) are counted, and so is any blocking copy from the host to a device.
* **Copies to the host**: a copy from a device to the CPU on CUDA; on a CPU, where a copy to the CPU
  is no op, a read into NumPy or Python (``numpy``, ``tolist``) of a tensor *that an op inside the
  counted region produced*. The batch's own tensors come from the data loader in host memory, so the
  step may read them (GradCache's chunk lengths do) at no cost on a GPU either.

``torch.cuda.set_sync_debug_mode("error")`` is the GPU's own check of the first two kinds; it cannot
run on a CPU, and it misses host copies that the driver makes without a stream synchronisation.
"""
from __future__ import annotations

import contextlib
import functools
import os
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten

# Ops that read device data to decide an output's size or a Python value.
_DATA_DEPENDENT = {
    aten.nonzero.default, aten.nonzero.out, aten._local_scalar_dense.default, aten.is_nonzero.default,
    aten.equal.default, aten.masked_select.default, aten.masked_select.out, aten.unique_dim.default,
    aten._unique.default, aten._unique2.default, aten.unique_consecutive.default, aten.bincount.default,
}
_LIFTED = {aten.lift_fresh.default, aten.lift_fresh_copy.default}
_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default}
_HOST_READS = ("numpy", "tolist", "__array__")


def _is_bool_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in (torch.bool, torch.uint8)


def _on_device(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type != "cpu"


class HostSyncCounter(TorchDispatchMode):
    """A dispatch mode that counts host syncs by op name (``counts``); enter it with ``with``.

    ``pause()`` stops counting for a region (a log window's one read-back, an evaluation).
    ``where`` counts (reason, the innermost Python line outside torch) for finding the caller."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()
        self.where: Counter[tuple[str, str]] = Counter()
        self.paused = False
        # id -> weak reference: a WeakSet would compare tensors with == (elementwise) on a hash clash.
        self._produced: dict[int, weakref.ref] = {}
        self._originals: dict[str, object] = {}

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Let torch.compile compile while counting (the default mode would make it run eager):
        dynamo traces with the counter off, and the compiled code runs with it on, so what it
        dispatches is counted (every op of a graph compiled with the aot_eager backend; inductor's
        library calls), and a read-back that breaks the graph runs in Python, counted too."""
        return True

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @contextlib.contextmanager
    def _paused_as(self, paused: bool) -> Iterator[None]:
        was, self.paused = self.paused, paused
        try:
            yield
        finally:
            self.paused = was

    def counting(self) -> contextlib.AbstractContextManager:
        return self._paused_as(False)

    def pause(self) -> contextlib.AbstractContextManager:
        return self._paused_as(True)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.paused:
            reason = self._sync_reason(func, args, kwargs)
            if reason:
                self._count(reason)
        out = func(*args, **kwargs)
        if not self.paused:
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor):
                    self._remember(value)
        return out

    def _count(self, reason: str) -> None:
        self.counts[reason] += 1
        frames = [f for f in traceback.extract_stack() if f"{os.sep}torch{os.sep}" not in f.filename
                  and f.filename != __file__]
        self.where[reason, f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"] += 1

    def _remember(self, tensor: torch.Tensor) -> None:
        key, produced = id(tensor), self._produced

        def forget(ref, key=key):
            if produced.get(key) is ref:  # the id may already name a newer tensor
                del produced[key]

        produced[key] = weakref.ref(tensor, forget)

    def _sync_reason(self, func, args, kwargs) -> str | None:
        if func in _DATA_DEPENDENT:
            return func.overloadpacket.__name__
        if func in _LIFTED:
            return "tensor from host data"
        if func is aten.repeat_interleave.Tensor and kwargs.get("output_size") is None:
            return "repeat_interleave"
        if func in _INDEXING:
            indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
            if any(_is_bool_tensor(i) for i in indices or ()):
                return "boolean-mask indexing"
            return None
        if func is aten._to_copy.default:
            target = kwargs.get("device")
            source = args[0]
            if target is not None and torch.device(target).type == "cpu" and _on_device(source):
                return "copy to host"
            if target is not None and torch.device(target).type != "cpu" and not _on_device(source) \
                    and not kwargs.get("non_blocking", False):
                return "blocking copy to device"
            return None
        if func is aten.copy_.default:
            destination, source = args[0], args[1]
            if not _on_device(destination) and _on_device(source):
                return "copy to host"
            non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            if _on_device(destination) and not _on_device(source) and not non_blocking:
                return "blocking copy to device"
        return None

    def _host_read(self, name: str, original):
        counter = self

        def read(tensor, *args, **kwargs):
            known = counter._produced.get(id(tensor))
            if not counter.paused and known is not None and known() is tensor:
                counter._count(f"host read ({name})")
            return original(tensor, *args, **kwargs)

        return read

    def __enter__(self):
        # numpy()/tolist() read memory directly, below the dispatcher: watched at the Python level.
        for name in _HOST_READS:
            original = getattr(torch.Tensor, name)
            self._originals[name] = original
            setattr(torch.Tensor, name, self._host_read(name, original))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            for name, original in self._originals.items():
                setattr(torch.Tensor, name, original)
            self._originals.clear()


@contextlib.contextmanager
def around_steps(region: Callable[[], contextlib.AbstractContextManager]) -> Iterator[None]:
    """Run each of a training step's own calls inside ``region()``: the step (forward and backward), the
    optimiser update and the metrics' per-step ``add``. That is what "inside a step" means for host
    syncs; the log window's one read-back, evaluation, checkpoints and the loader are outside. The
    loop's pieces are wrapped for the ``with`` block only (a test's or a benchmark's instrument)."""
    from cselab.train import loop
    from cselab.train.metrics import MetricsLog
    from cselab.train.optimizer import OptimizerStep

    def inside(function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            with region():
                return function(*args, **kwargs)

        return call

    originals = loop.choose_step, OptimizerStep.__call__, MetricsLog.add
    loop.choose_step = lambda *args, **kwargs: inside(originals[0](*args, **kwargs))
    OptimizerStep.__call__, MetricsLog.add = inside(originals[1]), inside(originals[2])
    try:
        yield
    finally:
        loop.choose_step, OptimizerStep.__call__, MetricsLog.add = originals
