"""The statistical ceiling: what a threshold audit can certify with N trials (docs/theory.md 3.4).

When the score distributions are known (``FPR(t)`` and ``FNR(t)``), the
ceiling is the bound computed from the *expected* counts at the best
threshold, by the better of the two ways an audit certifies: Clopper-Pearson
upper bounds at ``beta / 2`` per error rate, or the conditional bound on
their ratio (``audit.statistics.conditional``).
A report shows it next to the audit so that statistical slack can be told
apart from attack weakness.

The ceiling is a *central* figure: an ideal audit lands above it about half
the time. :func:`statistical_ceiling_band` adds the band that says how far
(:class:`CeilingBand`): the 2.5% and 97.5% quantiles of the bound certified at
the oracle threshold when the counts are drawn from their binomial laws.

References
----------
docs/theory.md 3.4 (the statistical ceiling and its band).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr

from dpaudit.auditing.statistics.conditional import conditional_epsilon, conditional_epsilon_estimate
from dpaudit.auditing.statistics.confidence import check_confidence, check_delta, cp_upper
from dpaudit.auditing.statistics.rates import rates_epsilon
from dpaudit.core.validation import check_int

__all__ = ["BAND_DRAWS", "BAND_LEVEL", "BAND_SEED", "CeilingBand", "exact_ceiling", "exact_ceiling_band",
           "gaussian_ceiling", "gaussian_ceiling_band", "statistical_ceiling", "statistical_ceiling_band"]

BAND_DRAWS = 4000  #: count pairs per band (over 10 seeds, mu = 1, 1e5 trials: sd 0.005 low, 0.015 high)
BAND_LEVEL = 0.95  #: the band is the central 95% of the bounds certified at drawn counts
BAND_SEED = 38  #: seed of the draws: the band of a law and a trial count is always the same


@dataclasses.dataclass(frozen=True, slots=True)
class CeilingBand:
    """A ceiling and the band of what an ideal threshold audit certifies at these trials.

    Attributes
    ----------
    ceiling : float
        The bound at expected counts at the oracle threshold (the central figure).
    low, high : float
        The 2.5% and 97.5% quantiles of the bound certified at the oracle
        threshold when the counts are drawn from their binomial laws.
    threshold : float
        The oracle threshold.
    draws : int
        Count pairs drawn.
    """

    ceiling: float
    low: float
    high: float
    threshold: float
    draws: int

    @property
    def band(self) -> tuple[float, float]:
        """``(low, high)``."""
        return (self.low, self.high)



def statistical_ceiling(false_positive_rate: Callable[[np.ndarray], np.ndarray],
                        false_negative_rate: Callable[[np.ndarray], np.ndarray],
                        thresholds, *, trials: int, delta: float, confidence: float = 0.95) -> float:
    """Best epsilon bound from expected counts over ``thresholds`` (oracle threshold).

    Parameters
    ----------
    false_positive_rate, false_negative_rate : callable
        ``t -> P[score(M(S)) >= t]`` and ``t -> P[score(M(S')) < t]``, vectorised.
    thresholds : array_like
        Grid searched for the oracle threshold.
    trials : int
        Trials per dataset.
    """
    rates, trials, delta, beta = _rates(false_positive_rate, false_negative_rate, thresholds, trials, delta,
                                        confidence)
    return _oracle(rates, trials, delta, beta)[0]


def statistical_ceiling_band(false_positive_rate: Callable[[np.ndarray], np.ndarray],
                             false_negative_rate: Callable[[np.ndarray], np.ndarray],
                             thresholds, *, trials: int, delta: float, confidence: float = 0.95,
                             draws: int = BAND_DRAWS, seed: int = BAND_SEED) -> CeilingBand:
    """The ceiling (:func:`statistical_ceiling`) and its band: what an ideal threshold audit certifies.

    At the oracle threshold the two error counts of an audit are binomial,
    ``Binomial(trials, FPR)`` and ``Binomial(trials, FNR)``. ``draws`` pairs of
    counts are drawn from those laws (seeded: the band of a law is always the
    same) and each is certified the way the ceiling is (the better of the
    single-rate and the conditional bound, both directions); the band is the
    ``BAND_LEVEL`` central interval of those bounds (docs/theory.md 3.4). It is
    a description of the spread, not a confidence statement: an audit at the
    oracle threshold lands inside it 95% of the time, and one whose threshold
    is chosen on calibration data lands at or below it.

    The conditional bound of every draw is its fast estimate
    (``conditional_epsilon_estimate``, within about 0.005 of the exact one and
    in the same order); the two draws at the band's ends are then certified
    exactly, so the band's ends are bounds of real count pairs.

    Parameters
    ----------
    false_positive_rate, false_negative_rate : callable
        As in :func:`statistical_ceiling`.
    thresholds : array_like
        Grid searched for the oracle threshold.
    trials : int
        Trials per dataset.
    draws : int
        Count pairs drawn (default ``BAND_DRAWS``).
    seed : int
        Seed of the draws.

    Returns
    -------
    CeilingBand

    References
    ----------
    docs/theory.md 3.4 (the statistical ceiling and its band).
    """
    rates, trials, delta, beta = _rates(false_positive_rate, false_negative_rate, thresholds, trials, delta,
                                        confidence)
    draws = check_int("draws", draws, minimum=40)
    value, best = _oracle(rates, trials, delta, beta)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    # the rates of a tabulated law may leave [0, 1] by a rounding error of their cumulative sums
    fp = rng.binomial(trials, float(np.clip(rates[0][best], 0.0, 1.0)), draws).astype(float)
    fn = rng.binomial(trials, float(np.clip(rates[1][best], 0.0, 1.0)), draws).astype(float)
    single = _single_rate_bounds(fp, fn, trials, delta, beta)
    estimate = np.maximum(single, np.maximum(
        conditional_epsilon_estimate(trials - fn, trials, fp, trials, delta=delta, failure=beta),
        conditional_epsilon_estimate(trials - fp, trials, fn, trials, delta=delta, failure=beta)))
    order = np.argsort(estimate, kind="stable")
    tail = (1 - BAND_LEVEL) / 2
    ends = [order[int(np.floor(tail * (draws - 1)))], order[int(np.ceil((1 - tail) * (draws - 1)))]]
    low, high = (max(float(single[k]), _exact_conditional(fp[k], fn[k], trials, delta, beta), 0.0) for k in ends)
    threshold = float(np.asarray(thresholds, dtype=float)[best])
    return CeilingBand(ceiling=value, low=low, high=high, threshold=threshold, draws=draws)


def _rates(false_positive_rate, false_negative_rate, thresholds, trials, delta, confidence):
    trials = check_int("trials", trials, minimum=1)
    delta = check_delta(delta)
    beta = 1 - check_confidence(confidence)
    grid = np.asarray(thresholds, dtype=float)
    rates = (np.asarray(false_positive_rate(grid), dtype=float), np.asarray(false_negative_rate(grid), dtype=float))
    return rates, trials, delta, beta


def _single_rate_bounds(fp: np.ndarray, fn: np.ndarray, trials: int, delta: float, beta: float) -> np.ndarray:
    """The better direction of the bound from each rate's Clopper-Pearson upper bound at ``beta / 2``."""
    return rates_epsilon(cp_upper(fp, trials, beta / 2), cp_upper(fn, trials, beta / 2), delta)[0]


def _exact_conditional(fp: float, fn: float, trials: int, delta: float, beta: float) -> float:
    """The exact conditional bound at one pair of counts, the better direction."""
    return max(conditional_epsilon(int(trials - fn), trials, int(fp), trials, delta=delta, failure=beta),
               conditional_epsilon(int(trials - fp), trials, int(fn), trials, delta=delta, failure=beta))


def _oracle(rates: tuple[np.ndarray, np.ndarray], trials: int, delta: float, beta: float,
            exact: int = 3) -> tuple[float, int]:
    """The best bound at expected counts over the grid, and the grid index where it is reached.

    The single-rate bound everywhere; the conditional bound estimated over the
    grid and exact at the ``exact`` best thresholds of the estimate.
    """
    fp, fn = np.round(rates[0] * trials), np.round(rates[1] * trials)
    single = _single_rate_bounds(fp, fn, trials, delta, beta)
    best_index = int(np.argmax(single))
    best = float(single[best_index])
    forward = conditional_epsilon_estimate(trials - fn, trials, fp, trials, delta=delta, failure=beta)
    backward = conditional_epsilon_estimate(trials - fp, trials, fn, trials, delta=delta, failure=beta)
    for values, big, small in ((forward, trials - fn, fp), (backward, trials - fp, fn)):
        for k in np.argsort(values)[-exact:]:
            if np.isfinite(values[k]):
                value = conditional_epsilon(int(big[k]), trials, int(small[k]), trials, delta=delta, failure=beta)
                if value > best:
                    best, best_index = value, int(k)
    return max(best, 0.0), best_index


def gaussian_ceiling(mu: float, *, trials: int, delta: float, confidence: float = 0.95) -> float:
    """The ceiling for scores ``N(0, 1)`` on ``S`` and ``N(mu, 1)`` on ``S'`` (docs/theory.md 3.4 table)."""
    return statistical_ceiling(*_gaussian_rates(mu), trials=trials, delta=delta, confidence=confidence)


def gaussian_ceiling_band(mu: float, *, trials: int, delta: float, confidence: float = 0.95) -> CeilingBand:
    """:func:`gaussian_ceiling` with its band (:func:`statistical_ceiling_band`)."""
    return statistical_ceiling_band(*_gaussian_rates(mu), trials=trials, delta=delta, confidence=confidence)


def _gaussian_rates(mu: float) -> tuple:
    grid = np.linspace(-6.0 - mu, mu + 9.0, 20_001)
    return (lambda t: ndtr(-t)), (lambda t: ndtr(t - mu)), grid  # N(0, 1) above t, N(mu, 1) below t


def exact_ceiling(values: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray, *, trials: int, delta: float,
                  confidence: float = 0.95) -> float:
    """The ceiling of a threshold audit on a score with a known discrete law.

    ``values`` are sorted score values with probabilities ``mass_a`` under
    ``S`` and ``mass_b`` under ``S'`` (e.g. the exact likelihood ratio of a
    one-dimensional instance, ``accounting.instances.likelihood_ratio_law``).
    """
    return statistical_ceiling(*_law_rates(values, mass_a, mass_b), trials=trials, delta=delta,
                               confidence=confidence)


def exact_ceiling_band(values: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray, *, trials: int, delta: float,
                       confidence: float = 0.95) -> CeilingBand:
    """:func:`exact_ceiling` with its band (:func:`statistical_ceiling_band`).

    The band is a function of the law, the trials, delta and the confidence only (its draws are seeded by
    ``BAND_SEED``), so each is computed once a process and kept (:data:`_BANDS`, keyed by a digest of the law's
    floats): audits of one pair at one budget (seeds, chunk sizes, a rerun) ask for the same band again.
    """
    values, mass_a, mass_b = (np.ascontiguousarray(v, dtype=float) for v in (values, mass_a, mass_b))
    digest = hashlib.blake2b(digest_size=20)
    for array in (values, mass_a, mass_b):
        digest.update(np.int64(array.size).tobytes())
        digest.update(array.tobytes())
    key = (digest.digest(), trials, float(delta), float(confidence))
    with _BANDS_LOCK:
        band = _BANDS.pop(key, None)
        if band is not None:
            _BANDS[key] = band  # most recently used last
            return band
    band = statistical_ceiling_band(*_law_rates(values, mass_a, mass_b), trials=trials, delta=delta,
                                    confidence=confidence)
    with _BANDS_LOCK:
        _BANDS[key] = band
        while len(_BANDS) > _BANDS_KEPT:
            del _BANDS[next(iter(_BANDS))]
    return band


#: Bands of :func:`exact_ceiling_band` already computed in this process, least recently used first
_BANDS: dict[tuple, CeilingBand] = {}
_BANDS_KEPT = 256
_BANDS_LOCK = threading.Lock()  # audits on joblib's threads share it


def _law_rates(values: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray) -> tuple:
    """The error rates of a threshold on a score with a discrete law, and the law's values as the grid."""
    tail_a = np.cumsum(mass_a[::-1])[::-1]  # P_A[score >= v_k]
    below_b = np.concatenate([[0.0], np.cumsum(mass_b)[:-1]])  # P_B[score < v_k]

    def fpr(t):
        return np.interp(t, values, tail_a)

    def fnr(t):
        return np.interp(t, values, below_b)
    return fpr, fnr, values
