"""Which device and numeric precision a run uses, chosen for the machine at hand.

bf16 is not a safe default on CPUs: where the CPU has no native bf16 instructions (no
``avx512_bf16`` or AMX on x86, no ``bf16`` on Arm) PyTorch falls back to a slow reference GEMM,
measured 20x slower than fp32 on an AVX2-only AMD EPYC. ``precision: auto`` therefore never picks
bf16 on such a CPU; on a CPU that has it, a short matmul probe of the model's shape decides between
bf16 and fp32 (cached per machine). On CUDA, auto is bf16 where the card has bf16 tensor cores
(compute capability 8.0 and later), else fp16 (``torch.cuda.is_bf16_supported()`` also counts
emulated bf16).
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from cselab.errors import ConfigError
from cselab.file_writes import write_text_atomically

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "bf16", "fp16", "fp32")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# x86 flags and Arm features that mean bf16 matmuls run natively.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def resolve_device(name: str = "auto", key: str = "device") -> torch.device:
    """``auto`` = CUDA when present, else CPU; ``cuda`` or ``cuda:N`` without that GPU is a ConfigError
    naming ``key`` (the recipe key or command-line option the value came from)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{key}: {name!r} is not one of auto, cpu, cuda, cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"{key}: {name!r} is not one of auto, cpu, cuda, cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{key}: {name!r} asked for, but this machine has no CUDA GPU visible to PyTorch "
                              f"(torch {torch.__version__}); use device=auto or cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"{key}: {name!r} asked for, but only {torch.cuda.device_count()} GPU(s) are visible")
    return device


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, frozenset[str]]:
    """The CPU's name and feature flags as Linux reports them (read once; no flags elsewhere)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())  # the first processor's entries
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    return name, frozenset((fields.get("flags") or fields.get("Features") or "").split())


def cpu_flags() -> frozenset[str]:
    return _cpuinfo()[1]


def cpu_has_native_bf16() -> bool:
    return bool(cpu_flags() & NATIVE_BF16_FLAGS)


def cpu_name() -> str:
    return _cpuinfo()[0]


@dataclass
class PrecisionChoice:
    """The precision a run uses and why (logged, and written to the run's summary)."""

    precision: str
    requested: str
    reason: str
    probe: dict | None = None

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.precision]

    def to_dict(self) -> dict:
        return asdict(self)


def cuda_has_native_bf16(device: torch.device) -> bool:
    """bf16 tensor cores: compute capability 8.0 (Ampere) and later. ``torch.cuda.is_bf16_supported()``
    also says yes where bf16 is only emulated (V100, T4: many times slower than fp16)."""
    return torch.cuda.get_device_capability(device) >= (8, 0)


def choose_precision(requested: str, device: torch.device, hidden_size: int = 384) -> PrecisionChoice:
    """Resolve ``auto`` for this device; a forced choice is kept, with a warning where it will be slow."""
    if requested not in PRECISIONS:
        raise ConfigError(f"precision: {requested!r} is not one of {', '.join(PRECISIONS)}")
    if device.type == "cuda":
        if requested != "auto":
            return PrecisionChoice(requested, requested, "forced")
        name = torch.cuda.get_device_name(device)
        if cuda_has_native_bf16(device):
            return PrecisionChoice("bf16", requested, f"{name} has native bf16 (compute capability >= 8.0)")
        return PrecisionChoice("fp16", requested, f"{name} has no native bf16 (compute capability < 8.0): fp16")
    native = cpu_has_native_bf16()
    if requested != "auto":
        if requested in ("bf16", "fp16") and not native:
            log.warning("precision %s forced on a CPU without native bf16/fp16 matmuls (%s): expect it to run many "
                        "times slower than fp32 (precision: auto picks fp32 here)", requested, cpu_name())
        return PrecisionChoice(requested, requested, "forced")
    if not native:
        return PrecisionChoice("fp32", requested, f"{cpu_name()} has no native bf16 (no avx512_bf16/AMX)")
    probe = probe_cpu_matmuls(hidden_size)
    faster = "bf16" if probe["bf16_tflops"] > probe["fp32_tflops"] else "fp32"
    return PrecisionChoice(faster, requested, "faster in the matmul probe", probe)


def cache_dir() -> Path:
    """Where cselab keeps what it measured of this machine: ``$CSELAB_CACHE``, else ~/.cache/cselab."""
    return Path(os.environ.get("CSELAB_CACHE", Path.home() / ".cache" / "cselab"))


def device_name(device: torch.device) -> str:
    """The GPU's name on CUDA, the CPU's model name otherwise."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


def read_measurements(name: str) -> dict:
    """The measurements cached in ``cache_dir() / name`` (a JSON object; empty when absent or unreadable)."""
    try:
        cached = json.loads((cache_dir() / name).read_text())
    except (OSError, ValueError):
        return {}
    return cached if isinstance(cached, dict) else {}


def write_measurement(name: str, key: str, value: dict) -> None:
    """Store ``value`` under ``key`` in ``cache_dir() / name``, atomically (a failure to write is not an error:
    the machine is measured again next time)."""
    cached = read_measurements(name)
    cached[key] = value
    path = cache_dir() / name
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, json.dumps(cached, indent=1))


PRECISION_PROBE = "precision-probe.json"


def probe_cpu_matmuls(hidden_size: int, rows: int = 2048, seconds: float = 0.3) -> dict:
    """TFLOP/s of (rows x h) @ (h x 4h) matmuls in bf16 and fp32, the shape of a transformer's FFN.

    Cached per CPU, flag set, torch version, thread count and shape, so a run pays it once.
    """
    key_text = "|".join([cpu_name(), ",".join(sorted(cpu_flags())), torch.__version__,
                         str(torch.get_num_threads()), str(hidden_size), str(rows)])
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    cached = read_measurements(PRECISION_PROBE)
    if isinstance(cached.get(key), dict):
        return cached[key]
    generator = torch.Generator().manual_seed(0)  # a private generator: the global RNG is untouched
    a = torch.randn(rows, hidden_size, generator=generator)
    b = torch.randn(hidden_size, 4 * hidden_size, generator=generator)
    result = {"cpu": cpu_name(), "hidden_size": hidden_size, "rows": rows}
    for name in ("fp32", "bf16"):
        x, y = a.to(DTYPES[name]), b.to(DTYPES[name])
        x @ y  # warm-up: kernel selection and caches
        count, start = 0, time.perf_counter()
        while count < 2 or time.perf_counter() - start < seconds:
            x @ y
            count += 1
        result[f"{name}_tflops"] = round(2 * rows * hidden_size * 4 * hidden_size * count
                                         / (time.perf_counter() - start) / 1e12, 4)
    write_measurement(PRECISION_PROBE, key, result)
    return result


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """Autocast to ``precision`` on ``device`` (a no-op context for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision])
