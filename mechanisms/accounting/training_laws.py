"""The exact laws of DP-SGD's, DP-LSSGD's and PNSGD's last iterate on an instance, when they have a closed form.

``dpsgd_laws`` and ``pnsgd_laws`` check that the instance is one the
mixture of ``last_iterate`` describes exactly (whole space, linear loss,
Gaussian noise, the datasets differing in one record whose gradients in
``S`` and ``S'`` lie on one line ``u``, the other records' gradients zero, or
orthogonal to ``u`` under Poisson sampling) and raise :class:`NotExact`
with the reason otherwise (docs/theory.md 5.1).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws, count_mixture
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import NotExact

__all__ = ["dpsgd_laws", "gradient_table", "pnsgd_laws"]

_TOLERANCE = 1e-12  # gradients this close (relative to L) count as equal, or as orthogonal to u


def gradient_table(mech, data: Dataset) -> np.ndarray:
    """The clipped constant gradient each record (or its injected gradient) contributes, ``(n, dim)``."""
    from dpaudit.mechanisms.losses import _clip_rows

    loss = mech.loss_function
    records = loss.prepare(torch.as_tensor(data.records, dtype=torch.float64))
    table = loss.gradient(torch.zeros(mech.dim, dtype=torch.float64), records).clone()
    for position, vector in data.injected.items():
        table[position - 1] = _clip_rows(torch.as_tensor(vector, dtype=torch.float64), loss.lipschitz)
    return table.numpy()


def _common_checks(mech, noise: str) -> None:
    if mech.domain != "whole":
        raise NotExact(f"the last-iterate mixture needs the whole space (no projection), got domain={mech.domain!r}")
    if mech.loss_function.name != "linear":
        raise NotExact(f"the last-iterate mixture needs constant gradients (loss='linear'), got loss={mech.loss!r}")
    if noise != "gaussian":
        raise NotExact(f"the last-iterate mixture needs Gaussian noise, got noise={noise!r}")
    if mech.output_dim != mech.dim:
        raise NotExact("the last-iterate mixture describes the last iterate only; this release holds more")


def _canary(mech, data_a: Dataset, data_b: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(u, g_a, g_b, others)``: the canary direction, its gradients in ``S`` and ``S'``, the shared rows."""
    if data_a.records.shape != data_b.records.shape:
        raise NotExact("the two datasets have different sizes")
    table_a, table_b = gradient_table(mech, data_a), gradient_table(mech, data_b)
    scale = _TOLERANCE * max(float(mech.loss_function.lipschitz), 1.0)
    differ = np.nonzero(np.linalg.norm(table_a - table_b, axis=1) > scale)[0]
    if differ.size > 1:
        raise NotExact(f"the datasets differ in {differ.size} records; the mixture covers one canary")
    position = int(differ[0]) if differ.size else mech.n - 1
    g_a, g_b = table_a[position], table_b[position]
    step = g_a - g_b
    if np.linalg.norm(step) > scale:
        u = step / np.linalg.norm(step)
    elif np.linalg.norm(g_a) > scale:
        u = g_a / np.linalg.norm(g_a)
    else:
        u = np.eye(mech.dim)[0]
    for g in (g_a, g_b):
        if np.linalg.norm(g - (g @ u) * u) > scale:
            raise NotExact("the canary's gradients in S and S' are not on one line through 0")
    others = np.delete(table_a, position, axis=0)
    return u, g_a, g_b, others


def _start(mech) -> np.ndarray:
    return mech.start(1, torch.float64)[0].numpy()


def dpsgd_laws(mech, data_a: Dataset, data_b: Dataset) -> MixtureLaws:
    """DP-SGD (or DP-LSSGD) on the whole space: ``Y = <A (start - out) / eta, u>`` is a count mixture.

    ``A`` undoes Laplacian smoothing (the identity for DP-SGD): the release
    is an invertible linear image of the summed noisy gradients, so the
    mixture is exact for both.
    """
    _common_checks(mech, "gaussian")
    sampling = str(mech.sampling)
    if sampling not in ("poisson", "without-replacement"):
        raise NotExact(f"the last-iterate mixture covers Poisson batches and batches without replacement, "
                       f"got sampling={sampling!r}")
    u, g_a, g_b, others = _canary(mech, data_a, data_b)
    scale = _TOLERANCE * max(float(mech.loss_function.lipschitz), 1.0)
    if sampling == "poisson":
        if np.any(np.abs(others @ u) > scale):
            raise NotExact("other records' gradients have a component along the canary direction")
    elif np.any(np.linalg.norm(others, axis=1) > scale):
        raise NotExact("other records have non-zero gradients: without replacement their batches depend on "
                       "the canary's")
    m, steps = mech.batch_size, mech.steps
    rate = m / mech.n  # the canary's chance to be in a batch, each step independently
    smoothing = float(getattr(mech, "smoothing", 0.0))
    start, eta = _start(mech), float(mech.eta)

    def statistic(outputs: np.ndarray) -> np.ndarray:
        moved = (start - outputs) / eta  # = A^{-1} (summed noisy gradients)
        if smoothing and mech.dim > 1:  # apply A_s = I - s L (periodic) row by row
            moved = (1 + 2 * smoothing) * moved - smoothing * (np.roll(moved, 1, axis=1) + np.roll(moved, -1, axis=1))
        return moved @ u

    return count_mixture(float(g_a @ u) / m, float(g_b @ u) / m, steps=steps, rate=rate,
                         std=float(mech.noise_std) * math.sqrt(steps), statistic=statistic,
                         citation=("last iterate of linear-loss DP-SGD: a mixture over the canary's participation "
                                   "count (Steinke et al. 2024; docs/theory.md 5.1)"))


def pnsgd_laws(mech, data_a: Dataset, data_b: Dataset) -> MixtureLaws:
    """PNSGD or multi-epoch PNSGD on the whole space: ``Y = <(start - out) / eta, u>`` is Gaussian.

    Every record is used once per epoch in a fixed order, so the canary's
    count is the number of epochs.
    """
    _common_checks(mech, str(mech.noise))
    if mech.variant != "plain":
        raise NotExact(f"variant={mech.variant!r}: a random window mixes the steps' noise with the canary's count")
    u, g_a, g_b, others = _canary(mech, data_a, data_b)
    uses = int(getattr(mech, "epochs", 1))
    offset = float(np.sum(others @ u)) * uses  # the other records' share, the same under S and S'
    start, eta = _start(mech), float(mech.eta)

    def statistic(outputs: np.ndarray) -> np.ndarray:
        return ((start - outputs) / eta) @ u

    return count_mixture(float(g_a @ u), float(g_b @ u), steps=uses, rate=1.0,
                         std=float(mech.sigma) * math.sqrt(mech.steps), offset=offset, statistic=statistic,
                         citation=("last iterate of linear-loss PNSGD on the whole space: Gaussian "
                                   "(docs/theory.md 5.1)"))
