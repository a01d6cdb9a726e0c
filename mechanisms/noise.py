"""Batched noise draws from an explicit ``numpy.random.Generator``, as torch tensors.

NumPy's ziggurat samplers give float64 normals with exact tails; the arrays
are wrapped without copying (``torch.from_numpy``). No global RNG is used.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["draw", "gaussian", "laplace", "uniform"]

_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


def gaussian(shape: tuple[int, ...], std: float, rng: np.random.Generator,
             dtype: torch.dtype) -> torch.Tensor:
    """``N(0, std^2)`` entries."""
    out = torch.from_numpy(rng.standard_normal(shape, dtype=_NUMPY[dtype]))
    return out.mul_(std) if std != 1.0 else out


def laplace(shape: tuple[int, ...], scale: float, rng: np.random.Generator,
            dtype: torch.dtype) -> torch.Tensor:
    """``Lap(0, scale)`` entries."""
    return torch.from_numpy(rng.laplace(0.0, scale, shape).astype(_NUMPY[dtype], copy=False))


def uniform(shape: tuple[int, ...], rng: np.random.Generator) -> torch.Tensor:
    """``U[0, 1)`` float64 entries."""
    return torch.from_numpy(rng.random(shape))


def draw(kind: str, shape: tuple[int, ...], spread: float, rng: np.random.Generator,
         dtype: torch.dtype) -> torch.Tensor:
    """Gaussian (``spread`` = std) or Laplace (``spread`` = scale) noise."""
    if kind == "gaussian":
        return gaussian(shape, spread, rng, dtype)
    return laplace(shape, spread, rng, dtype)
