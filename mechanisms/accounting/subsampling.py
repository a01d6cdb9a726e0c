"""Amplification by subsampling and by shuffling, in (eps, delta) form.

References
----------
Balle, Barthe, Gaboardi, "Privacy Amplification by Subsampling: Tight
Analyses via Couplings and Divergences", NeurIPS 2018, Thm 9/10 (the
lecture notes' subsampling theorem).
Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021, Thm 3.1
(explicit-constant form, docs/theory.md 2.7 [check]).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "amplify_by_subsampling",
    "base_epsilon",
    "shuffle_epsilon",
    "shuffle_max_local_epsilon",
]


def amplify_by_subsampling(epsilon, delta, sample_rate: float):
    """``(log(1 + q (e^eps - 1)), q delta)`` for a ``q`` fraction subsample (Balle et al. 2018).

    Poisson subsampling with add/remove neighbours, or sampling without
    replacement with replace-one neighbours (the base mechanism's guarantee
    must be for the same relation).
    """
    eps = np.asarray(epsilon, dtype=float)
    with np.errstate(divide="ignore"):
        # log(1 - q + q e^eps), stable for large eps
        amplified = np.logaddexp(np.log1p(-sample_rate) if sample_rate < 1 else -np.inf,
                                 np.log(sample_rate) + eps)
    return np.maximum(amplified, 0.0), sample_rate * np.asarray(delta, dtype=float)


def base_epsilon(epsilon: float, sample_rate: float) -> float:
    """The base mechanism's epsilon whose amplification (:func:`amplify_by_subsampling`) is ``epsilon``.

    ``log(1 + (e^eps - 1) / q)``, written ``eps + log(1 - (1 - q) e^-eps) - log q`` so that it stays finite for
    any ``epsilon``; 0 at ``epsilon <= 0``.
    """
    eps = float(epsilon)
    if eps <= 0:
        return 0.0
    return max(eps + math.log1p(-(1 - sample_rate) * math.exp(-eps)) - math.log(sample_rate), 0.0)


def shuffle_max_local_epsilon(*, n: int, delta: float) -> float:
    """Largest ``eps0`` for which :func:`shuffle_epsilon` applies: ``log(n / (16 log(2/delta)))``."""
    value = n / (16 * math.log(2 / delta))
    return math.log(value) if value > 0 else -math.inf


def shuffle_epsilon(*, epsilon0: float, n: int, delta: float) -> float:
    """Central epsilon of ``n`` shuffled ``eps0``-LDP reports (Feldman, McMillan, Talwar 2021, Thm 3.1).

    ``eps <= log(1 + (e^{eps0}-1)/(e^{eps0}+1) (8 sqrt(e^{eps0} log(4/delta))/sqrt(n) + 8 e^{eps0}/n))``,
    valid for ``eps0 <= log(n / (16 log(2/delta)))`` (docs/theory.md 2.7 [check]).
    The caller must check the validity condition; the result is also capped
    at ``eps0`` (the shuffled reports are no less private than the reports).
    """
    e0 = math.exp(epsilon0)
    inner = 8 * math.sqrt(e0 * math.log(4 / delta)) / math.sqrt(n) + 8 * e0 / n
    return min(math.log1p((e0 - 1) / (e0 + 1) * inner), epsilon0)
