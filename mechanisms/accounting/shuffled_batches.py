"""Claims for shuffled fixed-size batches: what holds, what is a reference, what is usually reported.

docs/theory.md section 6. One epoch cuts a uniform permutation of the ``n``
records into ``T = n / m`` batches; every step adds ``N(0, (sigma C)^2 I)`` to
the sum of the batch's gradients, clipped to norm ``C``. Zero-out neighbours
(the canary replaced by a zero-gradient record) keep the batch sizes. In
units of ``C``:

* **Upper bound, any order** (valid). Each record enters one batch per epoch:
  ``E`` epochs are ``E`` Gaussian mechanisms of sensitivity 1 and noise
  ``sigma``, i.e. ``mu``-GDP with ``mu = sqrt(E) / sigma`` (Dong, Roth, Su
  2022, Cor. 2), exact for deterministic batches.
* **Lower bound on the true epsilon** (reference, Chua et al. 2024). Records
  of gradient ``-C u``, the canary ``+C u`` or ``0``: one epoch releases
  ``P = (1/T) sum_t N(2 e_t, sigma^2 I)`` against ``Q = (1/T) sum_t N(e_t,
  sigma^2 I)`` (relative to the common offset). The cube sets ``{max_t x_t >
  c}`` give ``delta(eps) >= sup_c P(M > c) - e^eps Q(M > c)`` with
  ``Q(M > c) = 1 - Phi(c/sigma)^(T-1) Phi((c-1)/sigma)`` and
  ``P(M > c) = 1 - Phi(c/sigma)^(T-1) Phi((c-2)/sigma)``. The same
  permutation every epoch is one epoch at ``sigma / sqrt(E)``; a fresh one
  each epoch composes the law of ``M`` (a post-processing of each epoch's
  release) over the epochs, as in the public code of Chua et al.
  (google-research ``dpsgd_batch_sampler_accounting``, ``ShuffleAccountant``):
  the law of ``M`` is cut into slices and its privacy loss rounded down, so
  the composed value stays a lower bound.
* **What a Poisson accountant reports** at rate ``1/T`` for every step: the
  usual claim for shuffled training (Opacus with ``poisson_sampling=False``),
  not valid for this sampling.

Reference values (``E = 1``; Poisson / lower bound / upper bound):
``sigma=1, T=100, delta=1e-5``: 0.718 / 4.063 / 4.377;
``sigma=1, T=1000, delta=1e-6``: 0.186 / 3.724 / 4.887;
``sigma=0.8, T=1000, delta=1e-6``: 0.468 / 6.045 / 6.312.

References
----------
Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha, Zhang, "How Private are DP-SGD
Implementations?", ICML 2024; "Scalable DP-SGD: Shuffling vs. Poisson
Subsampling", NeurIPS 2024.
Dong, Roth, Su, "Gaussian Differential Privacy", JRSS B 2022.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats

from dpaudit.mechanisms.accounting.claims import Claim, delta_for_epsilon, not_applicable
from dpaudit.mechanisms.accounting.profiles import gaussian_delta, gaussian_epsilon
from dpaudit.mechanisms.accounting.tight import pld_claim

__all__ = [
    "CHUA",
    "GAUSSIAN_EPOCHS",
    "deterministic_delta",
    "deterministic_epsilon",
    "poisson_epsilon",
    "shuffle_lower_delta",
    "shuffle_lower_epsilon",
]

CHUA = ("a reference, not a guarantee: lower bound on the true epsilon of shuffled batches, Chua et al. 2024 "
        "(How Private are DP-SGD Implementations?), cube sets {max_t x_t > c}, composed over reshuffled epochs "
        "as in their public code")
GAUSSIAN_EPOCHS = ("Gaussian mechanism per epoch (each record in one batch per epoch, zero-out sensitivity C, noise "
                   "sigma C), composed over the epochs in GDP (Dong, Roth, Su 2022, Cor. 2)")
_CAPS = np.arange(-5.0, 60.0, 0.002)  # thresholds c of the cube sets, in units of C (scaled by sigma below)


def deterministic_epsilon(delta: float, *, sigma: float, epochs: int = 1) -> float:
    """Epsilon of ``epochs`` uses of a Gaussian mechanism of sensitivity 1 and noise ``sigma`` (rounded up)."""
    return float(gaussian_epsilon(delta, math.sqrt(epochs) / sigma))


def deterministic_delta(epsilon: float, *, sigma: float, epochs: int = 1) -> float:
    """Delta of the same composition at ``epsilon``."""
    return float(gaussian_delta(epsilon, math.sqrt(epochs) / sigma))


def poisson_epsilon(delta: float, *, sigma: float, rate: float, steps: int) -> float:
    """What a Poisson accountant (PLD, add/remove) reports for ``steps`` steps at ``rate`` and noise ``sigma``."""
    return pld_claim("poisson", sampling_rate=rate, noise_multiplier=sigma, steps=steps).epsilon(delta)


def _out_of_cube(caps: np.ndarray, sigma: float, batches: int, mean: float) -> np.ndarray:
    """``P(max_t x_t > c)`` under ``(1/T) sum_t N(mean e_t, sigma^2 I_T)``."""
    inside = (batches - 1) * stats.norm.logcdf(caps / sigma) + stats.norm.logcdf((caps - mean) / sigma)
    return -np.expm1(inside)


@functools.lru_cache(maxsize=64)
def _cube_masses(sigma: float, batches: int) -> tuple[np.ndarray, np.ndarray]:
    """``P(M > c)`` and ``Q(M > c)`` on the grid of caps (computed once per noise and number of batches)."""
    caps = _CAPS * max(sigma, 1e-3)
    return _out_of_cube(caps, sigma, batches, 2.0), _out_of_cube(caps, sigma, batches, 1.0)


def _single_epoch_delta(epsilon: float, sigma: float, batches: int) -> float:
    """``sup_c P(M > c) - e^eps Q(M > c)`` over a grid of ``c`` (a sup over fewer sets: still a lower bound)."""
    upper, lower = _cube_masses(float(sigma), int(batches))
    return max(float(np.max(upper - math.exp(epsilon) * lower)), 0.0)


@functools.lru_cache(maxsize=32)
def _max_law(sigma: float, batches: int, width: float = 1e-3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The law of ``M = max_t x_t`` in slices: (privacy loss rounded down, mass under P, mass under Q).

    Slices of ``M`` of width ``width * sigma^2`` between quantiles that leave
    out about ``1e-18`` of ``P``; the two tails are slices of their own.
    """
    low = sigma * stats.norm.ppf(math.exp(math.log(1e-18) / batches))
    high = 2.0 + sigma * stats.norm.isf(1e-18 / batches)
    edges = np.arange(low, high + width * sigma**2, width * sigma**2)

    def cdf(mean):  # log P(M <= c)
        return (batches - 1) * stats.norm.logcdf(edges / sigma) + stats.norm.logcdf((edges - mean) / sigma)

    log_p, log_q = cdf(2.0), cdf(1.0)
    p = np.concatenate([[math.exp(log_p[0])], np.diff(np.exp(log_p)), [-math.expm1(log_p[-1])]])
    q = np.concatenate([[math.exp(log_q[0])], np.diff(np.exp(log_q)), [-math.expm1(log_q[-1])]])
    keep = (p > 0) & (q > 0)
    return np.log(p[keep]) - np.log(q[keep]), p[keep], q[keep]


def _composed_delta(epsilon: float, sigma: float, batches: int, epochs: int) -> float:
    """``delta(eps)`` of ``epochs`` independent copies of the sliced law of ``M`` (a lower bound).

    Privacy losses are rounded down to a grid before the composition
    (convolution of the losses' law under ``P``): ``E_P[(1 - e^(eps - L))_+]``
    with every loss ``L`` made smaller can only decrease.
    """
    values, composed = _composed_law(float(sigma), int(batches), int(epochs))
    return max(float(np.sum(composed * -np.expm1(np.minimum(epsilon - values, 0.0)))), 0.0)


@functools.lru_cache(maxsize=16)
def _composed_law(sigma: float, batches: int, epochs: int, grid: float = 2e-3) -> tuple[np.ndarray, np.ndarray]:
    """The composed privacy-loss law under ``P``: loss values and masses (see :func:`_composed_delta`)."""
    losses, p, _ = _max_law(sigma, batches)
    index = np.floor(losses / grid).astype(np.int64)
    offset = int(index.min())
    pmf = np.bincount(index - offset, weights=p)
    size = epochs * (pmf.size - 1) + 1
    length = 1 << int(math.ceil(math.log2(size)))
    composed = np.fft.irfft(np.fft.rfft(pmf, length) ** epochs, length)[:size]
    composed = np.clip(composed, 0.0, None)
    values = (np.arange(size) + epochs * offset) * grid
    return values, composed


def shuffle_lower_delta(epsilon: float, *, sigma: float, batches: int, epochs: int = 1,
                        reshuffle: bool = True) -> float:
    """A lower bound on ``delta(epsilon)`` of shuffled batches (zero-out, worst-case background).

    Parameters
    ----------
    sigma : float
        Noise standard deviation over the clipping norm (noise multiplier).
    batches : int
        ``T = n / m``, batches per epoch.
    epochs : int
        Complete epochs.
    reshuffle : bool
        A fresh permutation each epoch (``True``) or one for all (``False``).
    """
    if epochs == 1 or not reshuffle:
        return _single_epoch_delta(epsilon, sigma / math.sqrt(epochs), batches)
    return _composed_delta(epsilon, sigma, batches, epochs)


@functools.lru_cache(maxsize=256)
def shuffle_lower_epsilon(delta: float, *, sigma: float, batches: int, epochs: int = 1,
                          reshuffle: bool = True) -> float:
    """A lower bound on the true ``epsilon(delta)`` of shuffled batches, rounded down.

    The largest ``eps`` (to 1e-6) at which the lower bound on ``delta(eps)``
    still exceeds ``delta``: the true epsilon is at least this. ``0`` when
    even ``eps = 0`` is not refuted.
    """
    def refuted(eps: float) -> bool:
        return shuffle_lower_delta(eps, sigma=sigma, batches=batches, epochs=epochs, reshuffle=reshuffle) > delta

    if not refuted(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while refuted(high):
        low, high = high, 2 * high
        if high > 1e4:
            return math.inf
    while high - low > 1e-6:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if refuted(mid) else (low, mid)
    return low


POISSON_AS_REPORTED = ("a Poisson-subsampling accountant (PLD) at rate m/n for every step, as shuffled training "
                       "usually reports (Opacus with poisson_sampling=False)")


def shuffled_claims(*, sigma: float, batches: int, steps: int, reshuffle: bool, relation: str = "zero-out") -> list:
    """The claims of ``steps`` shuffled batches, ``batches`` per epoch, noise multiplier ``sigma`` (zero-out).

    Returns the valid upper bound (``gaussian-epochs``), the lower bound on
    the true epsilon of the sampling (``shuffle-lower-bound``, kind
    ``"lower-bound"``: a reference, never a guarantee nor a verdict) and the
    Poisson accountant's value, not applicable, with the value it would
    report in the reason.
    """
    epochs, complete = -(-steps // batches), steps // batches
    claims = [Claim("gaussian-epochs", GAUSSIAN_EPOCHS, relation,
                    epsilon_fn=lambda delta: deterministic_epsilon(delta, sigma=sigma, epochs=epochs),
                    delta_fn=lambda epsilon: deterministic_delta(epsilon, sigma=sigma, epochs=epochs))]
    if complete == 0:
        claims.append(not_applicable("shuffle-lower-bound", CHUA, relation,
                                     f"fewer steps ({steps}) than one epoch ({batches} batches): the canary "
                                     f"may not be used at all"))
    else:
        lower = functools.partial(shuffle_lower_epsilon, sigma=sigma, batches=batches, epochs=complete,
                                  reshuffle=reshuffle)
        claims.append(Claim("shuffle-lower-bound", CHUA, relation, kind="lower-bound", epsilon_fn=lower,
                            delta_fn=lambda epsilon: shuffle_lower_delta(
                                epsilon, sigma=sigma, batches=batches, epochs=complete, reshuffle=reshuffle)))
    rate = 1.0 / batches

    def reported(delta: float) -> float:
        return poisson_epsilon(delta, sigma=sigma, rate=rate, steps=steps)

    def reason(epsilon, delta):
        if delta is None:
            delta = delta_for_epsilon(reported, epsilon)
        return (f"assumes Poisson sampling; this mechanism shuffles (at rate {rate:.4g} for {steps} steps it "
                f"reports epsilon={reported(delta):.4g} at delta={delta:.3g})")

    claims.append(Claim("poisson-as-reported", POISSON_AS_REPORTED, relation, epsilon_fn=reported,
                        delta_fn=lambda e: delta_for_epsilon(reported, e), condition=reason, reported=True))
    return claims
