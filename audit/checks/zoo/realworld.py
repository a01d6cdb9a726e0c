"""Bugs that real DP code has shipped, each next to its correct twin, as user functions.

Every entry is a function of a dataset wrapped with
``dpaudit.from_batched_callable`` (the way a user audits their own code),
a neighbouring pair ``(S, S')``, and the epsilon the code claims at
``delta``. Outputs that are not about floating point are snapped to the
release grid (2^-12) in both the bug and its twin, so that each entry shows
its one bug and nothing else (a plain-float release leaks through its low
bits, which the two float entries show on their own).

========================================= ==================================================
``float-laplace``, ``float-gaussian``     ``sum + noise`` in plain floats (Mironov 2012):
                                          the low bits of the release tell the sums apart
``gaussian-classical-sigma-eps-gt-1``   sigma from the classical ``sqrt(2 log(1.25/delta))/eps``
                                          (Dwork & Roth Thm A.1, proved for eps < 1) at eps = 10
``dp-sgd-actual-batch-size``              a full-batch DP-SGD step divided by the actual number
                                          of records: the noise scale reveals the dataset size
``clip-bound-from-data``                  a clipping bound (and the noise) set to the data's own
                                          largest value: one large record moves everything
========================================= ==================================================

References
----------
Mironov, "On significance of the least significant bits for differential
privacy", CCS 2012. Balle & Wang, "Improving the Gaussian mechanism for
differential privacy", ICML 2018 (the classical formula fails for
eps > 1; the analytic Gaussian). Dwork & Roth, "The Algorithmic
Foundations of Differential Privacy", 2014, Thm A.1.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from dpaudit.auditing.checks.zoo.variants import DELTA, Variant
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon, laplace_epsilon
from dpaudit.mechanisms.base import RELEASE_GRID, snap
from dpaudit.mechanisms.wrapped import from_batched_callable

__all__ = ["REAL_WORLD", "UserCodeVariant", "classical_sigma", "analytic_sigma"]

GRID = RELEASE_GRID["float64"]


@dataclasses.dataclass(frozen=True)
class UserCodeVariant(Variant):
    """A zoo entry of user code: ``build() -> (mechanism, (S, S'))`` and the epsilon it claims.

    ``ceiling`` (trials -> epsilon), when given, is the most any threshold
    audit of this budget can certify on the entry (the optimal score's
    statistical ceiling); a bug whose gap over its claim lies above it is
    reported ``beyond-reach``, not missed.
    """

    claimed: float = math.inf
    ceiling: Callable[[int], float] | None = None


def classical_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The classical Gaussian calibration ``sensitivity * sqrt(2 log(1.25 / delta)) / epsilon``."""
    return sensitivity * math.sqrt(2 * math.log(1.25 / delta)) / epsilon


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest sigma whose exact Gaussian profile meets ``(epsilon, delta)`` (Balle & Wang 2018), rounded up.

    dp-accounting's analytic Gaussian (``GaussianPrivacyLoss.get_delta_for_epsilon``) inverted by
    its monotone search, from the classical calibration as first guess, to a relative ``1e-12``
    (``GaussianPrivacyLoss.from_privacy_guarantee`` is the same search stopped at an absolute
    ``1e-7``). The search returns the end of its last bracket that meets ``delta``, so the sigma is
    never below the exact one.
    """
    from dp_accounting.pld import common
    from dp_accounting.pld.privacy_loss_mechanism import GaussianPrivacyLoss

    guess = classical_sigma(epsilon, delta, sensitivity)
    search = common.BinarySearchParameters(0.0, math.inf, initial_guess=guess, tolerance=1e-12 * guess)
    return float(common.inverse_monotone_function(
        lambda sigma: GaussianPrivacyLoss(sigma, sensitivity=sensitivity).get_delta_for_epsilon(epsilon), delta,
        search))


def _snapped(values: np.ndarray) -> np.ndarray:
    return snap(values, GRID)


def _float_laplace(buggy: bool):
    def noisy_sum(records, rng, trials):  # clip(x).sum() + Laplace(1): epsilon 1 for records in [0, 1]
        out = np.clip(records[:, 0], 0.0, 1.0).sum() + rng.laplace(0.0, 1.0, size=(trials, 1))
        return out if buggy else _snapped(out)
    return from_batched_callable(noisy_sum, 1, name="float-laplace" + ("" if buggy else ":snapped")), \
        (np.zeros((1, 1)), np.ones((1, 1)))


def _float_gaussian(buggy: bool):
    def noisy_sum(records, rng, trials):  # clip(x).sum() + N(0, 4^2)
        out = np.clip(records[:, 0], 0.0, 1.0).sum() + rng.normal(0.0, 4.0, size=(trials, 1))
        return out if buggy else _snapped(out)
    return from_batched_callable(noisy_sum, 1, name="float-gaussian" + ("" if buggy else ":snapped")), \
        (np.zeros((1, 1)), np.ones((1, 1)))


CLASSICAL = dict(epsilon=10.0, delta=DELTA)


def _classical(buggy: bool):
    sigma = classical_sigma(**CLASSICAL) if buggy else analytic_sigma(**CLASSICAL)

    def gaussian_sum(records, rng, trials):
        return _snapped(np.clip(records[:, 0], 0.0, 1.0).sum() + rng.normal(0.0, sigma, size=(trials, 1)))
    return from_batched_callable(gaussian_sum, 1, name=f"gaussian-sigma-{sigma:.4f}"), \
        (np.zeros((1, 1)), np.ones((1, 1)))


SGD_SIGMA, SGD_BATCH = 2.0, 2  # noise std on the gradient sum; the public expected batch size


def _actual_batch(buggy: bool):
    def step(records, rng, trials):  # one full-batch step: (sum of clipped gradients + noise) / batch size
        grads = np.clip(records[:, 0], -1.0, 1.0)
        size = len(records) if buggy else SGD_BATCH  # bug: the actual size, private under add/remove
        return _snapped((grads.sum() + rng.normal(0.0, SGD_SIGMA, size=(trials, 1))) / size)
    # add/remove neighbours: the canary (gradient 1) is present in S only
    return from_batched_callable(step, 1, name="dp-sgd-step" + ("-actual-batch" if buggy else "")), \
        (np.ones((2, 1)), np.ones((1, 1)))


def _clip_from_data(buggy: bool):
    def clipped_sum(records, rng, trials):  # claim: records clipped at 1, Laplace(1 / eps), eps = 1
        bound = float(np.abs(records).max()) if buggy else 1.0  # bug: the bound read from the data
        total = np.clip(records[:, 0], 0.0, bound).sum()
        return _snapped(total + rng.laplace(0.0, bound, size=(trials, 1)))
    # replace-one: one record far above the others (only such pairs show the bug)
    return from_batched_callable(clipped_sum, 1, name="clip-bound" + ("-from-data" if buggy else "")), \
        (np.ones((4, 1)), np.array([[1.0], [1.0], [1.0], [10.0]]))


def _pair(name, description, builder, claimed, true_buggy, true_correct, *, score=None, trials=100_000,
          ceiling=None):
    common = dict(claimed=claimed, trials=trials, score=score)  # None: the audit's default for a dataset pair
    return [UserCodeVariant(name, True, description, lambda b=builder: b(True), true_epsilon=true_buggy,
                            ceiling=ceiling, **common),
            UserCodeVariant(f"{name}:correct", False, f"correct version of: {description}",
                            lambda b=builder: b(False), true_epsilon=true_correct, **common)]


def _classical_ceiling(trials: int) -> float:
    from dpaudit.auditing.statistics.ceiling import gaussian_ceiling

    return gaussian_ceiling(1 / classical_sigma(**CLASSICAL), trials=trials, delta=DELTA)


_LAPLACE_CLAIM = float(laplace_epsilon(DELTA, 1.0))
_GAUSS_CLAIM = float(gaussian_epsilon(DELTA, 0.25))
_SGD_CLAIM = float(gaussian_epsilon(DELTA, 1 / SGD_SIGMA))

#: Every entry runs with the audit's default attack (the portfolio of every applicable score).
REAL_WORLD: list[UserCodeVariant] = [
    *_pair("float-laplace", "clip(x).sum() + rng.laplace(0, 1) released in plain floats", _float_laplace,
           _LAPLACE_CLAIM, None, _LAPLACE_CLAIM),
    *_pair("float-gaussian", "clip(x).sum() + rng.normal(0, 4) released in plain floats", _float_gaussian,
           _GAUSS_CLAIM, None, _GAUSS_CLAIM),
    # true 10.39 against the claim 10 (4% over): the classical formula errs only at large epsilon, where
    # no feasible budget certifies that much (ceiling ~5 at 10^5 trials); kept to show that limit
    *_pair("gaussian-classical-sigma-eps-gt-1", "Gaussian sigma from the classical formula at epsilon 10",
           _classical, CLASSICAL["epsilon"], float(gaussian_epsilon(DELTA, 1 / classical_sigma(**CLASSICAL))),
           CLASSICAL["epsilon"], ceiling=_classical_ceiling),
    # S holds two records, S' one: divided by 2 and by 1, the noise is N(0, 1) against N(0, 4);
    # the likelihood ratio is unbounded: no finite true epsilon (recorded as unknown, None)
    *_pair("dp-sgd-actual-batch-size", "DP-SGD step divided by the actual batch size (add/remove)",
           _actual_batch, _SGD_CLAIM, None, _SGD_CLAIM),
    # Laplace(1) at 4 against Laplace(10) at 13: unbounded likelihood ratio as well
    *_pair("clip-bound-from-data", "clipping bound and noise scale set to the data's largest record",
           _clip_from_data, _LAPLACE_CLAIM, None, 0.0),
]
