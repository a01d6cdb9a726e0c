"""Correlated noise of DP matrix factorisation, drawn for a tile of trials at once (docs/theory.md 12.1).

The gradient noise of step ``t`` is ``(M z)_t`` with ``z`` i.i.d. standard
normal (``accounting.strategies``): ``C^{-1} z`` for a square lower-triangular
strategy, differences of noisy dyadic prefix sums for DP-FTRL's tree.

A square ``C`` of bandwidth ``b`` is solved forward in blocks of ``B`` steps:
with ``x = C^{-1} z``,

    x[s:s+B] = C[s:s+B, s:s+B]^{-1} (z[s:s+B] - C[s:s+B, s-b+1:s] x[s-b+1:s]),

two matrix products per block over every trial and coordinate at once
(``O(n (B + b))`` per trial and coordinate, never a dense inverse): the
trials' noise is laid out as ``(trials * dim, steps)`` so each product is one
GEMM and a block of iterates is written row by row. The tree draws one epoch's node noise and adds each step's nodes with
a sparse product (``O(n log n)``). :meth:`CorrelatedNoise.total` gives
``sum_t (M z)_t = <w, z>`` for the last iterate of a linear loss without the
recursion (``w = C^{-T} 1``), from the same draws.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from scipy.linalg import solve_triangular

from dpaudit.mechanisms.accounting.descriptions import Strategy
from dpaudit.mechanisms.accounting.participation import bandwidth
from dpaudit.mechanisms.accounting.strategies import lower_matrix, tree_noise_matrix

__all__ = ["BLOCK_STEPS", "CorrelatedNoise"]

#: Steps solved per block: large enough that each block is a GEMM, small enough that its inverse is cheap.
BLOCK_STEPS = 32
_NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


@functools.lru_cache(maxsize=32)
def _blocks(strategy: Strategy, block: int) -> tuple[tuple[int, np.ndarray, np.ndarray], ...]:
    """Per block: its first step, the inverse of its diagonal block of ``C``, and its coupling to the
    ``b - 1`` steps before it (shape ``(B, h)``)."""
    lower = lower_matrix(strategy)
    n = strategy.steps
    reach = bandwidth(lower) - 1
    out = []
    for start in range(0, n, block):
        stop = min(start + block, n)
        inverse = solve_triangular(lower[start:stop, start:stop], np.eye(stop - start), lower=True)
        first = max(start - reach, 0)
        out.append((start, inverse, lower[start:stop, first:start].copy()))
    return tuple(out)


@functools.lru_cache(maxsize=16)
def _tree_epoch(epoch_steps: int) -> np.ndarray:
    """The tree's noise matrix of one epoch, ``(epoch_steps, nodes)`` (entries -1, 0, 1)."""
    return tree_noise_matrix(epoch_steps, epoch_steps)


class CorrelatedNoise:
    """The unit correlated noise of each step, for ``rows`` trials of a ``dim``-dimensional model.

    Blocks are held trial-major, ``(rows * dim, steps of the block)``: a block's two products are GEMMs over
    every trial, and a block of iterates is written to the output row by row. ``next()`` returns the next
    step's noise, shape ``(rows, dim)``; ``next_block()`` a block's, shape ``(rows, dim, steps)``. Use one or
    the other. Every normal comes from ``rng``, in a fixed order.
    """

    def __init__(self, strategy: Strategy, rows: int, dim: int, rng: np.random.Generator,
                 dtype: torch.dtype, block: int = BLOCK_STEPS) -> None:
        self.strategy, self.rows, self.dim, self.rng, self.dtype = strategy, rows, dim, rng, dtype
        self.block = block
        self.step = 0
        self._current: torch.Tensor | None = None
        self._offset = 0
        self._history = torch.zeros((rows * dim, 0), dtype=dtype)
        if strategy.kind == "tree":
            epoch = _tree_epoch(strategy.epoch_steps)
            self._tree = torch.from_numpy(epoch).to(dtype).to_sparse().coalesce()
            self._nodes = epoch.shape[1]
        elif strategy.kind != "identity":
            # per block: x = z A - x_prev B with A = D^{-T} (D its diagonal block of C) and B = (D^{-1} E)^T
            # (E its coupling to the steps before), both transposed once here
            self._plan = [(torch.from_numpy(inverse.T.copy()).to(dtype),
                           torch.from_numpy((inverse @ coupling).T.copy()).to(dtype))
                          for _, inverse, coupling in _blocks(strategy, block)]
            self._reach = max(coupling.shape[0] for _, coupling in self._plan)

    def _normals(self, count: int) -> torch.Tensor:
        values = self.rng.standard_normal((self.rows * self.dim, count), dtype=_NUMPY[self.dtype])
        return torch.from_numpy(values)

    def _refill(self) -> torch.Tensor:
        """The next block, ``(rows * dim, steps of the block)``."""
        kind = self.strategy.kind
        if kind == "identity":
            return self._normals(min(self.block, self.strategy.steps - self.step))
        if kind == "tree":  # one epoch: its nodes' noise, each step's nodes added by a sparse product
            return torch.sparse.mm(self._tree, self._normals(self._nodes).T).T
        forward, coupling = self._plan[self.step // self.block]
        solved = self._normals(forward.shape[0]) @ forward
        reach = coupling.shape[0]
        if reach:
            solved.addmm_(self._history[:, -reach:], coupling, alpha=-1.0)
        if self._reach:  # the steps the next blocks couple to
            if self._reach <= solved.shape[1]:
                self._history = solved[:, -self._reach:]
            else:
                self._history = torch.cat([self._history, solved], dim=1)[:, -self._reach:]
        return solved

    def next(self) -> torch.Tensor:
        """The next step's unit correlated noise, shape ``(rows, dim)`` (valid until the next block is drawn)."""
        if self._current is None or self._offset == self._current.shape[0]:
            self._current, self._offset = self._refill().T.contiguous(), 0
        row = self._current[self._offset].view(self.rows, self.dim)
        self._offset += 1
        self.step += 1
        return row

    def next_block(self) -> torch.Tensor:
        """The noise of the next block of steps, shape ``(rows, dim, steps in the block)``."""
        block = self._refill()
        self.step += block.shape[1]
        return block.view(self.rows, self.dim, block.shape[1])

    def total(self) -> torch.Tensor:
        """``sum_t (M z)_t`` over every step, shape ``(rows, dim)``: ``<w, z>`` with ``w = M^T 1``, from the
        normals the blocks would draw, without the recursion (the last iterate of a linear loss)."""
        strategy = self.strategy
        total = torch.zeros(self.rows * self.dim, dtype=self.dtype)
        if strategy.kind == "tree":
            weights = torch.from_numpy(_tree_epoch(strategy.epoch_steps).sum(axis=0)).to(self.dtype)
            for _ in range(strategy.steps // strategy.epoch_steps):
                total.add_(self._normals(self._nodes) @ weights)
            return total.view(self.rows, self.dim)
        weights = torch.from_numpy(_total_weights(strategy)).to(self.dtype)
        for start in range(0, strategy.steps, self.block):
            chunk = weights[start:start + self.block]
            total.add_(self._normals(chunk.shape[0]) @ chunk)
        return total.view(self.rows, self.dim)


@functools.lru_cache(maxsize=32)
def _total_weights(strategy: Strategy) -> np.ndarray:
    """``w = C^{-T} 1`` (square strategies): ``sum_t (C^{-1} z)_t = <w, z>``."""
    if strategy.kind == "identity":
        return np.ones(strategy.steps)
    return solve_triangular(lower_matrix(strategy), np.ones(strategy.steps), lower=True, trans="T")
