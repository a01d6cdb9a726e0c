"""Privacy amplification by iteration: RDP bounds of Feldman et al. and follow-ups.

All functions return RDP curves ``eps(alpha)`` on an array of orders.

References
----------
Feldman, Mironov, Talwar, Thakurta, "Privacy Amplification by Iteration",
FOCS 2018 (arXiv:1808.06651): Thm 22 (shift reduction), Thm 23 (PNSGD per
index), Thm 24 (Skip-PNSGD), Thm 26 (Stop-PNSGD), Lemma 27 (local privacy),
Thm 35 (multiple epochs).
Asoodeh, Diaz, Calmon, Lemma 4 (contraction factor under strong convexity).
Altschuler & Talwar, "Privacy of Noisy Stochastic Gradient Descent: More
Iterations without More Privacy Loss", NeurIPS 2022 (bounded domains).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = [
    "bounded_domain_rdp",
    "contraction_factor",
    "local_rdp",
    "multi_epoch_rdp",
    "pnsgd_index_rdp",
    "shift_reduction_rdp",
    "shift_schedule",
    "stop_pnsgd_max_order",
    "stop_pnsgd_rdp",
    "strongly_convex_index_rdp",
]


def shift_schedule(shifts, noise_std, contraction=1.0) -> tuple[np.ndarray, float]:
    """The optimal ``a_t`` of the shift-reduction theorem, and its cost per unit order.

    Feldman et al. Thm 22: for CNIs differing in maps with
    ``s_t = sup_x ||psi_t(x) - psi'_t(x)||``, any ``a_t`` with carried shift
    ``z_t = c_t z_{t-1} + s_t - a_t >= 0`` and ``z_T = 0`` gives
    ``D_alpha(X_T || X'_T) <= sum_t alpha a_t^2 / (2 s_t^2)`` for Gaussian noise
    of std ``s_t`` (the contraction ``c_t`` is docs/theory.md 2.4 [derived]).

    Writing ``a_t = c_t z_{t-1} + s_t - z_t`` makes the choice of
    ``z_1..z_{T-1} >= 0`` a non-negative least-squares problem, solved
    exactly; with ``c = 1`` and equal noise its solution is the taut string
    (greatest convex minorant of the cumulative shift).

    Parameters
    ----------
    shifts : array_like, shape (T,)
        ``s_t >= 0``.
    noise_std : float or array_like
        Per-step Gaussian noise std ``> 0``.
    contraction : float or array_like
        Lipschitz factors ``c_t`` in [0, 1] of the maps.

    Returns
    -------
    a : numpy.ndarray
        The optimal schedule.
    cost : float
        ``sum_t a_t^2 / (2 s_t^2)``: the RDP at order ``alpha`` is ``alpha * cost``.
    """
    s = np.asarray(shifts, dtype=float)
    steps = s.size
    std = np.broadcast_to(np.asarray(noise_std, dtype=float), (steps,))
    c = np.broadcast_to(np.asarray(contraction, dtype=float), (steps,))
    if steps == 0 or not np.all(std > 0) or np.any(s < 0) or np.any((c < 0) | (c > 1)):
        raise ValueError("shift_schedule needs shifts >= 0, noise_std > 0, contraction in [0, 1]")
    weight = 1.0 / (np.sqrt(2.0) * std)
    if steps == 1:
        return s.copy(), float((weight[0] * s[0]) ** 2)
    # a = s + B z with z = (z_1..z_{T-1}) >= 0, z_0 = z_T = 0:
    # a_t = s_t - z_t + c_t z_{t-1}
    basis = np.zeros((steps, steps - 1))
    for t in range(steps - 1):
        basis[t, t] = -1.0
        basis[t + 1, t] = c[t + 1]
    design = -(weight[:, None] * basis)
    target = weight * s
    from scipy.optimize import nnls  # on first use: importing scipy.optimize takes a process about 0.7 s

    z, _ = nnls(design, target, maxiter=50 * steps)
    a = s + basis @ z
    return a, float(np.sum((weight * a) ** 2))


def shift_reduction_rdp(alpha, shifts, noise_std, contraction=1.0) -> np.ndarray:
    """RDP of a contractive noisy iteration by the optimal shift schedule (Feldman et al. Thm 22)."""
    _, cost = shift_schedule(shifts, noise_std, contraction)
    return np.atleast_1d(np.asarray(alpha, dtype=float)) * cost


def pnsgd_index_rdp(alpha, *, n: int, index: int, lipschitz: float, sigma: float) -> np.ndarray:
    """``2 alpha L^2 / (sigma^2 (n + 1 - t))`` at index ``t`` (Feldman et al. Thm 23; Thm 24 for Skip).

    Replace-one at index ``t`` (1-based); convex, ``L``-Lipschitz,
    ``beta``-smooth losses with ``eta <= 2/beta``.
    """
    _check_index(n, index)
    return np.atleast_1d(np.asarray(alpha, dtype=float)) * 2 * lipschitz**2 / (sigma**2 * (n + 1 - index))


def contraction_factor(*, eta: float, smoothness: float, strong_convexity: float) -> float:
    """Lipschitz factor ``c`` of ``w -> w - eta grad f(w)``.

    ``c^2 = 1 - 2 eta beta lambda / (beta + lambda)`` when ``eta <= 2/(beta + lambda)``
    (Asoodeh et al. Lemma 4); 1 when ``lambda = 0`` and ``eta <= 2/beta``
    (Feldman et al. Prop. 18).
    """
    if strong_convexity <= 0:
        return 1.0
    rho = 1 - 2 * eta * smoothness * strong_convexity / (smoothness + strong_convexity)
    return math.sqrt(max(rho, 0.0))


def strongly_convex_index_rdp(alpha, *, n: int, index: int, lipschitz: float, sigma: float,
                              contraction: float) -> np.ndarray:
    """Per-index RDP with ``c``-Lipschitz steps, ``rho = c^2``, ``m = n - t`` (docs/theory.md 2.4 [derived]).

    ``eps_t(alpha) = (2 alpha L^2/sigma^2) rho^m (1 - rho)/(1 - rho^{m+1})``, which
    tends to Thm 23 as ``rho -> 1`` (there the limit is used).
    """
    _check_index(n, index)
    rho = contraction**2
    m = n - index
    orders = np.atleast_1d(np.asarray(alpha, dtype=float))
    if rho >= 1.0 - 1e-12:
        factor = 1.0 / (m + 1)
    elif rho == 0.0:
        factor = 1.0 if m == 0 else 0.0
    else:
        factor = rho**m * (1 - rho) / (1 - rho ** (m + 1))
    return orders * 2 * lipschitz**2 / sigma**2 * factor


def stop_pnsgd_max_order(*, lipschitz: float, sigma: float) -> float:
    """``alpha* = (1 + sqrt(1 + 2 sigma^2 / L^2)) / 2``: Thm 26 holds for ``alpha <= alpha*``.

    Equivalent to Feldman et al.'s condition ``sigma >= L sqrt(2 (alpha - 1) alpha)``.
    """
    return (1 + math.sqrt(1 + 2 * sigma**2 / lipschitz**2)) / 2


def stop_pnsgd_rdp(alpha, *, n: int, lipschitz: float, sigma: float) -> np.ndarray:
    """``4 alpha L^2 ln n / (n sigma^2)`` for ``alpha <= alpha*``, ``inf`` above (Feldman et al. Thm 26)."""
    orders = np.atleast_1d(np.asarray(alpha, dtype=float))
    value = orders * 4 * lipschitz**2 * math.log(max(n, 1)) / (n * sigma**2)
    if n == 1:  # ln 1 = 0 would claim perfect privacy; one step is the local bound
        value = orders * 2 * lipschitz**2 / sigma**2
    valid = orders <= stop_pnsgd_max_order(lipschitz=lipschitz, sigma=sigma) + 1e-12
    return np.where(valid, value, np.inf)


def local_rdp(alpha, *, lipschitz: float, sigma: float) -> np.ndarray:
    """``2 alpha L^2 / sigma^2``: every variant, any index (Feldman et al. Lemma 27)."""
    return np.atleast_1d(np.asarray(alpha, dtype=float)) * 2 * lipschitz**2 / sigma**2


def multi_epoch_rdp(alpha, *, n: int, epochs: int, index: int, lipschitz: float,
                    sigma: float) -> np.ndarray:
    """``(2 alpha L^2/sigma^2) ((E - 1)/n + 1/(n - i + 1))`` for the canary at position ``i``.

    docs/theory.md 2.4, derived from the proof of Feldman et al. Thm 35 (with
    ``E = n`` this is below Thm 35's ``4 alpha L^2 / sigma^2``).
    """
    _check_index(n, index)
    orders = np.atleast_1d(np.asarray(alpha, dtype=float))
    return orders * 2 * lipschitz**2 / sigma**2 * ((epochs - 1) / n + 1 / (n - index + 1))


def bounded_domain_rdp(alpha, *, diameter: float, eta: float, sigma: float, steps: int,
                       step_rdp: Callable[[np.ndarray, float, int], np.ndarray],
                       splits: int = 64) -> np.ndarray:
    """Many-epoch bound on a bounded domain (docs/theory.md 2.4 [check], Altschuler & Talwar 2022 technique).

    ``eps(alpha) <= min_{R, sigma_1} [ step_rdp(alpha, sigma_2, R)
    + alpha diam(K)^2 / (2 eta^2 sigma_1^2 R) ]`` with
    ``sigma^2 = sigma_1^2 + sigma_2^2`` and ``1 <= R <= steps``: look back
    ``R`` steps, pay the RDP of the updates there with noise ``sigma_2``
    (``step_rdp`` returns the RDP of those ``R`` steps, e.g. ``R * S_alpha``),
    and use noise ``sigma_1`` to erase any difference of the iterates ``R``
    steps back. It stops growing with the number of epochs.
    """
    orders = np.atleast_1d(np.asarray(alpha, dtype=float))
    if not math.isfinite(diameter):
        return np.full(orders.shape, np.inf)
    best = np.full(orders.shape, np.inf)
    fractions = np.linspace(0.02, 0.98, splits)
    horizons = np.unique(np.round(np.geomspace(1, steps, min(steps, 200))).astype(int))
    for fraction in fractions:
        sigma1 = sigma * math.sqrt(fraction)
        sigma2 = sigma * math.sqrt(1 - fraction)
        for horizon in horizons:
            value = step_rdp(orders, sigma2, int(horizon)) + orders * diameter**2 / (
                2 * eta**2 * sigma1**2 * horizon)
            best = np.minimum(best, value)
    return best


def _check_index(n: int, index: int) -> None:
    if not 1 <= index <= n:
        raise ValueError(f"index must be in 1..{n}, got index={index}")
