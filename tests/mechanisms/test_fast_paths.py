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


@pytest.mark.parametrize("domain", ["ball", "box", "whole"])
def test_release_per_tile_equals_release_of_the_whole_output(domain):
    from dpaudit.mechanisms import make, tiles
    from dpaudit.mechanisms.base import make_rng

    mech = make("pnsgd", n=5, dim=3, domain=domain, eta=0.5, sigma=2.0)
    data = mech.default_dataset()
    trials = 2 * tiles.TILE_TRIALS + 5  # three tiles, the last one short
    raw = np.empty((trials, 3))
    tiles.fill(lambda rows, generator: mech._tile(data, rows, generator, torch.float64), raw, make_rng(11))
    released = mech.sample(data, trials=trials, seed=11)
    np.testing.assert_array_equal(released, mech.release(raw))
    assert not np.array_equal(released, raw)  # the snapping did act
    np.testing.assert_array_equal(released, np.round(released * 4096) / 4096)


def test_snap_in_place_equals_the_copying_snap():
    from dpaudit.mechanisms.base import snap

    values = np.random.default_rng(3).normal(scale=[[1e-6, 1.0, 1e3, 1e300]], size=(1000, 4))
    for toward_zero in (False, True):
        expected = snap(values, 2.0**-12, toward_zero=toward_zero)
        np.testing.assert_array_equal(snap(values.copy(), 2.0**-12, toward_zero=toward_zero, inplace=True), expected)
        np.testing.assert_array_equal(expected, (np.trunc if toward_zero else np.rint)(values / 2.0**-12) * 2.0**-12)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_ball_projector_equals_project(dtype):
    from dpaudit.mechanisms.domains import make_domain

    ball = make_domain("ball", radius=1.5)
    w = torch.from_numpy(np.random.default_rng(4).normal(size=(300, 7))).to(dtype)
    project_ = ball.projector(300, 7, dtype)
    expected = ball.project_(w.clone())
    for _ in range(2):  # the buffers are reused
        got = project_(w.clone())
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(got, ball.project(w))  # the definition, up to rounding
    assert bool(ball.contains(got.double(), tol=1e-6).all())


@pytest.mark.parametrize("loss", ["logistic", "huber", "linear", "quadratic"])
def test_loss_stepper_equals_the_gradient_step(loss):
    from dpaudit.mechanisms.domains import make_domain
    from dpaudit.mechanisms.losses import make_loss

    f = make_loss(loss, dim=4, lipschitz=1.0, domain=make_domain("ball", radius=2.0))
    rng = np.random.default_rng(5)
    records = f.prepare(torch.from_numpy(rng.normal(size=(6, f.record_dim))))
    w = torch.from_numpy(rng.normal(size=(50, 4)))
    step_ = f.stepper(records, 50)
    for position in range(6):
        expected = w - 0.3 * f.gradient(w, records[position])
        torch.testing.assert_close(step_(w.clone(), position, 0.3), expected, rtol=0, atol=1e-15)
        torch.testing.assert_close(step_(w.clone(), position, 0.3), f.descend_(w.clone(), records[position], 0.3),
                                   rtol=0, atol=0)
