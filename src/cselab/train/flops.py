"""Hardware efficiency: model FLOPs per step and the machine's measured matmul peak."""
from __future__ import annotations

import time

import torch


def matmul_peak_flops(dtype: torch.dtype = torch.bfloat16, seconds: float = 1.0, size: int = 1024,
                      device: str = "cpu", windows: int = 10) -> float:
    """Achieved FLOP/s of square matmuls for about ``seconds``: the practical peak to compare with.

    The time is cut into ``windows`` and the fastest window counts: a peak is what the machine can
    do, and on a shared or virtual machine a one-second average is pulled down by whatever else
    ran in that second (single one-second probes here ranged from 0.26 to 0.41 TFLOP/s).
    """
    # A private generator: probing must not move the global RNG (dropout, resumed runs).
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    for _ in range(3):  # warm up kernels and caches
        a @ b
    best, window = 0.0, seconds / windows
    for _ in range(windows):
        count, start = 0, time.perf_counter()
        while count == 0 or time.perf_counter() - start < window:
            a @ b
            count += 1
        if device != "cpu":
            torch.cuda.synchronize()
        best = max(best, 2 * size**3 * count / (time.perf_counter() - start))
    return best


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters that take part in matmuls: all but the (lookup-only) embedding tables."""
    embedding = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters())
    return sum(p.numel() for p in model.parameters()) - embedding


def training_flops(parameters: int, tokens: int) -> float:
    """6 x params x tokens: forward (2) plus backward (4) FLOPs of a dense transformer."""
    return 6.0 * parameters * tokens
