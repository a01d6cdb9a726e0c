"""Exact values and claims for a canary whose gradient is inserted at chosen steps (docs/theory.md 10).

A scheduled canary adds ``g_t / m`` to the noisy mean gradient at each step
``t`` of a set ``A`` (``g'_t / m``, or nothing, in ``S'``), whatever the
batch holds. Let ``Delta_t = |g_t - g'_t| / m`` and ``s = noise_std``.

Exact value (:func:`scheduled_laws`). On the whole space, with the records'
gradients zero and the linear loss, the release is ``start - eta sum_t
(noise_t + g_t / m)``: along ``v``, the direction of ``D = sum_t (g_t -
g'_t) / m``, the statistic is Gaussian with the same std ``s sqrt(T)`` under
both datasets, so ``mu = |D| / (s sqrt(T))`` (``|A| / (z sqrt(T))`` for one
direction, ``z = s m / L``). With the concave loss a step is ``theta <- a
theta - eta (...)``, ``a = 1 + eta beta``, and the last iterate is
``a^T start - eta sum_t a^(T-t) (noise_t + g_t / m)``: Gaussian again, with
``D = sum_t a^(T-t) (g_t - g'_t) / m`` and std ``s sqrt(sum_t a^(2(T-t)))``.

Claims (:func:`scheduled_claims`):

``scheduled-composition``
    Every iterate released: ``|A|`` adaptively composed Gaussian steps,
    ``mu = sqrt(sum_t Delta_t^2) / s`` (Dong, Roth, Su 2022, Cor. 3.3). Holds
    for any loss: the other records' steps are the same maps under ``S`` and
    ``S'``.
``scheduled-amplification``
    The last iterate of contractive steps (a convex, ``beta``-smooth loss with
    ``eta beta (largest batch) / m <= 2``; projection onto a convex ``K``
    keeps them contractive): privacy amplification by iteration (Feldman et
    al. 2018, Thm 22 with shifts ``a_t``) gives Renyi divergence ``alpha
    sum_t a_t^2 / (2 s^2)`` for any shifts whose running sums stay below
    those of ``Delta`` and end at the same total; the best are the slopes of
    the greatest convex minorant of the running sums (:func:`best_shifts`).
    For a canary at every step it is the exact ``alpha mu^2 / 2``; for one
    every ``k`` steps it adds ``(1 - 1/k) Delta^2 / s^2`` to ``mu^2``. Not
    applicable to a loss that is not convex, with the value a convex loss
    would get in the reason.

The usual claims of the mechanism assume the canary is a record sampled with
the batch; they are listed as not applicable to a scheduled canary.

References
----------
Cebere, Bellet, Papernot, "Tighter privacy auditing of DP-SGD in the hidden
state threat model", ICLR 2025.
Feldman, Mironov, Talwar, Thakurta, "Privacy Amplification by Iteration",
FOCS 2018.
Dong, Roth, Su, "Gaussian Differential Privacy", JRSS B 2022.
Annamalai, "It's our loss: no privacy amplification for hidden state DP-SGD
with non-convex loss", 2024.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, rdp_claim
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws, count_mixture
from dpaudit.mechanisms.accounting.profiles import gaussian_delta, gaussian_epsilon
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import NotExact
from dpaudit.mechanisms.losses import NONCONVEX_LOSSES

__all__ = ["best_shifts", "equivalent_mu", "expanding_pnsgd_laws", "is_scheduled", "scheduled_claims", "scheduled_laws", "step_differences"]

COMPOSITION = ("Gaussian composition of the canary's scheduled steps, every iterate released (Dong, Roth, Su "
               "2022, Cor. 3.3; docs/theory.md 10)")
AMPLIFICATION = ("amplification by iteration for the last iterate, shifts from the greatest convex minorant of "
                 "the canary's running sum (Feldman et al. 2018, Thm 22; docs/theory.md 10)")
NOT_SAMPLED = ("assumes the canary is a record sampled with the batch; this canary's gradient is inserted at "
               "chosen steps (the scheduled claims apply)")
_TOLERANCE = 1e-12


def is_scheduled(data_a: Dataset, data_b: Dataset) -> bool:
    """True when either dataset inserts a gradient at chosen steps."""
    return bool(data_a.scheduled or data_b.scheduled)


def _clipped(vector: np.ndarray, bound: float) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector if not math.isfinite(bound) or norm <= bound else vector * (bound / norm)


def step_differences(mech, data_a: Dataset, data_b: Dataset) -> np.ndarray:
    """``(g_t - g'_t) / m`` for every step ``t`` (rows ``0 .. T-1``), the inserted gradients clipped as sampled."""
    bound = float(mech.loss_function.lipschitz)
    rows = np.zeros((mech.steps, mech.dim))
    for data, sign in ((data_a, 1.0), (data_b, -1.0)):
        for step, vector in data.scheduled.items():
            rows[step - 1] += sign * _clipped(np.asarray(vector, dtype=float), bound)
    return rows / mech.batch_size


def _expansion(mech) -> float:
    """``a`` with ``theta <- a theta - eta (...)`` per step: 1, or ``1 + eta beta`` for the concave loss."""
    loss = mech.loss_function
    return 1.0 + float(mech.eta) * float(loss.smoothness) if loss.name == "concave" else 1.0


def scheduled_laws(mech, data_a: Dataset, data_b: Dataset) -> MixtureLaws:
    """The Gaussian laws of the last iterate along ``D`` (see the module text), or :class:`NotExact` with why."""
    loss = mech.loss_function
    if mech.output != "final":
        raise NotExact("every iterate is released: the last-iterate law does not describe the release")
    if mech.domain != "whole":
        raise NotExact(f"the scheduled canary's closed form needs the whole space, got domain={mech.domain!r}")
    if loss.name not in ("linear", "concave"):
        raise NotExact(f"the scheduled canary's closed form needs a linear step, got loss={mech.loss!r}")
    smoothing = float(getattr(mech, "smoothing", 0.0))
    if loss.name == "concave" and smoothing:
        raise NotExact("the concave loss with Laplacian smoothing has no scalar step: no closed form")
    if data_a.records.shape != data_b.records.shape or not np.array_equal(data_a.records, data_b.records) \
            or data_a.injected or data_b.injected:
        raise NotExact("a scheduled canary's datasets must share their records")
    records = loss.prepare(torch.as_tensor(data_a.records, dtype=torch.float64))
    if bool(torch.any(torch.linalg.vector_norm(records, dim=-1) > _TOLERANCE)):
        raise NotExact("other records have non-zero gradients: their batches add a mixture to the canary's law")
    steps, a = mech.steps, _expansion(mech)
    weights = a ** np.arange(steps - 1, -1, -1, dtype=float)  # a^(T-t), t = 1..T
    if not np.all(np.isfinite(weights)) or weights[0] > 1e150:
        raise NotExact(f"a^T = {a}^{steps} is beyond the float range of the closed form")
    means = {}
    for name, data in (("a", data_a), ("b", data_b)):
        rows = np.zeros((steps, mech.dim))
        for step, vector in data.scheduled.items():
            rows[step - 1] = _clipped(np.asarray(vector, dtype=float), float(loss.lipschitz))
        means[name] = weights @ rows / mech.batch_size
    difference = means["a"] - means["b"]
    size = float(np.linalg.norm(difference))
    v = difference / size if size > _TOLERANCE * max(float(loss.lipschitz), 1.0) else np.eye(mech.dim)[0]
    start, eta, growth = mech.start(1, torch.float64)[0].numpy(), float(mech.eta), float(weights[0] * a)

    def statistic(outputs: np.ndarray) -> np.ndarray:
        moved = (growth * start - outputs) / eta  # = sum_t a^(T-t) (noise_t + g_t / m), smoothed for DP-LSSGD
        if smoothing and mech.dim > 1:  # undo the smoothing A^-1 row by row: A = I - s L (periodic)
            moved = (1 + 2 * smoothing) * moved - smoothing * (np.roll(moved, 1, axis=1) + np.roll(moved, -1, axis=1))
        return moved @ v

    std = float(mech.noise_std) * math.sqrt(float(np.sum(weights**2)))
    return count_mixture(float(means["a"] @ v), float(means["b"] @ v), steps=1, rate=1.0, std=std,
                         statistic=statistic,
                         citation=("last iterate with a canary at chosen steps: Gaussian along the canary's summed "
                                   "gradient (docs/theory.md 10)"))


def expanding_pnsgd_laws(mech, data_a: Dataset, data_b: Dataset) -> MixtureLaws:
    """PNSGD with the concave loss on the whole space: Gaussian laws of the last iterate (docs/theory.md 10.4).

    A record's step is ``w <- a w - eta (x_t + Z_t)`` with ``a = 1 + eta beta``; an injected (canary)
    gradient replaces the record's whole gradient, so its step is ``w <- w - eta (g + Z_t)``. With ``r_k``
    the factor of step ``k`` and ``P_k`` the product of the later factors, ``w_T = (prod r) w_0 - eta sum_k
    P_k (g_k + Z_k)``: along the difference of the two means it is Gaussian with std ``sigma sqrt(sum_k
    P_k^2)`` under both datasets.
    """
    from dpaudit.mechanisms.accounting.training_laws import gradient_table

    if mech.domain != "whole" or str(mech.noise) != "gaussian" or mech.variant != "plain":
        raise NotExact(f"the concave loss's closed form needs the whole space, Gaussian noise and variant "
                       f"'plain', got domain={mech.domain!r}, noise={mech.noise!r}, variant={mech.variant!r}")
    a = 1.0 + float(mech.eta) * float(mech.loss_function.smoothness)
    positions = mech.positions()
    means, factors = {}, {}
    for name, data in (("a", data_a), ("b", data_b)):
        table = gradient_table(mech, data)
        rates = np.array([1.0 if position + 1 in data.injected else a for position in positions])
        later = np.concatenate([np.cumprod(rates[::-1])[::-1][1:], [1.0]])  # P_k: product of the later factors
        if not np.all(np.isfinite(later)) or later.max() > 1e150:
            raise NotExact(f"a^T = {a}^{len(positions)} is beyond the float range of the closed form")
        means[name] = later @ table[positions]
        factors[name] = (later, float(np.prod(rates)))
    if not np.allclose(factors["a"][0], factors["b"][0], rtol=1e-12, atol=0.0):
        raise NotExact("the canary's position differs between the datasets: no common closed form")
    later, growth = factors["a"]
    difference = means["a"] - means["b"]
    size = float(np.linalg.norm(difference))
    v = difference / size if size > _TOLERANCE * float(mech.loss_function.lipschitz) else np.eye(mech.dim)[0]
    start, eta = mech.start(1, torch.float64)[0].numpy(), float(mech.eta)

    def statistic(outputs: np.ndarray) -> np.ndarray:
        return ((growth * start - outputs) / eta) @ v

    return count_mixture(float(means["a"] @ v), float(means["b"] @ v), steps=1, rate=1.0,
                         std=float(mech.sigma) * math.sqrt(float(np.sum(later**2))), statistic=statistic,
                         citation="last iterate of concave-loss PNSGD: Gaussian (docs/theory.md 10.4)")


def best_shifts(differences: np.ndarray) -> np.ndarray:
    """Shifts ``a_t >= 0`` minimising ``sum a_t^2`` with running sums at most those of ``differences`` and the
    same total: the slopes of the greatest convex minorant of the points ``(t, sum_{tau <= t} Delta_tau)``."""
    totals = np.concatenate([[0.0], np.cumsum(np.asarray(differences, dtype=float))])
    hull: list[int] = []
    for t in range(totals.size):  # lower convex hull, monotone chain
        while len(hull) >= 2:
            t1, t2 = hull[-2], hull[-1]
            if (totals[t2] - totals[t1]) * (t - t1) >= (totals[t] - totals[t1]) * (t2 - t1):
                hull.pop()
            else:
                break
        hull.append(t)
    shifts = np.empty(differences.size)
    for left, right in zip(hull[:-1], hull[1:]):
        shifts[left:right] = (totals[right] - totals[left]) / (right - left)
    return shifts


def _gaussian_claim(name: str, citation: str, relation: str, mu: float) -> Claim:
    return Claim(name, citation, relation, epsilon_fn=lambda d: float(gaussian_epsilon(d, mu)),
                 delta_fn=lambda e: float(gaussian_delta(e, mu)))


def _contractive(mech) -> str:
    """Why the steps are not contractions (empty when they are)."""
    loss = mech.loss_function
    if loss.name in NONCONVEX_LOSSES:
        return (f"the {loss.name} loss is not convex: each step multiplies theta by a = 1 + eta beta = "
                f"{_expansion(mech):.6g} > 1, so steps expand and the contraction amplification by iteration "
                f"needs fails")
    if getattr(mech, "user_loss", None) is not None:
        return f"loss={mech.loss!r} is a loss of your own, not known to be convex and smooth"
    largest = mech.n if mech.sampling == "poisson" else mech.batch_size
    if loss.smoothness > 0 and mech.eta * loss.smoothness * largest / mech.batch_size > 2:
        return (f"eta beta (largest batch) / m = {mech.eta * loss.smoothness * largest / mech.batch_size:.6g} > 2: "
                f"the steps are not contractions")
    if float(getattr(mech, "smoothing", 0.0)):
        return "Laplacian smoothing makes the noise anisotropic; the theorem is stated for isotropic noise"
    return ""


def equivalent_mu(differences: np.ndarray, noise_std: float) -> float:
    """``sqrt(sum_t a_t^2) / s``: the Gaussian whose Renyi curve the amplification bound is."""
    return float(np.sqrt(np.sum(best_shifts(differences) ** 2))) / noise_std


def _amplification_rdp(differences: np.ndarray, noise_std: float) -> np.ndarray:
    shifts = best_shifts(differences)
    return DEFAULT_ORDERS * float(np.sum(shifts**2)) / (2 * noise_std**2)


def scheduled_claims(mech, data_a: Dataset, data_b: Dataset, relation: str, usual: list[Claim]) -> list[Claim]:
    """The claims for a scheduled canary: composition of its steps, amplification by iteration, and the
    mechanism's ``usual`` claims marked not applicable (see the module text)."""
    differences = np.linalg.norm(step_differences(mech, data_a, data_b), axis=1)
    s = float(mech.noise_std)
    claims = [_gaussian_claim("scheduled-composition", COMPOSITION, relation,
                              float(np.sqrt(np.sum(differences**2))) / s)]
    reason = _contractive(mech) or ("every iterate is released: this bound is for the last iterate alone"
                                    if mech.output != "final" else "")
    if reason:
        if mech.loss_function.name in NONCONVEX_LOSSES or getattr(mech, "user_loss", None) is not None:
            reason += (f"; for a convex loss it would give the Renyi curve of a Gaussian with mu = "
                       f"{equivalent_mu(differences, s):.4g} here")
        claims.append(not_applicable("scheduled-amplification", AMPLIFICATION, relation, reason))
    else:
        claims.append(rdp_claim("scheduled-amplification", AMPLIFICATION, relation, DEFAULT_ORDERS,
                                _amplification_rdp(differences, s)))
    claims += [not_applicable(claim.name, claim.citation, claim.relation, NOT_SAMPLED) for claim in usual]
    return claims
