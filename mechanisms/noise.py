"""Batched noise draws from an explicit ``numpy.random.Generator``, as torch tensors.

NumPy's ziggurat samplers give float64 normals with exact tails; the arrays
are wrapped without copying (``torch.from_numpy``). No global RNG is used.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

__all__ = ["NoiseSteps", "draw", "fill", "gaussian", "laplace", "set_threads", "streams", "uniform"]

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


STREAMS = 2  # fixed: results never depend on the number of threads
_threads = min(STREAMS, os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None


def set_threads(count: int) -> None:
    """Threads filling noise buffers (the runner's worker processes use 1)."""
    global _threads
    _threads = max(1, min(int(count), STREAMS))


def streams(rng: np.random.Generator) -> list[np.random.Generator]:
    """``STREAMS`` independent child generators of ``rng`` (``Generator.spawn``)."""
    return rng.spawn(STREAMS)


def _fill_part(kind: str, part: np.ndarray, spread: float, rng: np.random.Generator) -> None:
    if kind == "gaussian":
        rng.standard_normal(out=part, dtype=part.dtype)
        if spread != 1.0:
            np.multiply(part, spread, out=part)
    else:
        part[...] = rng.laplace(0.0, spread, part.shape)


def fill(kind: str, buffer: np.ndarray, spread: float, generators: list[np.random.Generator]) -> None:
    """Overwrite ``buffer`` with noise in place, row blocks from ``generators`` (see :func:`streams`).

    NumPy releases the GIL while it fills arrays, so the blocks are filled in
    parallel threads; which generator fills which rows never changes.
    """
    global _pool
    parts = np.array_split(buffer, len(generators), axis=0)
    if _threads == 1 or buffer.shape[0] < 2048:
        for part, generator in zip(parts, generators):
            _fill_part(kind, part, spread, generator)
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=STREAMS)
    list(_pool.map(lambda item: _fill_part(kind, item[0], spread, item[1]), zip(parts, generators)))


class NoiseSteps:
    """Noise for ``steps`` consecutive steps, double-buffered: step ``k + 1`` is drawn while step ``k`` computes.

    The draws happen in the same order from the same generators whether or not
    a background thread is used, so results never depend on threading.

    >>> source = NoiseSteps("gaussian", (1000, 10), 0.5, rng, np.float64, steps=100)
    >>> for _ in range(100): z = source.next()   # a torch view of a buffer, valid until the next call
    """

    _prefetch: ThreadPoolExecutor | None = None

    def __init__(self, kind: str, shape: tuple[int, int], spread: float, rng: np.random.Generator,
                 dtype, steps: int, offsets: np.ndarray | None = None) -> None:
        """``offsets[k]`` (a row per step), if given, is added to step ``k``'s noise as it is drawn."""
        self.kind, self.spread, self.remaining = kind, spread, steps
        self.offsets, self.step = offsets, 0
        self.generators = streams(rng)
        self.buffers = [np.empty(shape, dtype=dtype), np.empty(shape, dtype=dtype)]
        self.tensors = [torch.from_numpy(b) for b in self.buffers]
        self.current = 0
        self.background = _threads > 1 and shape[0] >= 2048
        self.pending = self._start(0)

    def _fill(self, index: int) -> int:
        fill(self.kind, self.buffers[index], self.spread, self.generators)
        if self.offsets is not None:
            np.add(self.buffers[index], self.offsets[self.step], out=self.buffers[index])
        self.step += 1
        return index

    def _start(self, index: int):
        if not self.background:
            return self._fill(index)
        if NoiseSteps._prefetch is None:
            NoiseSteps._prefetch = ThreadPoolExecutor(max_workers=1)
        return NoiseSteps._prefetch.submit(self._fill, index)

    def next(self) -> torch.Tensor:
        """The noise of the next step, as a tensor sharing memory with a buffer."""
        index = self.pending.result() if self.background else self.pending
        self.remaining -= 1
        if self.remaining > 0:
            self.pending = self._start(1 - index)
        return self.tensors[index]
