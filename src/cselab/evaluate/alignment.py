"""Alignment and uniformity of normalised embeddings (Wang & Isola, 2020), as SimCSE measures them.

alignment  = E over positive pairs of ||f(x) - f(y)||^alpha           (lower is better, alpha = 2)
uniformity = log E over all pairs of exp(-t * ||f(x) - f(y)||^2)      (lower is better, t = 2)

SimCSE takes STS-B pairs with a gold score above 4 as positive pairs and all STS-B sentences as the
data distribution.
"""
from __future__ import annotations

import numpy as np
import torch


def _normalised(x: np.ndarray) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.as_tensor(np.asarray(x), dtype=torch.float64), dim=-1)


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Mean distance^alpha between the rows of x and y (positive pairs) after L2 normalisation."""
    return float((_normalised(x) - _normalised(y)).norm(dim=1).pow(alpha).mean())


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """Log of the mean Gaussian potential over all distinct pairs of rows, after L2 normalisation."""
    distances = torch.pdist(_normalised(x), p=2)
    return float(distances.pow(2).mul(-t).exp().mean().log())
