"""Noise draws from an explicit ``numpy.random.Generator``, as torch tensors.

NumPy's ziggurat samplers give normals with exact tails; arrays are wrapped
without copying (``torch.from_numpy``). No global RNG is used. Iterative
mechanisms refill one buffer per step with unit noise (:class:`StepNoise`)
and scale it inside their update, which saves a pass over the data.
"""

from __future__ import annotations

import numpy as np
import torch

from dpaudit.core.kinds import NoiseKind

__all__ = ["StepNoise", "draw", "gaussian", "laplace", "uniform"]

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
    kind = NoiseKind(kind)  # ValueError for anything but "gaussian" or "laplace"
    if kind is NoiseKind.GAUSSIAN:
        return gaussian(shape, spread, rng, dtype)
    return laplace(shape, spread, rng, dtype)


class StepNoise:
    """One buffer refilled in place with unit noise at every step.

    ``kind="gaussian"`` gives ``N(0, 1)`` entries, ``kind="laplace"`` gives
    ``Lap(0, 1)`` entries; the caller multiplies by the spread (``sigma`` or
    the Laplace scale) inside its update, e.g. ``w.sub_(z, alpha=eta * sigma)``.

    >>> source = StepNoise("gaussian", (1000, 10), rng, torch.float64)
    >>> z = source.next()   # a tensor sharing the buffer: valid until the next call
    """

    def __init__(self, kind: str, shape: tuple[int, ...], rng: np.random.Generator,
                 dtype: torch.dtype) -> None:
        self.kind, self.rng = NoiseKind(kind), rng
        self.buffer = np.empty(shape, dtype=_NUMPY[dtype])
        self.tensor = torch.from_numpy(self.buffer)

    def next(self) -> torch.Tensor:
        """Fresh unit noise of the next step (overwrites the previous step's)."""
        if self.kind == "gaussian":
            self.rng.standard_normal(out=self.buffer, dtype=self.buffer.dtype)
        else:
            self.buffer[...] = self.rng.laplace(0.0, 1.0, self.buffer.shape)
        return self.tensor
