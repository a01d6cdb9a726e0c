"""Trials in tiles: fixed blocks of rows, each with its own generator, sampled in threads.

Trials are independent, so a batch of ``trials`` rows is cut into tiles of
:data:`TILE_TRIALS` rows (the last one shorter). Tile ``k`` draws all of its
randomness from the ``k``-th child of the batch's generator
(``Generator.spawn``) and runs every step of the mechanism on its rows. The
tiles are independent, so they run in a thread pool: NumPy releases the GIL
while it fills noise arrays and torch releases it inside its kernels. A tile's
buffers stay in a core's cache from one step to the next.

Which generator draws which rows depends only on the number of trials, never
on the number of threads, so results are the same on any machine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

__all__ = ["TILE_TRIALS", "run", "set_threads", "threads", "tile_sizes"]

#: Rows per tile: a (8192, 10) float64 iterate and its noise take 1.3 MB, within one core's L2 cache.
TILE_TRIALS = 8192

T = TypeVar("T")
_threads = os.cpu_count() or 1
_pool: ThreadPoolExecutor | None = None


def _forget_pool_in_child() -> None:
    # a forked child inherits the pool object but not its threads: work submitted to it would wait forever
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_in_child)


def set_threads(count: int) -> None:
    """Threads that sample tiles in parallel (the runner's worker processes use 1)."""
    global _threads, _pool
    count = max(1, int(count))
    if count != _threads and _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None
    _threads = count


def threads() -> int:
    """The number of threads tiles are sampled in."""
    return _threads


def tile_sizes(trials: int, rows: int = TILE_TRIALS) -> list[int]:
    """Rows of each tile: ``rows`` each (default ``TILE_TRIALS``), the last one holding the rest."""
    full, rest = divmod(trials, rows)
    return [rows] * full + ([rest] if rest else [])


def fill(function: Callable[[int, np.random.Generator], np.ndarray], out: np.ndarray, rng: np.random.Generator,
         rows: int = TILE_TRIALS, finish: Callable[[np.ndarray], object] | None = None) -> np.ndarray:
    """Like :func:`run`, but each tile's rows are written into ``out`` as soon as they are made.

    Memory holds ``out`` and the tiles in flight, never a list of every tile
    and a concatenated copy. Tile ``k`` uses the same generator as in :func:`run`.
    ``finish``, if given, is applied in place to each tile's block of ``out``
    right after it is written, in the tile's thread while the block is still
    in that core's cache (the release snapping: one pass per tile, in
    parallel, instead of a pass over the whole output at the end).
    """
    sizes = tile_sizes(out.shape[0], rows)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)

    def one(start: int, size: int, generator: np.random.Generator) -> None:
        block = out[start:start + size]
        block[...] = function(size, generator)
        if finish is not None:
            finish(block)

    _map(one, starts.tolist(), sizes, rng.spawn(len(sizes)))
    return out


def _map(function: Callable, *arguments: list) -> list:
    global _pool
    if _threads == 1 or len(arguments[0]) == 1:
        return [function(*values) for values in zip(*arguments)]
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="dpaudit-tile")
    return list(_pool.map(function, *arguments))


def run(function: Callable[[int, np.random.Generator], T], trials: int,
        rng: np.random.Generator) -> list[T]:
    """``[function(rows, generator) for each tile]``, in tile order, in parallel threads.

    Parameters
    ----------
    function : callable
        Samples ``rows`` independent trials from ``generator``.
    trials : int
        Total number of trials.
    rng : numpy.random.Generator
        The batch's generator; tile ``k`` uses ``rng.spawn(tiles)[k]``.
    """
    sizes = tile_sizes(trials)
    return _map(function, sizes, rng.spawn(len(sizes)))
