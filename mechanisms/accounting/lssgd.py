"""The DP-LSSGD paper's privacy claim (its Thm 1), in closed form.

References
----------
Wang, Gu, Boedihardjo, Barekat, Osher, "DP-LSSGD: A Stochastic Optimization
Method to Lift the Utility in Privacy-Preserving ERM", 2019, Thm 1.
"""

from __future__ import annotations

import math

__all__ = ["lssgd_claim_epsilon", "lssgd_claim_noise", "lssgd_claim_condition"]


def lssgd_claim_noise(*, epsilon: float, delta: float, steps: int, n: int, lipschitz: float) -> float:
    """``nu`` from Thm 1: ``nu^2 = 8 T alpha G^2 / (n^2 eps)``, ``alpha = 2 log(1/delta)/eps + 1``."""
    alpha = 2 * math.log(1 / delta) / epsilon + 1
    return math.sqrt(8 * steps * alpha * lipschitz**2 / (n**2 * epsilon))


def lssgd_claim_epsilon(*, noise_std: float, delta: float, steps: int, n: int, lipschitz: float) -> float:
    """The epsilon Thm 1 claims for noise ``nu``: the positive root of
    ``nu^2 n^2 eps^2 - 8 T G^2 eps - 16 T G^2 log(1/delta) = 0``
    (substituting ``alpha`` into ``nu^2 = 8 T alpha G^2 / (n^2 eps)``).
    """
    a = noise_std**2 * n**2
    b = 8 * steps * lipschitz**2
    c = 16 * steps * lipschitz**2 * math.log(1 / delta)
    return (b + math.sqrt(b * b + 4 * a * c)) / (2 * a)


def lssgd_claim_condition(*, epsilon: float, delta: float, steps: int, n: int, batch_size: int) -> bool:
    """Thm 1's hypothesis ``eps^2 <= 5 T log(1/delta) b^2 / n^2``."""
    return epsilon**2 <= 5 * steps * math.log(1 / delta) * batch_size**2 / n**2
