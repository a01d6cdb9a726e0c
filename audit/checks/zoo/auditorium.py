"""DP-Auditorium's test mechanisms, re-implemented in NumPy as user functions of a dataset.

DP-Auditorium (Google's auditing library, ``python/dp_auditorium`` in
google/differential-privacy) ships mechanisms to test its testers on. Each is
written here from its class, drawing from the generator in the same order
with the same shapes, so that for the same generator state every release is
the same (before the grid below):

======================= ================================================================================
``svt1`` .. ``svt6``    ``mechanisms/sparse_vector_technique.py``: ``SVT1`` .. ``SVT6`` (Lyu, Su, Li 2017),
                        with its two queries (``_get_sum_query``, ``_get_reveal_records_query``)
``noisy-max``           ``mechanisms/noisy_max.py``: ``NoisyMaxMechanism`` (Gumbel noise on counts)
``mean-*``              ``mechanisms/mean.py``: ``MeanMechanism`` in the three configurations of
                        ``mechanisms_utils.default_mean_mechanism_config_generator``
``gd-one-step``         one step of noisy gradient descent with the budget of
                        ``mechanisms_utils.get_wrong_one_step_gd_budget`` (see :func:`one_step_gd`)
======================= ================================================================================

DP-Auditorium's SVT differs from the Lyu et al. algorithms of the black-box
suite (:mod:`.blackbox`): the answers are queries of a dataset (the clipped
sum repeated, or the last record repeated and the second-to-last once, so
that a record's position matters), every variant stops after
``max_answered_queries`` answers above (SVT5 and SVT6 too), SVT2 draws its
threshold noise once (scale ``2 c / epsilon``) rather than after each
answer, and the codes are DP-Auditorium's ``DataValues``: 0 no response, 1
above, 2 below (SVT3 releases the noisy answer instead of 1).

Every release is rounded to the grid ``2^-12`` (codes and indices are on
it already), so that the planted bug, not the low bits of the floats, is
what an audit must find (docs/theory.md 1.9).

References
----------
Kong, Munoz Medina, Ribero, Syed, "DP-Auditorium: a large scale library for
auditing differential privacy", IEEE S&P 2024; the classes named above.
Lyu, Su, Li, "Understanding the sparse vector technique for differential
privacy", PVLDB 10(6), 2017.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.auditing.checks.zoo.svt_laws import _pattern_masses, _svt_outcomes, svt_values_law
from dpaudit.mechanisms.accounting.conversions import cks_epsilon
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.base import RELEASE_GRID, Mechanism, snap
from dpaudit.mechanisms.wrapped import from_batched_callable

__all__ = ["CASES", "AuditoriumCase", "NO_RESPONSE", "ABOVE", "BELOW", "exact_epsilon", "gd_claim", "mean",
           "noisy_max", "one_step_gd", "reveal_records_query", "sparse_vector", "sum_query"]

GRID = RELEASE_GRID["float64"]
NO_RESPONSE, ABOVE, BELOW = 0.0, 1.0, 2.0  # DataValues.SVT_NO_RESPONSE, SVT_ABOVE_THRESHOLD, SVT_BELOW_THRESHOLD


def sum_query(records: np.ndarray, *, low: float, high: float, queries: int) -> np.ndarray:
    """``_get_sum_query``: the clipped sum, ``queries`` times (sensitivity ``high - low``)."""
    return np.sum(np.clip(records, low, high)) * np.ones(queries)


def reveal_records_query(records: np.ndarray, *, low: float, high: float, queries: int) -> np.ndarray:
    """``_get_reveal_records_query``: the last clipped record ``queries - 1`` times, then the second to last.

    Raises
    ------
    ValueError
        On fewer than two records, as DP-Auditorium's query does.
    """
    if len(records) < 2:
        raise ValueError(f"the reveal-records query needs at least two records, got {len(records)}")
    clipped = np.clip(records, low, high)
    return np.array([clipped[-1]] * (queries - 1) + [clipped[-2]])


_QUERIES = {"sum": sum_query, "reveal-records": reveal_records_query}


def sparse_vector(records: np.ndarray, rng: np.random.Generator, trials: int, *, variant: int, epsilon: float,
                  query: str, queries: int, threshold: float, cutoff: int, low: float = 0.0,
                  high: float = 1.0) -> np.ndarray:
    """``SVT{variant}.__call__`` of DP-Auditorium on ``records`` (one number each), ``trials`` times.

    Draws, in this order: the threshold noise ``(trials, 1)``, then the query noise
    ``(trials, queries)`` (none for SVT5). With ``s = high - low`` and ``c = cutoff``:

    ======= ================== ===================== ==========================
    variant threshold noise    query noise           released when above
    ======= ================== ===================== ==========================
    1       Lap(2 s / eps)     Lap(4 c s / eps)      1
    2       Lap(2 c s / eps)   Lap(4 c s / eps)      1
    3       Lap(2 s / eps)     Lap(2 c s / eps)      the noisy answer
    4       Lap(4 s / eps)     Lap(4 s / (3 eps))    1
    5       Lap(2 s / eps)     none                  1
    6       Lap(2 s / eps)     Lap(2 s / eps)        1
    ======= ================== ===================== ==========================

    A query is above when its noisy answer is at least the noisy threshold; below, 2; after the
    ``c``-th answer above, 0 (no response).
    """
    s = high - low
    answers = _QUERIES[query](np.asarray(records, dtype=np.float64).ravel(), low=low, high=high, queries=queries)
    threshold_scale = {1: 2 * s, 2: 2 * cutoff * s, 3: 2 * s, 4: 4 * s, 5: 2 * s, 6: 2 * s}[variant] / epsilon
    noisy_threshold = threshold + rng.laplace(0, threshold_scale, size=(trials, 1))
    query_scale = {1: 4 * cutoff * s / epsilon, 2: 4 * cutoff * s / epsilon, 3: 2 * cutoff * s / epsilon,
                   4: 4 * s / (3 * epsilon), 5: None, 6: 2 * s / epsilon}[variant]
    if query_scale is None:
        noisy = np.tile(answers, (trials, 1))
    else:
        noisy = answers + rng.laplace(0, query_scale, size=(trials, queries))
    above = noisy >= noisy_threshold
    out = np.where(above, noisy if variant == 3 else ABOVE, BELOW)
    hits_before = np.cumsum(above, axis=1) - above  # DataValues.SVT_NO_RESPONSE once c answers were above
    out[hits_before >= cutoff] = NO_RESPONSE
    return snap(out, GRID)


def noisy_max(records: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
              elements: int) -> np.ndarray:
    """``NoisyMaxMechanism``: the argmax of each element's count plus ``Gumbel(0, 2 / epsilon)`` (a record votes
    for the element it equals; ``elements`` elements ``0 .. elements - 1``)."""
    values = np.asarray(records, dtype=np.float64).ravel()
    counts = np.array([np.count_nonzero(values == i) for i in range(elements)], dtype=np.float64)
    noise = rng.gumbel(loc=0, scale=2 / epsilon, size=(trials, elements))
    return np.argmax(counts + noise, axis=1).astype(np.float64)[:, None]


def mean(records: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float, noised_mean: bool,
         noised_scale: bool, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """``MeanMechanism`` with ``delta = 0`` (Laplace): the clipped sum over a count, plus noise scaled by a count.

    Draws the noisy count ``len + Lap(1 / (b eps))`` (``b = 1/2`` when either count is noised, else 1),
    then the mean's noise ``Lap(|high - low| / (b eps n))`` with ``n`` the true or the noisy count
    (``noised_scale``), at least ``1e-12``; the mean divides by the true or the noisy count
    (``noised_mean``). On an empty dataset the true count is 0: ``0 / 0``.
    """
    data = np.clip(np.asarray(records, dtype=np.float64).ravel(), low, high)
    budget = 0.5 if noised_mean or noised_scale else 1.0
    noisy_counts = len(data) + rng.laplace(0, 1.0 / budget / epsilon, (trials, 1))
    for_mean = noisy_counts if noised_mean else len(data)
    for_scale = noisy_counts if noised_scale else len(data)
    scale = np.maximum(1e-12, abs(high - low) / budget / epsilon / np.asarray(for_scale, dtype=np.float64))
    return snap(np.sum(data) / np.asarray(for_mean, dtype=np.float64) + rng.laplace(0.0, scale, (trials, 1)), GRID)


def one_step_gd(records: np.ndarray, rng: np.random.Generator, trials: int, *, noise_multiplier: float,
                clip: float) -> np.ndarray:
    """One step of noisy gradient descent from ``theta = 0`` on the loss ``(theta - x)^2 / 2`` of each record.

    Each record's gradient ``-x`` is clipped to ``[-clip, clip]`` and the sum released with
    ``N(0, (noise_multiplier clip)^2)`` noise (step size 1). DP-Auditorium publishes the budget of this
    case (``mechanisms_utils.get_wrong_one_step_gd_budget``: the Renyi epsilon of a Gaussian of
    sensitivity ``clip``) and its config (``GradientDescentMechanismConfig``: ``l2_norm_clip``,
    ``noise_scale_reduce_factor``) but not the class, so the step is written from that docstring:
    replacing a record moves the sum by ``2 clip``, and the budget assumes ``clip``.
    """
    grads = np.clip(-np.asarray(records, dtype=np.float64).ravel(), -clip, clip)
    return snap(-(grads.sum() + rng.normal(0.0, noise_multiplier * clip, (trials, 1))), GRID)


#: Renyi orders of the claim of ``gd-one-step`` (those of TensorFlow Privacy's and Opacus's early defaults)
GD_ORDERS = (1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


def gd_claim(noise_multiplier: float, delta: float) -> float:
    """The epsilon the one-step budget claims at ``delta``: Renyi ``alpha / (2 nm^2)`` (sensitivity ``clip``,
    ``get_wrong_one_step_gd_budget``) converted on :data:`GD_ORDERS` by Canonne, Kamath, Steinke (2020)."""
    orders = np.array(GD_ORDERS)
    return float(cks_epsilon(delta, orders, orders / (2.0 * noise_multiplier**2)))


def exact_epsilon(case: "AuditoriumCase", first: np.ndarray, second: np.ndarray, delta: float = 1e-5) -> float | None:
    """The exact epsilon of ``case`` on the pair of record arrays ``(first, second)`` (None where not computed).

    SVT: the pure epsilon of the output law, every answer vector enumerated and integrated over the threshold
    noise (SVT3's released value on cells of 1/2: it approaches the supremum from below; docs/theory.md 8),
    from the two datasets' query answers; the query's own refusal (fewer than two records) gives None.
    Noisy max: the exponential mechanism's law ``P(i) ~ exp(epsilon c_i / 2)``, pure. The gradient step: a
    Gaussian shift of the clipped sums over ``noise_multiplier clip``, at ``delta``. The mean: None.
    """
    first = np.asarray(first, dtype=np.float64).ravel()
    second = np.asarray(second, dtype=np.float64).ravel()
    options = case.options
    if case.sampler is sparse_vector:
        low, high, queries = options.get("low", 0.0), options.get("high", 1.0), options["queries"]
        try:
            answers = [_QUERIES[options["query"]](data, low=low, high=high, queries=queries) for data in (first, second)]
        except ValueError:
            return None
        variant, epsilon, cutoff, s = options["variant"], options["epsilon"], options["cutoff"], high - low
        if variant == 3:
            law = svt_values_law(*answers, epsilon=epsilon / s, threshold=options["threshold"], cutoff=cutoff,
                                 step=0.25, width=0.5)
            return law.true_epsilon
        rho = {1: 2 * s, 2: 2 * cutoff * s, 4: 4 * s, 5: 2 * s, 6: 2 * s}[variant] / epsilon
        nu = {1: 4 * cutoff * s / epsilon, 2: 4 * cutoff * s / epsilon, 4: 4 * s / (3 * epsilon), 5: None,
              6: 2 * s / epsilon}[variant]
        above, below = _svt_outcomes(queries, cutoff)
        masses = _pattern_masses(tuple(answers), above, below, threshold=options["threshold"], rho_scale=rho,
                                 query_scale=nu, step=0.05)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.log(masses[1]) - np.log(masses[0])
        return float(np.max(np.abs(ratio[(masses[0] > 0) | (masses[1] > 0)])))
    if case.sampler is noisy_max:
        counts = [np.array([np.count_nonzero(data == i) for i in range(options["elements"])], dtype=float)
                  for data in (first, second)]
        logits = [options["epsilon"] * c / 2 - np.logaddexp.reduce(options["epsilon"] * c / 2) for c in counts]
        return float(np.max(np.abs(logits[1] - logits[0])))
    if case.sampler is one_step_gd:
        clip, noise = options["clip"], options["noise_multiplier"]
        shift = abs(np.clip(first, -clip, clip).sum() - np.clip(second, -clip, clip).sum())
        return float(gaussian_epsilon(delta, shift / (noise * clip)))
    return None


@dataclasses.dataclass(frozen=True)
class AuditoriumCase:
    """One DP-Auditorium mechanism: its sampler, the epsilon it claims, where its records lie, and whether it
    is buggy (a violation an audit must find) or correct (one it must not flag).

    ``min_records`` is the fewest records its code accepts (the reveal-records query needs two);
    ``exact`` the exact epsilon of the worst pair known, where computed (docs/theory.md 8).
    """

    name: str
    sampler: Callable[..., np.ndarray]
    options: dict[str, Any]
    output_dim: int
    record_domain: tuple[float, float]
    claimed: float
    buggy: bool
    min_records: int = 1
    note: str = ""

    def mechanism(self) -> Mechanism:
        """The case as a user wraps it: ``from_batched_callable`` with its record domain."""
        sampler, options = self.sampler, dict(self.options)

        def batched(records: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
            return sampler(records, rng, trials, **options)
        return from_batched_callable(batched, self.output_dim, name=f"dp-auditorium {self.name}",
                                     record_domain=self.record_domain)


def _svt(variant: int, query: str, buggy: bool, note: str) -> AuditoriumCase:
    options = {"variant": variant, "epsilon": 1.0, "query": query, "queries": 5, "threshold": 1.0, "cutoff": 1}
    return AuditoriumCase(f"svt{variant}-{query}", sparse_vector, options, 5, (0.0, 1.0), 1.0, buggy,
                          2 if query == "reveal-records" else 1, note)


#: The cases: epsilon 1, five queries, threshold 1, cutoff 1, records in [0, 1] for SVT; noise multiplier 4
#: and clip 1 for the gradient step (claim 1.018 at delta 1e-5; replace-one [-1] vs [1] is exactly 1.993)
CASES: tuple[AuditoriumCase, ...] = (
    _svt(3, "sum", True, "releases the noisy answer (Lyu et al. Alg. 3): not private"),
    _svt(3, "reveal-records", True, "releases the noisy answer (Lyu et al. Alg. 3): not private"),
    _svt(4, "reveal-records", True, "(1 + 6c) eps / 4 = 1.75-DP, claimed 1"),
    _svt(6, "reveal-records", True, "noisy queries without the cutoff's scaling: not 1-DP"),
    AuditoriumCase("gd-one-step", one_step_gd, {"noise_multiplier": 4.0, "clip": 1.0}, 1, (-1.0, 1.0),
                   gd_claim(4.0, 1e-5), True, note="budget for sensitivity clip; replace-one moves 2 clip"),
    _svt(1, "reveal-records", False, "epsilon-DP"),
    _svt(2, "reveal-records", False, "epsilon-DP (cutoff 1: SVT1's scales)"),
    AuditoriumCase("noisy-max", noisy_max, {"epsilon": 1.0, "elements": 5}, 1, (0.0, 4.0), 1.0, False,
                   note="the exponential mechanism: epsilon-DP"),
)
