"""Hardware efficiency of training: model FLOP/s and their share of the hardware's peak (MFU).

On a GPU the peak is the vendor's dense figure for the precision in use (``GPU_PEAKS``, by device
name); on a CPU, which has no such figure, it is measured: the highest of short matmul probes. The
training log calls :class:`Throughput` once per log window; nothing here runs per step beyond
adding up token counts the collator already counted on the host.
"""
from __future__ import annotations

import re
import time

import torch

REPROBE_SECONDS = 600.0  # the peak is probed again this often, and sooner when a window beats it,
REPROBE_MIN_SECONDS = 120.0  # but not more often than this: a probe costs a second
_PEAKS: dict = {}  # (dtype, device type) -> (highest probe, when it was last probed)

# Dense tensor-core TFLOP/s from the vendors' data sheets (no sparsity): (bf16/fp16, tf32 for fp32).
# Matched against torch.cuda.get_device_name() as whole words ("L4" is not in "NVIDIA L40"), the
# longest matching name winning ("H100 PCIe" over "H100").
GPU_PEAKS = (
    ("H200", (989.4, 494.7)),
    ("H100 PCIe", (756.0, 378.0)),
    ("H100 NVL", (835.5, 417.8)),
    ("H100", (989.4, 494.7)),  # SXM: "NVIDIA H100 80GB HBM3"
    ("GH200", (989.4, 494.7)),
    ("A100", (312.0, 156.0)),
    ("A10G", (70.0, 35.0)),
    ("A10", (125.0, 62.5)),
    ("L40S", (362.1, 183.0)),
    ("L40", (181.0, 90.5)),
    ("L4", (121.0, 60.0)),
    ("RTX 4090", (165.2, 82.6)),
    ("V100", (125.0, 15.7)),  # no bf16 or tf32: fp16 tensor cores, fp32 CUDA cores
    ("T4", (65.0, 8.1)),
)


def gpu_peak_flops(dtype: torch.dtype, device_name: str) -> float | None:
    """The vendor's dense peak for ``dtype`` on the named GPU, in FLOP/s; None for an unknown card."""
    found = [(len(name), peaks) for name, peaks in GPU_PEAKS
             if re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", device_name)]
    if not found:
        return None
    half, tf32 = max(found, key=lambda item: item[0])[1]
    return (tf32 if dtype == torch.float32 else half) * 1e12


def matmul_peak_flops(dtype: torch.dtype = torch.bfloat16, seconds: float = 1.0, size: int = 1024,
                      device: str = "cpu", windows: int = 10) -> float:
    """Achieved FLOP/s of square matmuls for about ``seconds``: the practical peak to compare with.

    The time is cut into ``windows`` and the fastest window counts: a peak is what the machine can
    do, and on a shared or virtual machine a one-second average is pulled down by whatever else
    ran in that second (single one-second probes here ranged from 0.26 to 0.41 TFLOP/s). Each
    matmul is waited for before the clock is read: on a GPU, kernels launched without waiting
    queue up far past the window (an unknown card's probe ran ~15 s), and a square whose one
    matmul overruns a window is probed smaller.
    """
    # A private generator: probing must not move the global RNG (dropout, resumed runs).
    generator = torch.Generator().manual_seed(0)
    size = size if device == "cpu" else max(size, 8192)  # a GPU needs large matmuls to approach its peak
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    _matmul(a, b, device)  # the first call: kernel selection, allocation
    start = time.perf_counter()
    _matmul(a, b, device)
    if size > 128 and time.perf_counter() - start > seconds / windows:
        # A slow kernel (fp16, or bf16 without native support, on a CPU: seconds per matmul; fp32
        # on a small GPU) would stretch the probe far past its budget: probe a smaller square.
        return matmul_peak_flops(dtype, seconds, size // 4, device, windows)
    best, window = 0.0, seconds / windows
    for _ in range(windows):
        count, start = 0, time.perf_counter()
        while count == 0 or time.perf_counter() - start < window:
            _matmul(a, b, device)
            count += 1
        best = max(best, 2 * size**3 * count / (time.perf_counter() - start))
    return best


def _matmul(a: torch.Tensor, b: torch.Tensor, device: str) -> None:
    """One matmul, finished (on a GPU the host waits for it: the probe times work done, not queued)."""
    a @ b
    if device != "cpu":
        torch.cuda.synchronize(device)


def measured_peak(dtype: torch.dtype, device: str, achieved: float = 0.0) -> float:
    """The matmul peak of this machine: the highest of this process's one-second probes.

    The first call probes; later calls probe again after :data:`REPROBE_SECONDS`, or after
    :data:`REPROBE_MIN_SECONDS` when ``achieved`` (a window's FLOP/s) beats the peak. A virtual
    machine's speed drifts by 10-20% over minutes, and a probe that caught a slow second would
    overstate every MFU after it.
    """
    peak, probed_at = _PEAKS.get((dtype, device), (0.0, None))
    since = None if probed_at is None else time.perf_counter() - probed_at
    if since is None or since > REPROBE_SECONDS or (achieved > peak and since > REPROBE_MIN_SECONDS):
        peak = max(peak, matmul_peak_flops(dtype, seconds=1.0, device=device))
        _PEAKS[(dtype, device)] = (peak, time.perf_counter())
    return peak


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters that take part in matmuls: all but the (lookup-only) embedding tables."""
    embedding = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    return sum(p.numel() for p in model.parameters()) - embedding


def training_flops(parameters: int, tokens: int) -> float:
    """6 x params x tokens: forward (2) plus backward (4) FLOPs of a dense transformer."""
    return 6.0 * parameters * tokens


class Throughput:
    """Real and padded tokens of a log window -> model TFLOP/s, MFU and the share of padding.

    FLOPs count real (unpadded) tokens of the contrastive views; an MLM term's own pass is not
    counted. With P processes the window's FLOPs are the global batch's, the peak one process's.
    """

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype, device: str, processes: int = 1):
        self.parameters = non_embedding_parameters(model)
        self.dtype, self.device, self.processes = dtype, device, processes
        self.tokens = self.padded = 0
        self.vendor_peak = gpu_peak_flops(dtype, torch.cuda.get_device_name()) if device == "cuda" else None
        if self.vendor_peak is None:
            measured_peak(dtype, device)  # probed before the first step, not inside a timed window

    def add(self, real_tokens: int, padded_tokens: int) -> None:
        self.tokens += real_tokens * self.processes
        self.padded += padded_tokens * self.processes

    def record(self, seconds: float) -> dict[str, float]:
        """The window's figures; the counts start again."""
        if not self.padded or seconds <= 0:
            self.tokens = self.padded = 0
            return {}
        flops = training_flops(self.parameters, self.tokens)
        rate = flops / seconds / self.processes
        peak = self.vendor_peak or measured_peak(self.dtype, self.device, achieved=rate)
        record = {"model_tflops": flops / seconds / 1e12, "mfu": rate / peak,
                  "padding": 1 - self.tokens / self.padded}
        self.tokens = self.padded = 0
        return record
