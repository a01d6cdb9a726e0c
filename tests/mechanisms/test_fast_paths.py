"""The fast forms of the samplers' steps compute the same maps as their plain definitions.

Each fast path (the dense or Fourier smoothing solve, snapping per tile, the
ball projection with its own buffers, the in-place logistic step) is checked
against a direct computation; tolerances are float rounding (a few ulps of
values of order one), far below the 2^-12 release grid.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpaudit.mechanisms import lssgd


def _dense_solve(v: np.ndarray, smoothing: float) -> np.ndarray:
    dim = v.shape[-1]
    laplacian = -2 * np.eye(dim) + np.roll(np.eye(dim), 1, axis=1) + np.roll(np.eye(dim), -1, axis=1)
    return np.linalg.solve(np.eye(dim) - smoothing * laplacian, v.reshape(-1, dim).T).T.reshape(v.shape)


@pytest.mark.parametrize("dim", [2, 9, 10, lssgd.DENSE_MAX_DIM, lssgd.DENSE_MAX_DIM + 1, 150])
def test_both_smoothing_solves_equal_the_linear_solve(dim):
    v = np.random.default_rng(dim).normal(size=(7, dim))
    got = lssgd.laplacian_smooth(torch.from_numpy(v), 0.8).numpy()
    np.testing.assert_allclose(got, _dense_solve(v, 0.8), rtol=0, atol=1e-12)


def test_smoothing_keeps_shape_dtype_and_autograd():
    v = torch.from_numpy(np.random.default_rng(1).normal(size=(3, 4, 10)))
    got = lssgd.laplacian_smooth(v, 1.5)
    assert got.shape == v.shape and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), _dense_solve(v.numpy(), 1.5), atol=1e-12)
    single = lssgd.laplacian_smooth(v.to(torch.float32), 1.5)
    assert single.dtype == torch.float32
    np.testing.assert_allclose(single.numpy(), got.numpy(), atol=1e-5)
    leaf = v.clone().requires_grad_(True)  # user code may differentiate through it
    lssgd.laplacian_smooth(leaf, 1.5).sum().backward()
    assert leaf.grad is not None and leaf.grad.shape == v.shape
    # a non-contiguous input (a column slice) is read correctly
    wide = torch.from_numpy(np.random.default_rng(2).normal(size=(5, 20)))
    np.testing.assert_allclose(lssgd.laplacian_smooth(wide[:, ::2], 1.0).numpy(),
                               _dense_solve(wide[:, ::2].numpy(), 1.0), atol=1e-12)
