"""Exact output laws of the sparse vector technique on a pair of answer vectors (docs/theory.md 8).

SVT's comparisons are independent given the threshold noise ``rho``: every
law here enumerates the answer vectors (which queries are above, below or
not answered after the cutoff) and integrates over ``rho`` on fine cells.
SVT3 and numerical SVT also release noisy answers; their laws add cells of
those values (SVT3, whose values depend on ``rho``) or of their likelihood
ratio (numerical SVT, whose released answers carry fresh noise).
The laws are :class:`~dpaudit.auditing.checks.zoo.blackbox_laws.OutputLaw`
objects, with their true epsilon and ceiling.

References
----------
Lyu, Su, Li, "Understanding the sparse vector technique for differential
privacy", PVLDB 10(6), 2017 (Algorithms 1-6).
Wang, Ding, Wang, Kifer, Zhang, "Proving differential privacy with shadow
execution", PLDI 2019 (numerical SVT).
docs/theory.md section 8.
"""

from __future__ import annotations

import itertools

import numpy as np

from dpaudit.auditing.checks.zoo.blackbox_laws import (OutputLaw, grid_edges, laplace_between, laplace_shift_law,
                                                    noise_cdf, product_law)

__all__ = ["numerical_svt_law", "svt_law", "svt_values_law", "svt34_law"]


def _svt_outcomes(n: int, cutoff: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Every SVT answer vector as masks ``(above, below)`` over the queries (aborted: neither)."""
    above, below = [], []
    sizes = range(n + 1) if cutoff is None else range(cutoff + 1)
    for size in sizes:
        for hits in itertools.combinations(range(n), size):
            up = np.zeros(n, dtype=bool)
            up[list(hits)] = True
            answered = np.arange(n) <= (max(hits) if cutoff is not None and size == cutoff else n)
            above.append(up)
            below.append(answered & ~up)
    return np.array(above, dtype=float), np.array(below, dtype=float)


def _rho_cells(rho_scale: float, span: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints and masses of ``Lap(rho_scale)`` on cells of ``step`` over ``span`` scales either side
    (the rest of the mass in the two outer cells)."""
    edges = grid_edges(-span * rho_scale - 10, span * rho_scale + 10, step)
    rho_mass = np.diff(noise_cdf("laplace", edges, rho_scale))
    rho_mass[0] += noise_cdf("laplace", edges[:1], rho_scale)[0]
    rho_mass[-1] += 1 - noise_cdf("laplace", edges[-1:], rho_scale)[0]
    return 0.5 * (edges[1:] + edges[:-1]), rho_mass


def _pattern_masses(pair: tuple[np.ndarray, np.ndarray], above: np.ndarray, below: np.ndarray, *,
                    threshold: float, rho_scale: float, query_scale: float | None, step: float
                    ) -> list[np.ndarray]:
    """The probability of each answer vector (rows of the masks ``above``, ``below``) of the comparisons
    ``q_j + nu_j >= t + rho`` with ``nu ~ Lap(query_scale)`` (none when None) and ``rho ~ Lap(rho_scale)``,
    for each answer vector ``q`` of ``pair`` (the rho cells computed once for both)."""
    middle, rho_mass = _rho_cells(rho_scale, 40.0, step)
    masses = []
    for answers in pair:
        gap = answers[None, :] - middle[:, None] - threshold  # above iff nu >= -gap
        p = (gap >= 0).astype(float) if query_scale is None else 1 - noise_cdf("laplace", -gap, query_scale)
        log_p, log_q = np.log(np.maximum(p, 1e-300)), np.log(np.maximum(1 - p, 1e-300))
        masses.append(np.exp(above @ log_p.T + below @ log_q.T) @ rho_mass)  # (outcomes, cells) summed over rho
    return masses


def svt_law(answers_a: np.ndarray, answers_b: np.ndarray, *, variant: int, epsilon: float, cutoff: int,
            threshold: float, step: float = 0.25) -> OutputLaw:
    """Every answer vector of SVT (Lyu, Su, Li 2017, Alg. 1, 2 with ``c = 1``, 4, 5, 6), integrated over the
    threshold noise ``rho``.

    Given ``rho = r`` the queries are independent, query ``j`` above with probability
    ``p_j(r) = P(q_j + nu_j >= r + t)``; an answer vector's probability is
    ``int prod_j p_j(r)^[above] (1 - p_j(r))^[below] dF_rho(r)``, summed on cells of width ``step``
    (aligned with ``q_j - t``, where SVT5's ``p_j`` jumps).
    """
    if variant == 2 and cutoff != 1:
        raise ValueError("the SVT2 law is computed for cutoff 1 (where it is SVT1's law with its own scales)")
    eps1 = epsilon / 4.0 if variant == 4 else epsilon / 2.0
    eps2 = epsilon - eps1
    rho_scale = cutoff / eps1 if variant == 2 else 1 / eps1
    query_scale = {1: 2 * cutoff / eps2, 2: 2 * cutoff / eps2, 4: 1 / eps2, 5: None, 6: 1 / eps2}[variant]
    above, below = _svt_outcomes(answers_a.size, None if variant in (5, 6) else cutoff)
    masses = _pattern_masses((answers_a, answers_b), above, below, threshold=threshold, rho_scale=rho_scale,
                             query_scale=query_scale, step=step)
    return OutputLaw(masses[0], masses[1], f"enumerated, integrated over rho (cells of {step:g})")


def svt_values_law(answers_a: np.ndarray, answers_b: np.ndarray, *, epsilon: float, threshold: float,
                   cutoff: int = 1, step: float = 1.0, width: float | None = None, span: float = 40.0
                   ) -> OutputLaw:
    """SVT3 with cutoff 1 or 2 (Lyu, Su, Li 2017, Alg. 3): the queries above, in order, with their noisy answers.

    ``rho ~ Lap(2/eps)``, ``nu ~ Lap(2c/eps)``. Given ``rho = r`` the queries are independent: query ``j``
    is below with ``B_j(r) = P(q_j + nu_j < r + t)`` and above with its answer in a value cell ``C`` with
    ``A_j(r, C)``. With cutoff 1, ``P(k, C) = int prod_{j<k} B_j(r) A_k(r, C) dF_rho(r)``; with cutoff 2,
    ``P(k1, C1, k2, C2) = int prod_{j<k2, j != k1} B_j(r) A_k1(r, C1) A_k2(r, C2) dF_rho(r)`` and a single
    hit ``k1`` has every other query below. Cells of ``width`` in the value (default ``4c``) and ``step``
    in ``r``, over ``span`` noise scales either side (the rest in two outer cells).
    """
    if cutoff not in (1, 2):
        raise ValueError(f"the SVT3 law is computed for cutoff 1 or 2, got cutoff={cutoff!r}")
    rho_scale, query_scale = 2.0 / epsilon, 2.0 * cutoff / epsilon
    width = 4.0 * cutoff if width is None else width
    r, rho_mass = _rho_cells(rho_scale, span, step)
    value_edges = grid_edges(-span * query_scale - 10, span * query_scale + 10, width)
    value_edges = np.concatenate([[-np.inf], value_edges, [np.inf]])
    low = np.maximum(value_edges[:-1, None], r[None, :] + threshold)  # (value cells, r cells)
    high = np.maximum(value_edges[1:, None], low)
    masses = []
    for answers in (answers_a, answers_b):
        below = np.array([noise_cdf("laplace", r + threshold - q, query_scale) for q in answers])  # B_j(r)
        above = [laplace_between(low - q, high - q, query_scale) for q in answers]  # A_j(r, C)
        parts = []
        for k in range(answers.size):  # a loop over the queries: the first above is query k
            others = np.prod(below[:k], axis=0) * rho_mass  # the queries before k: below
            if cutoff == 1:
                parts.append(above[k] @ others)
                continue
            parts.append(above[k] @ (others * np.prod(below[k + 1:], axis=0)))  # no second query above
            for second in range(k + 1, answers.size):
                between = others * np.prod(below[k + 1:second], axis=0)
                parts.append(((above[k] * between) @ above[second].T).ravel())
        parts.append(np.array([np.prod(below, axis=0) @ rho_mass]))  # no query above
        masses.append(np.concatenate(parts))
    return OutputLaw(masses[0], masses[1], f"integrated (cells of {width:g} in the value, {step:g} in rho)")


def numerical_svt_law(answers_a: np.ndarray, answers_b: np.ndarray, *, epsilon: float, cutoff: int,
                      threshold: float, step: float = 0.25, resolution: int = 64) -> OutputLaw:
    """Numerical SVT (Wang et al. 2019): which queries are above, and a fresh noisy answer for each.

    Threshold noise ``Lap(3/eps)``, comparison noise ``Lap(6c/eps)``; each query above releases
    ``q_j + Lap(3c/eps)``, drawn independently of the comparisons. So an outcome is an answer vector
    ``v`` (:func:`svt_law`'s integral with these scales) and, given ``v``, the released answers at its
    queries above, whose likelihood ratio is that of a sum of Laplace shifts
    (:func:`~dpaudit.auditing.checks.zoo.blackbox_laws.laplace_shift_law`): the outcomes are the pairs
    (answer vector, cell of that sum), of probability the product.
    """
    query_scale, value_scale = 6.0 * cutoff / epsilon, 3.0 * cutoff / epsilon
    above, below = _svt_outcomes(answers_a.size, cutoff)
    vectors = _pattern_masses((answers_a, answers_b), above, below, threshold=threshold,
                              rho_scale=3.0 / epsilon, query_scale=query_scale, step=step)
    shifts = np.abs(np.asarray(answers_b, dtype=float) - np.asarray(answers_a, dtype=float))
    values: dict[tuple[float, ...], OutputLaw] = {}
    mass_a, mass_b = [], []
    for row, vector_a, vector_b in zip(above.astype(bool), *vectors):
        key = tuple(sorted(shifts[row]))
        if key not in values:
            values[key] = laplace_shift_law(np.array(key), scale=value_scale, resolution=resolution)
        mass_a.append(vector_a * values[key].mass_a)
        mass_b.append(vector_b * values[key].mass_b)
    return OutputLaw(np.concatenate(mass_a), np.concatenate(mass_b),
                     f"enumerated answer vectors (rho in cells of {step:g}) x released answers "
                     f"(cells of 1/{resolution})")


def svt34_law(answers_a: np.ndarray, answers_b: np.ndarray, *, epsilon: float, cutoff: int, threshold: float,
              span: float = 20.0, resolution: float = 1e-4) -> OutputLaw:
    """SVT3 and SVT4 side by side on the same answers, with independent noise: the product of their laws
    (:func:`svt_values_law` over ``span`` noise scales, :func:`svt_law`), merged by ratio to ``resolution``."""
    values = svt_values_law(answers_a, answers_b, epsilon=epsilon, threshold=threshold, cutoff=cutoff, span=span)
    answers = svt_law(answers_a, answers_b, variant=4, epsilon=epsilon, cutoff=cutoff, threshold=threshold)
    return product_law(values, answers, resolution)
