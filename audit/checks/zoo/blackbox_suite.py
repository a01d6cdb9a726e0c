"""The black-box benchmark suite: each algorithm at its published claim, on the pair the pattern search picks.

For each algorithm of :data:`SUITE` the runner screens the standard input
patterns (:func:`dpaudit.auditing.checks.vector_pairs.screen_vector_pairs`), then runs
on the strongest pair, from a seed the screening never used, the audit that
``dpaudit.assert_private`` runs with its default settings (the default
portfolio, sequential looks, the claim at delta 0). Next to the certified
bound it reports the pair's true epsilon and the statistical ceiling at the
run's trials with its band (where 95% of audits at the oracle threshold land:
one run's bound scatters that much even with the best test), from the exact
output law where one is computed
(:mod:`dpaudit.auditing.checks.zoo.blackbox_laws`, :mod:`dpaudit.auditing.checks.zoo.svt_laws`);
docs/theory.md section 8.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.auditing.checks.api import audit
from dpaudit.auditing.checks.vector_pairs import VectorCandidate, screen_vector_pairs
from dpaudit.auditing.checks.zoo import blackbox as bb
from dpaudit.auditing.checks.zoo import blackbox_laws as laws
from dpaudit.auditing.checks.zoo import svt_laws
from dpaudit.auditing.checks.zoo.statuses import BEYOND_REACH, CAUGHT, FAILURES, FALSE_ALARM, MISSED, PASSED
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.wrapped import BatchedCallableMechanism, from_batched_callable

__all__ = ["SUITE", "Algorithm", "SuiteResult", "run_blackbox_suite", "screen_algorithm"]

EPS = 0.1  # the published claim of most of the suite
Law = Callable[[np.ndarray, np.ndarray], laws.OutputLaw]


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """One benchmark algorithm: its sampler of ``(answers, rng, trials)``, its claim and its relation."""

    name: str
    sample: Callable[[np.ndarray, np.random.Generator, int], np.ndarray]
    queries: int
    output_dim: int
    claim: float
    relation: str  # "component-wise" or "one-answer" (dpaudit.auditing.checks.vector_pairs)
    violates: bool  # the claim is false under the relation (the literature's verdict)
    why: str
    law: Law | None = None  # the exact output law on a pair, where computed

    def mechanism(self) -> BatchedCallableMechanism:
        """The algorithm as a mechanism of a dataset whose records are the query answers."""
        sample = self.sample

        def batched(records: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
            return sample(np.asarray(records, dtype=float)[:, 0], rng, trials)
        return from_batched_callable(batched, self.output_dim, name=self.name)


def _p(function, **kwargs):
    return functools.partial(function, **kwargs)


_SVT = dict(epsilon=EPS, cutoff=1, threshold=1.0)
_RAPPOR = dict(hashes=4, size=20, f=0.75, p=0.45, q=0.55)
_ONE_TIME = dict(hashes=4, size=20, f=0.95)
_GEOMETRIC_CLAIM = math.log(1 + 2.0 ** -math.ceil(math.log(2 / EPS)))  # Balcer & Vadhan 2018, Thm 4.7


def _noisy_max(noise: str, release: str, violates: bool, why: str) -> Algorithm:
    law = laws.noisy_max_index_law if release == "index" else laws.noisy_max_value_law
    return Algorithm(f"noisy-max-{noise}-{release}", _p(bb.noisy_max, epsilon=EPS, noise=noise, release=release),
                     5, 1, EPS, "component-wise", violates, why, _p(law, epsilon=EPS, noise=noise))


def _svt(variant: int, violates: bool, why: str, threshold: float = 1.0) -> Algorithm:
    settings = {**_SVT, "threshold": threshold}
    return Algorithm(f"svt{variant}", _p(bb.sparse_vector, variant=variant, **settings), 10, 10, EPS,
                     "component-wise", violates, why, _p(svt_laws.svt_law, variant=variant, **settings))


def _shift_law(scale: float, copies: int = 1) -> Law:
    def law(first: np.ndarray, second: np.ndarray) -> laws.OutputLaw:
        return laws.laplace_shift_law(np.repeat(second - first, copies), scale=scale)
    return law


#: The suite: DP-Sniper's benchmark (Bichsel et al. 2021), parameters as published.
SUITE: tuple[Algorithm, ...] = (
    _noisy_max("laplace", "index", False, "report noisy max, Lap(2/eps): eps-DP"),
    _noisy_max("exponential", "index", False, "report noisy max, Exp(2/eps): eps-DP"),
    _noisy_max("laplace", "value", True, "the noisy maximum released: n eps / 2 = 0.25 (all answers up)"),
    _noisy_max("exponential", "value", True, "the noisy maximum released: its support moves, no finite eps"),
    _svt(1, False, "SVT of Lyu et al. Alg. 1 (c = 1, t = 0.5): eps-DP", threshold=0.5),
    _svt(2, False, "SVT of Lyu et al. Alg. 2 (c = 1): eps-DP"),
    Algorithm("svt3", _p(bb.svt_with_values, **_SVT), 10, 10, EPS, "component-wise", True,
              "releases the noisy answer above the threshold: not eps-DP (Lyu et al. Alg. 3)",
              _p(svt_laws.svt_values_law, epsilon=EPS, threshold=1.0)),
    _svt(4, True, "query noise Lap(1/eps2): ((1 + 6c) / 4) eps = 0.175 (Lyu et al. Alg. 4)"),
    _svt(5, True, "no query noise: no finite eps (Lyu et al. Alg. 5)"),
    _svt(6, True, "no cutoff: eps grows with the number of queries (Lyu et al. Alg. 6)"),
    Algorithm("numerical-svt", _p(bb.numerical_svt, epsilon=EPS, cutoff=2, threshold=1.0), 10, 10, EPS,
              "component-wise", False, "numerical SVT (Wang et al. 2019, c = 2): eps-DP",
              _p(svt_laws.numerical_svt_law, epsilon=EPS, cutoff=2, threshold=1.0)),
    Algorithm("rappor", _p(bb.rappor, **_RAPPOR), 1, 20, bb.rappor_epsilon(**_RAPPOR), "one-answer", False,
              "RAPPOR (h = 4, f = 0.75, p = 0.45, q = 0.55): eps_1 = 0.400",
              lambda a, b: laws.rappor_law(a[0], b[0], **_RAPPOR)),
    Algorithm("one-time-rappor", _p(bb.rappor, instantaneous=False, **_ONE_TIME), 1, 20,
              bb.rappor_epsilon(**_ONE_TIME), "one-answer", False, "one-time RAPPOR (h = 4, f = 0.95): 0.801",
              lambda a, b: laws.rappor_law(a[0], b[0], **_ONE_TIME)),
    Algorithm("prefix-sum", _p(bb.prefix_sum, epsilon=EPS), 10, 10, EPS, "component-wise", True,
              "eps-DP when one answer moves; n eps = 1.0 when all may (the suite's relation)", _shift_law(1 / EPS)),
    Algorithm("noisy-histogram", _p(bb.noisy_histogram, epsilon=EPS), 5, 5, EPS, "one-answer", False,
              "Lap(1/eps) on each bin: eps-DP", _shift_law(1 / EPS)),
    Algorithm("noisy-histogram-wrong-scale", _p(bb.noisy_histogram, epsilon=EPS, wrong_scale=True), 5, 5, EPS,
              "one-answer", True, "Lap(eps) instead of Lap(1/eps): 1/eps = 10", _shift_law(EPS)),
    Algorithm("truncated-geometric", _p(bb.truncated_geometric, epsilon=EPS), 1, 1, _GEOMETRIC_CLAIM,
              "one-answer", False, "GeoSample(0.1, 5): log(1 + 2^-3) = 0.118-DP (Balcer & Vadhan Thm 4.7)",
              lambda a, b: laws.geometric_law(int(a[0]), int(b[0]), epsilon=EPS, n=5)),
    Algorithm("laplace-parallel", _p(bb.laplace_parallel, epsilon=0.005, copies=20), 1, 20, 20 * 0.005,
              "one-answer", False, "20 Laplace mechanisms of eps 0.005: 0.1-DP, reached only when all 20 are in "
              "their tails", _shift_law(1 / 0.005, copies=20)),
    Algorithm("svt34-parallel", _p(bb.svt34_parallel, epsilon=EPS, cutoff=2, threshold=1.0), 10, 20, 2 * EPS,
              "component-wise", True, "SVT3 and SVT4 side by side (c = 2): claimed 0.2, SVT3 is not DP",
              _p(svt_laws.svt34_law, epsilon=EPS, cutoff=2, threshold=1.0)),
)


@dataclasses.dataclass(frozen=True)
class SuiteResult:
    """One algorithm's row of ``dpaudit zoo --suite black-box`` (its JSON keys)."""

    name: str
    violates: bool
    flagged: bool
    claimed_epsilon: float
    epsilon_lower_bound: float
    true_epsilon: float | None  # on the chosen pair, from its exact law
    ceiling: float | None  # the most a threshold test certifies with these trials on that pair
    ceiling_low: float | None  # where 95% of audits at the oracle threshold land: 2.5% quantile ...
    ceiling_high: float | None  # ... and 97.5% quantile (the ceiling's band, docs/theory.md 3.4)
    reach: float | None  # probability of the outcomes within 90% of the true epsilon (tails)
    law: str | None
    pair: str
    answers: list[float]
    answers_prime: list[float]
    relation: str
    score: Any
    trials: int
    trials_used: int
    screen_trials: int
    seconds: float
    description: str

    @property
    def status(self) -> str:
        """``caught``, ``missed``, ``beyond-reach`` (a violation whose ceiling is below its claim),
        ``passed`` or ``false-alarm``."""
        if not self.violates:
            return FALSE_ALARM if self.flagged else PASSED
        if self.flagged:
            return CAUGHT
        return BEYOND_REACH if self.ceiling is not None and self.ceiling <= self.claimed_epsilon else MISSED

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    @property
    def share_of_ceiling(self) -> float | None:
        return None if not self.ceiling else self.epsilon_lower_bound / self.ceiling

    @property
    def below_band(self) -> bool | None:
        """Whether the certified bound lies below the ceiling's band (fewer than 2.5% of ideal audits on all
        the trials land there): the cost of the audit's own test and of its calibration trials, not only
        an unlucky draw. None without a band, or when the audit stopped early at a certified violation
        (the band is that of all the trials)."""
        if self.ceiling_low is None or self.trials_used < self.trials:
            return None
        return self.epsilon_lower_bound < self.ceiling_low

    def to_dict(self) -> dict[str, Any]:
        def finite(value):
            return None if value is None or not math.isfinite(value) else value
        return {**dataclasses.asdict(self), "true_epsilon": finite(self.true_epsilon),
                "true_epsilon_infinite": self.true_epsilon is not None and math.isinf(self.true_epsilon),
                "status": self.status, "share_of_ceiling": self.share_of_ceiling, "below_band": self.below_band}


def _assert_private_audit(mechanism, pair, *, claim: float, trials: int, confidence: float, seed: int):
    """The audit :func:`dpaudit.assert_private` runs with its defaults (same looks, chunks and portfolio)."""
    chunk_size = min(10_000, max(1_000, trials // 64))
    return audit(mechanism, dataset_pair=pair, score=None, trials=trials, delta=0.0, confidence=confidence,
                 seed=seed, sequential=True, claimed_epsilon=claim, chunk_size=chunk_size)


def screen_algorithm(algorithm: Algorithm, *, trials: int, seed: int = 0, screen_trials: int | None = None,
                     **screen_options: Any) -> tuple[list[dict[str, Any]], VectorCandidate, np.random.SeedSequence]:
    """The suite's pair search for an audit of ``trials`` per side: the screen's table, the chosen pair and
    the seed its audit certifies from (one the screen never drew from); ``screen_options`` go to
    :func:`~dpaudit.auditing.checks.vector_pairs.screen_vector_pairs` (``finalists``, ``final_factor``, ``scores``)."""
    screen_trials = screen_trials or max(20_000, trials // 20)
    screening, certifying = np.random.SeedSequence([seed, 0xB1ACB0]).spawn(2)
    table, chosen = screen_vector_pairs(algorithm.mechanism(), queries=algorithm.queries,
                                        relation=algorithm.relation, screen_trials=screen_trials, seed=screening,
                                        **screen_options)
    return table, chosen, certifying


def run_algorithm(algorithm: Algorithm, *, trials: int, seed: int = 0, confidence: float = 0.95,
                  screen_trials: int | None = None, with_law: bool = True) -> SuiteResult:
    """Screen ``algorithm``'s patterns, audit the strongest pair at its claim, compare with its exact law."""
    start = time.perf_counter()
    _, chosen, certifying = screen_algorithm(algorithm, trials=trials, seed=seed, screen_trials=screen_trials)
    mechanism = algorithm.mechanism()
    result = _assert_private_audit(mechanism, chosen.datasets(), claim=algorithm.claim, trials=trials,
                                   confidence=confidence, seed=int(certifying.generate_state(1)[0]))
    bound = result.epsilon_lower_bound
    true_epsilon = ceiling = low = high = reach = method = None
    if with_law and algorithm.law is not None:
        law = algorithm.law(chosen.first, chosen.second)
        band = law.ceiling_band(trials, confidence=confidence)
        true_epsilon, ceiling, low, high, reach, method = law.true_epsilon, band.ceiling, band.low, band.high, \
            law.reach(), law.method
    return SuiteResult(algorithm.name, algorithm.violates, bound > algorithm.claim, algorithm.claim, bound,
                       true_epsilon, ceiling, low, high, reach, method, chosen.name, chosen.first.tolist(),
                       chosen.second.tolist(), algorithm.relation, result.attack["score"], trials,
                       int(result.sequential.get("trials_used", trials)), screen_trials,
                       time.perf_counter() - start, algorithm.why)


def run_blackbox_suite(*, trials: int = 1_000_000, seed: int = 0, confidence: float = 0.95,
                       screen_trials: int | None = None, only: Sequence[str] | None = None,
                       with_law: bool = True) -> list[SuiteResult]:
    """Run every algorithm of :data:`SUITE` (or those whose name contains one of ``only``).

    Parameters
    ----------
    trials : int
        Trials per side of each certifying audit (the default: the published finders' budget).
    screen_trials : int, optional
        Trials per side for each screened pattern (default ``max(20_000, trials // 20)``).
    only : sequence of str, optional
        Substrings of the names to run.
    with_law : bool
        Compute the true epsilon and the ceiling from the exact laws (a few seconds each).
    """
    chosen = [a for a in SUITE if not only or any(part in a.name for part in only)]
    if not chosen:
        raise ParameterError(f"only={list(only or [])!r} matches no algorithm of the suite (names: "
                             f"{', '.join(a.name for a in SUITE)})")
    return [run_algorithm(a, trials=trials, seed=seed, confidence=confidence, screen_trials=screen_trials,
                          with_law=with_law) for a in chosen]
