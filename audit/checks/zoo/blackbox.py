"""The black-box benchmark algorithms: functions of a vector of query answers, vectorised over trials.

Each sampler takes the query answers ``answers`` (shape ``(n,)``), a
``numpy.random.Generator`` and the number of trials, and returns one output
row per trial (shape ``(trials, dim)``), all trials in one batched
computation (loops run over the few queries, never over trials). They are
written from their papers; parameters (epsilon, the cutoff ``c``, the
threshold ``t``, the numbers of queries) are those of the published
benchmarks of StatDP and DP-Sniper (docs/theory.md section 8).

Special output codes follow the benchmarks: ``-1`` for a query not answered
after the cutoff (``-2000`` where noisy values are released, with ``-1000``
for "below"). Continuous outputs are snapped to the release grid ``2^-12``
so that only the algorithm, not the floating-point noise of its
implementation, is audited (Mironov 2012).

References
----------
Ding, Wang, Wang, Zhang, Kifer, "Detecting violations of differential
privacy", CCS 2018 (Algorithms 5-10: report noisy max, noisy histograms).
Bichsel, Steffen, Bogunovic, Vechev, "DP-Sniper: black-box discovery of
differential privacy violations using classifiers", IEEE S&P 2021.
Lyu, Su, Li, "Understanding the sparse vector technique for differential
privacy", PVLDB 10(6), 2017 (Algorithms 1-6).
Wang, Ding, Wang, Kifer, Zhang, "Proving differential privacy with shadow
execution", PLDI 2019 (numerical SVT, prefix sum).
Erlingsson, Pihur, Korolova, "RAPPOR", CCS 2014 (steps 1-3).
Balcer, Vadhan, "Differential privacy on finite computers", 2018, Alg. 4.8.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.base import RELEASE_GRID, snap

__all__ = [
    "BELOW", "ABORTED", "VALUE_ABORTED", "noisy_max", "sparse_vector", "svt_with_values", "numerical_svt",
    "rappor", "rappor_epsilon", "bloom_positions", "prefix_sum", "noisy_histogram", "truncated_geometric",
    "geometric_cdf", "laplace_parallel", "svt34_parallel",
]

GRID = RELEASE_GRID["float64"]
ABORTED = -1.0  # a query not answered: the cutoff c was reached (SVT1, 2, 4)
BELOW = -1000.0  # SVT3: the query was below the threshold
VALUE_ABORTED = -2000.0  # SVT3: not answered; numerical SVT uses -1000 for this (as published)


def noisy_max(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
              noise: str = "laplace", release: str = "index") -> np.ndarray:
    """Report noisy max (Ding et al. 2018, Algorithms 5-8): noise of scale ``2 / epsilon`` on each answer.

    ``noise`` is ``"laplace"`` or ``"exponential"``; ``release`` is ``"index"``
    (the argmax: epsilon-DP) or ``"value"`` (the noisy maximum itself: not
    epsilon-DP; Laplace reaches ``n epsilon / 2`` in the lower tail, the
    exponential's support moves with the answers).
    """
    scale = 2.0 / epsilon
    shape = (trials, answers.size)
    draws = rng.laplace(0.0, scale, shape) if noise == "laplace" else rng.exponential(scale, shape)
    noisy = answers[None, :] + draws
    if release == "index":
        return np.argmax(noisy, axis=1).astype(np.float64)[:, None]
    return snap(noisy.max(axis=1), GRID)[:, None]


def _cut_off(above: np.ndarray, cutoff: int | None, fill: float, values: np.ndarray) -> np.ndarray:
    """``values`` with every query after the ``cutoff``-th "above" replaced by ``fill``."""
    if cutoff is None:
        return values
    hits_before = np.cumsum(above, axis=1) - above
    return np.where(hits_before >= cutoff, fill, values)


def sparse_vector(answers: np.ndarray, rng: np.random.Generator, trials: int, *, variant: int,
                  epsilon: float, cutoff: int, threshold: float) -> np.ndarray:
    """The sparse vector technique, Algorithms 1, 2, 4, 5 and 6 of Lyu, Su and Li (2017).

    Outputs 1 (above the noisy threshold), 0 (below) and, for the variants
    with a cutoff (1, 2, 4), -1 after the ``cutoff``-th 1. Noise scales,
    with ``eps1 = epsilon / 2`` (``epsilon / 4`` in Alg. 4), ``eps2 = epsilon - eps1``:

    ==== =========================== ========================= =======================
    Alg  threshold noise             query noise               as published
    ==== =========================== ========================= =======================
    1    Lap(1 / eps1)               Lap(2c / eps2)            epsilon-DP
    2    Lap(c / eps1), redrawn      Lap(2c / eps2)            epsilon-DP
         after each 1
    4    Lap(1 / eps1)               Lap(1 / eps2)             ((1 + 6c) / 4) epsilon
    5    Lap(1 / eps1)               none                      not DP (no query noise)
    6    Lap(1 / eps1)               Lap(1 / eps2), no cutoff  not DP for any finite epsilon
    ==== =========================== ========================= =======================
    """
    if variant not in (1, 2, 4, 5, 6):
        raise ValueError(f"variant must be 1, 2, 4, 5 or 6 (3 is svt_with_values), got variant={variant!r}")
    eps1 = epsilon / 4.0 if variant == 4 else epsilon / 2.0
    eps2 = epsilon - eps1
    n = answers.size
    query_scale = {1: 2 * cutoff / eps2, 2: 2 * cutoff / eps2, 4: 1 / eps2, 6: 1 / eps2}.get(variant)
    noisy = answers[None, :] + (rng.laplace(0.0, query_scale, (trials, n)) if query_scale else 0.0)
    if variant == 2:  # the threshold's noise is redrawn after each "above": one draw per possible hit
        rho = rng.laplace(0.0, cutoff / eps1, (trials, cutoff + 1))
        hits = np.zeros(trials, dtype=np.int64)
        above = np.zeros((trials, n), dtype=bool)
        for query in range(n):  # a loop over the n queries; every trial at once
            current = np.take_along_axis(rho, np.minimum(hits, cutoff)[:, None], axis=1)[:, 0]
            above[:, query] = noisy[:, query] >= current + threshold
            hits += above[:, query]
    else:
        rho = rng.laplace(0.0, 1 / eps1, (trials, 1))
        above = noisy >= rho + threshold
    out = above.astype(np.float64)
    return out if variant in (5, 6) else _cut_off(above, cutoff, ABORTED, out)


def svt_with_values(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                    cutoff: int, threshold: float) -> np.ndarray:
    """Algorithm 3 of Lyu, Su and Li (2017): the noisy answer is released for each query above.

    Threshold noise ``Lap(2 / epsilon)``, query noise ``Lap(2c / epsilon)``;
    below is -1000, not answered -2000. Published as epsilon-DP, it is not
    (releasing the noisy answer costs privacy for every query answered).
    """
    eps1 = epsilon / 2.0
    eps2 = epsilon - eps1
    noisy = answers[None, :] + rng.laplace(0.0, cutoff / eps2, (trials, answers.size))
    above = noisy >= rng.laplace(0.0, 1 / eps1, (trials, 1)) + threshold
    out = np.where(above, snap(noisy, GRID), BELOW)
    return _cut_off(above, cutoff, VALUE_ABORTED, out)


def numerical_svt(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                  cutoff: int, threshold: float) -> np.ndarray:
    """Numerical SVT (Wang et al. 2019): a fresh noisy answer for each query above, 0 below, -1000 after the cutoff.

    Threshold noise ``Lap(3 / epsilon)``, comparison noise ``Lap(6c / epsilon)``,
    released answers with ``Lap(3c / epsilon)``: epsilon-DP.
    """
    n = answers.size
    above = answers[None, :] + rng.laplace(0.0, 6 * cutoff / epsilon, (trials, n)) \
        >= threshold + rng.laplace(0.0, 3 / epsilon, (trials, 1))
    released = snap(answers[None, :] + rng.laplace(0.0, 3 * cutoff / epsilon, (trials, n)), GRID)
    return _cut_off(above, cutoff, -1000.0, np.where(above, released, 0.0))


def bloom_positions(value: float, *, hashes: int, size: int) -> np.ndarray:
    """The Bloom-filter positions of ``value``: ``hashes`` seeded draws in ``[0, size)`` (collisions allowed)."""
    key = int(round(float(value))) & 0xFFFFFFFF
    return np.random.default_rng([0xB100F, key]).integers(0, size, hashes)


def rappor(answers: np.ndarray, rng: np.random.Generator, trials: int, *, hashes: int = 4, size: int = 20,
           f: float = 0.75, p: float = 0.45, q: float = 0.55, instantaneous: bool = True) -> np.ndarray:
    """RAPPOR's report of one value (Erlingsson et al. 2014, steps 1-3; one-time RAPPOR: steps 1-2).

    Step 1 sets the ``hashes`` Bloom-filter bits of the value; step 2 (the
    permanent randomized response) sets each bit to 1 with probability
    ``f / 2``, to 0 with probability ``f / 2``, else keeps it; step 3 (the
    instantaneous one) reports 1 with probability ``q`` for a 1 and ``p``
    for a 0. Bits are independent given the value.
    """
    bloom = np.zeros(size, dtype=bool)
    bloom[bloom_positions(answers[0], hashes=hashes, size=size)] = True
    choice = rng.random((trials, size))
    permanent = np.where(choice < f / 2, True, np.where(choice < f, False, bloom[None, :]))
    if not instantaneous:
        return permanent.astype(np.float64)
    return (rng.random((trials, size)) < np.where(permanent, q, p)).astype(np.float64)


def rappor_epsilon(*, hashes: int, f: float, p: float | None = None, q: float | None = None, size: int = 0) -> float:
    """RAPPOR's guarantee for one report (Erlingsson et al. 2014, section 4).

    ``h log(q*(1 - p*) / (p*(1 - q*)))`` with ``q* = f(p + q)/2 + (1 - f) q``,
    ``p* = f(p + q)/2 + (1 - f) p`` (each of the at most ``2h`` bits where two
    values' filters differ contributes half a logarithm); one-time RAPPOR
    (``p``, ``q`` not given): ``2h log((1 - f/2) / (f/2))``. The filter ``size`` does not enter.
    """
    if p is None or q is None:
        return 2 * hashes * math.log((1 - f / 2) / (f / 2))
    q_star = 0.5 * f * (p + q) + (1 - f) * q
    p_star = 0.5 * f * (p + q) + (1 - f) * p
    return hashes * math.log(q_star * (1 - p_star) / (p_star * (1 - q_star)))


def prefix_sum(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float) -> np.ndarray:
    """Prefix sums of the answers with ``Lap(1 / epsilon)`` on each (Wang et al. 2019).

    Epsilon-DP when one answer changes by at most 1; when every answer may
    change by 1 (the component-wise relation of the suite) it costs
    ``n epsilon``.
    """
    noisy = answers[None, :] + rng.laplace(0.0, 1 / epsilon, (trials, answers.size))
    return snap(np.cumsum(noisy, axis=1), GRID)


def noisy_histogram(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                    wrong_scale: bool = False) -> np.ndarray:
    """Each bin plus ``Lap(1 / epsilon)`` (Ding et al. 2018, Alg. 9); the bug of Alg. 10 uses scale ``epsilon``."""
    scale = epsilon if wrong_scale else 1 / epsilon
    return snap(answers[None, :] + rng.laplace(0.0, scale, (trials, answers.size)), GRID)


def geometric_cdf(count: int, *, epsilon: float, n: int) -> tuple[np.ndarray, int]:
    """The integer table ``F(0..n)`` and denominator ``d`` of GeoSample (Balcer & Vadhan 2018, Alg. 4.8).

    With ``k = ceil(log(2 / epsilon))``: ``d = (2^(k+1) + 1)(2^k + 1)^(n-1)``;
    ``F(z) = 2^(k(c-z)) (2^k + 1)^(n-(c-z))`` for ``z < c``,
    ``F(z) = d - 2^(k(z-c+1)) (2^k + 1)^(n-1-(z-c))`` for ``c <= z < n``, ``F(n) = d``.
    The output is the least ``z`` with ``F(z) >= U``, ``U`` uniform on ``1..d``.
    """
    k = math.ceil(math.log(2.0 / epsilon))
    base = 2**k + 1
    d = (2 ** (k + 1) + 1) * base ** (n - 1)
    table = [2 ** (k * (count - z)) * base ** (n - (count - z)) if z < count
             else d - 2 ** (k * (z - count + 1)) * base ** (n - 1 - (z - count)) for z in range(n)]
    return np.array([*table, d], dtype=np.int64), d


def truncated_geometric(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                        n: int = 5) -> np.ndarray:
    """GeoSample(epsilon, n) of a count in ``0..n``: ``log(1 + 2^-k)``-DP (Balcer & Vadhan 2018, Thm 4.7)."""
    count = int(round(float(answers[0])))
    if not 0 <= count <= n:
        raise ValueError(f"the count must lie in 0..{n}, got {answers[0]!r}")
    table, d = geometric_cdf(count, epsilon=epsilon, n=n)
    uniform = rng.integers(1, d + 1, trials)
    return np.searchsorted(table, uniform, side="left").astype(np.float64)[:, None]


def laplace_parallel(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                     copies: int) -> np.ndarray:
    """``copies`` independent Laplace mechanisms ``Lap(1 / epsilon)`` on one answer: ``copies * epsilon``-DP."""
    return snap(answers[0] + rng.laplace(0.0, 1 / epsilon, (trials, copies)), GRID)


def svt34_parallel(answers: np.ndarray, rng: np.random.Generator, trials: int, *, epsilon: float,
                   cutoff: int, threshold: float) -> np.ndarray:
    """SVT3 and SVT4 run side by side on the same answers: claimed ``2 epsilon`` by composition."""
    return np.hstack([svt_with_values(answers, rng, trials, epsilon=epsilon, cutoff=cutoff, threshold=threshold),
                      sparse_vector(answers, rng, trials, variant=4, epsilon=epsilon, cutoff=cutoff,
                                    threshold=threshold)])
