"""The DP-SGD bug zoo: training code as it shipped, from the reports of its users, beside its correct twin.

Each case is the code as its users run it (Opacus 1.x itself where it still
behaves so; a faithful NumPy re-creation citing the file otherwise), a
neighbouring pair, the epsilon the library's own accountant claims for it,
and the true epsilon where it is computable. ``run_dpsgd_zoo`` checks each
with ``assert_private`` (default settings but the budget): a violating case
must be flagged, a correct one must pass.

==================================== =============================================================
``opacus-cardinality``               opacus issues 571 and 819: ``make_private`` divides the noisy
                                     sum by ``int(len(dataset) / len(loader))``; 12 records against
                                     11 (batch 4) rescale the noise of all 200 parameters by 4/3;
                                     twin: 11 against 10 (the divisor is 3 for both)
``opacus-fixed-batches``             opacus issue 80 and PR 128: ``poisson_sampling=False`` keeps
                                     the loader's fixed-size batches in order and accounts them as
                                     Poisson; the canary shifts a background record into the next
                                     batch; twin: ``poisson_sampling=True``
``opacus-weighted-sampler``          opacus issue 813: a ``WeightedRandomSampler`` that balances a
                                     class of one record draws it about 8 times a batch, accounted
                                     as Poisson at ``1 / len(loader)``; twin: ``poisson_sampling=True``
                                     (Opacus then replaces the sampler with Poisson sampling)
``jax-privacy-keras-fixed-batches``  jax_privacy issue 84: its Keras API trained on shuffled
                                     fixed-size batches (``keras_api.py``, 7cb6597) and accounted a
                                     Poisson-sampled Gaussian; twin: ``poisson_sampling_in_fit``
``jax-privacy-poisson-sampler``      jax_privacy issue 121 reported ``CyclicPoissonSampling``'s batch
                                     (a binomial size, then that many records without replacement,
                                     ``batch_selection.py``, 1182cd6) as not Poisson; it is Poisson in
                                     law (Lemma 1 of arXiv:2406.17298): a correct case that must pass
==================================== =============================================================

References
----------
opacus issues 80, 571, 813, 819 and PR 128 (github.com/pytorch/opacus); jax_privacy issues 84 and 121
(github.com/google-deepmind/jax_privacy); Chua et al., "How Private are DP-SGD Implementations?",
ICML 2024; docs/theory.md 11.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import optimize, stats

from dpaudit.auditing.checks.regression import PrivacyViolation, assert_private
from dpaudit.auditing.checks.zoo.statuses import CAUGHT, FAILURES, FALSE_ALARM, MISSED, PASSED, SKIPPED
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.accounting.tight import pld_claim
from dpaudit.mechanisms.base import RELEASE_GRID, snap
from dpaudit.mechanisms.wrapped import from_batched_callable

__all__ = ["DELTA", "DPSGD_ZOO", "DpSgdCase", "DpSgdResult", "TrainingCaseResult", "audit_case", "case_result",
           "cyclic_poisson_inclusion", "mean_output", "run_dpsgd_zoo", "scaled_gaussians_epsilon", "zero_linear"]

DELTA = 1e-5
GRID = RELEASE_GRID["float64"]


@dataclasses.dataclass(frozen=True)
class DpSgdCase:
    """One entry: ``build() -> (mechanism, (S, S'))``, the epsilon the library's accountant claims
    (``claim(mechanism)``), the report it comes from, and the true epsilon of the pair where known."""

    name: str
    buggy: bool
    report: str
    description: str
    build: Callable[[], tuple[Any, tuple[np.ndarray, np.ndarray]]]
    claim: Callable[[Any], float]
    true_epsilon: float | None = None
    trials: int = 10_000
    needs: str | None = None  # an optional library the case runs (skipped where it is not installed)


@dataclasses.dataclass(frozen=True, slots=True)
class TrainingCaseResult:
    """One case's audit (the JSON keys of ``dpaudit zoo --suite dp-sgd`` and ``--suite dp-mf``)."""

    name: str
    buggy: bool
    report: str
    status: str  # caught, missed, within-claim (dp-mf), passed, false-alarm, skipped (zoo.statuses)
    claimed_epsilon: float
    epsilon_lower_bound: float
    true_epsilon: float | None
    trials: int
    trials_used: int
    score: str | None
    seconds: float
    description: str

    @property
    def failed(self) -> bool:
        return self.status in FAILURES

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: The dp-sgd zoo's name for its results.
DpSgdResult = TrainingCaseResult


# -- exact values ---------------------------------------------------------------------------------------
def scaled_gaussians_epsilon(dim: int, ratio: float, delta: float) -> float:
    """The exact epsilon at ``delta`` between ``N(0, I_d)`` and ``N(0, ratio^2 I_d)``, both directions.

    The privacy loss is a function of ``u = |x|^2``: ``L(u) = -d log r + u (1 - r^-2) / 2`` from the narrow
    law to the wide one, so ``delta(eps)`` is a difference of chi-square tails at the threshold where ``L``
    crosses ``eps`` (docs/theory.md 11); epsilon by root finding, rounded up to ``1e-9``.
    """
    if ratio == 1.0:
        return 0.0
    r2, k = ratio**2, 1.0 - 1.0 / ratio**2
    log_r = math.log(ratio)

    def delta_of(eps: float) -> float:
        wide = stats.chi2.sf(2 * (eps + dim * log_r) / k / r2, dim) - math.exp(eps) * \
            stats.chi2.sf(2 * (eps + dim * log_r) / k, dim)
        cut = 2 * (dim * log_r - eps) / k
        narrow = 0.0 if cut <= 0 else stats.chi2.cdf(cut, dim) - math.exp(eps) * stats.chi2.cdf(cut / r2, dim)
        return max(wide, narrow, 0.0)

    if delta_of(0.0) <= delta:
        return 0.0
    high = 1.0
    while delta_of(high) > delta:
        high *= 2
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, high, xtol=1e-12)) + 1e-9


# -- Opacus as shipped -----------------------------------------------------------------------------------
def mean_output(outputs, targets):
    """The loss of the cases: the mean output of a linear model, so each record's gradient is its input."""
    return outputs.mean()


def zero_linear(outputs: int):
    """A zero-initialised ``Linear(1, outputs, bias=False)``: its initial weights are public."""
    # torch loads with the Opacus cases only (the NumPy re-creations need none)
    import torch

    layer = torch.nn.Linear(1, outputs, bias=False)
    torch.nn.init.zeros_(layer.weight)
    return layer


def _opacus(**options):
    # an optional library (dpaudit[models]), loaded for its own cases
    from dpaudit.mechanisms.adapters.opacus import from_opacus

    return from_opacus(**options)


def _reported(mechanism) -> float:
    """What the engine reports at :data:`DELTA` (the largest over the records and their neighbours)."""
    return mechanism.reported_epsilon(DELTA)


def _cardinality(records: int):
    def build():
        training = _opacus(model=zero_linear(200), records=np.zeros((records, 1)), batch_size=4,
                           noise_multiplier=1.0, criterion=mean_output)
        return training, training.neighbours()
    return build


def _fixed_batches(poisson: bool):
    def build():
        records = np.vstack([[[1.0]], -np.ones((10, 1))])  # the canary first, ten records of gradient -1
        training = _opacus(model=zero_linear(1), records=records, batch_size=4, noise_multiplier=1.5,
                           poisson_sampling=poisson, shuffle=False, criterion=mean_output, output="iterates")
        return training, (records, records[1:])
    return build


def balancing_sampler(dataset):
    """Class-balancing weights (the canary alone in its class) drawing 64 records with replacement, as the
    report of opacus issue 813 builds its ``WeightedRandomSampler``."""
    # torch loads with the Opacus cases only
    import torch

    labels = dataset.tensors[0][:, 0] > 0.5
    ones = max(int(labels.sum()), 1)
    weights = torch.where(labels, 1.0 / ones, 1.0 / max(len(labels) - ones, 1)).double()
    return torch.utils.data.WeightedRandomSampler(weights, num_samples=64, replacement=True)


def _weighted(poisson: bool):
    def build():
        records = np.vstack([[[1.0]], np.zeros((1000, 1))])  # the canary (gradient 1) and 1,000 of gradient 0
        training = _opacus(model=zero_linear(1), records=records, batch_size=16, target_epsilon=1.0, target_delta=DELTA,
                           poisson_sampling=poisson, sampler=balancing_sampler, criterion=mean_output)
        return training, (records, records[1:])
    return build


# -- jax_privacy, re-created in NumPy ----------------------------------------------------------------------
JAX_STEPS, JAX_SIGMA = 100, 1.0  # one epoch of 100 batches of one record, noise multiplier 1


def _jax_claim(mechanism) -> float:
    """``PoissonSampledDpEvent(b / n, GaussianDpEvent(sigma))`` composed over the steps, as jax_privacy's
    ``accounting.dpsgd_event`` builds it, with dp-accounting's PLD accountant."""
    return pld_claim("jax-privacy-pld", sampling_rate=1 / JAX_STEPS, noise_multiplier=JAX_SIGMA,
                     steps=JAX_STEPS).epsilon(DELTA)


def _keras_fixed_batches(poisson: bool):
    """jax_privacy's Keras step (``keras_api.py`` at 7cb6597: the sum of clipped gradients plus ``sigma``
    noise, over the batch size) on batches of one record: a fresh permutation per epoch (fixed batches), or
    each record independently at rate ``b / n`` (``poisson_sampling_in_fit=True``); every step's update is
    released (the model after each step, differenced: the same information).
    Records are gradients (clipped to 1); zero-out neighbours: the canary ``+1`` against a null record ``0``,
    the others ``-1``."""
    def train(records, rng, trials):
        gradients = np.clip(records[:, 0], -1.0, 1.0)
        n = gradients.size
        if poisson:
            sums = (rng.random((trials, JAX_STEPS, n)) < 1 / JAX_STEPS).astype(float) @ gradients
        else:  # the record each step draws: one permutation of the n = JAX_STEPS records per trial
            order = np.argsort(rng.random((trials, n)), axis=1)[:, :JAX_STEPS]
            sums = gradients[order]
        steps = sums + JAX_SIGMA * rng.standard_normal((trials, JAX_STEPS))
        return snap(-steps, GRID)  # every step's update: the models after each step, differenced

    def build():
        records = -np.ones((JAX_STEPS, 1))
        canary, null = records.copy(), records.copy()
        canary[0, 0], null[0, 0] = 1.0, 0.0
        name = "jax-privacy keras fit, " + ("Poisson batches" if poisson else "shuffled fixed batches")
        return from_batched_callable(train, JAX_STEPS, name=name), (canary, null)
    return build


def cyclic_poisson_inclusion(rng: np.random.Generator, n: int, rate: float, shape: tuple[int, ...]) -> np.ndarray:
    """Whether a given record (the canary) is in each batch ``CyclicPoissonSampling`` draws from ``n`` records:
    ``size = rng.binomial(n, rate)``, then ``size`` records chosen uniformly without replacement, so the record
    is in with probability ``size / n`` given the size (``batch_selection.py`` at 1182cd6, cycle length 1)."""
    size = rng.binomial(n, rate, size=shape)
    return rng.random(shape) < size / n


def _cyclic_poisson():
    """jax_privacy's ``CyclicPoissonSampling.batch_iterator`` (``batch_selection.py`` at 1182cd6, cycle length
    1, no truncation): ``rng.binomial(len(group), p)`` records, then that many drawn by ``rng.choice`` without
    replacement; a given record is in the batch with probability ``size / n``. The DP-SGD step of the other
    cases, records of gradient 0 but the canary's 1; add/remove neighbours."""
    def train(records, rng, trials):
        gradients = np.clip(records[:, 0], -1.0, 1.0)
        sums = cyclic_poisson_inclusion(rng, gradients.size, 1 / JAX_STEPS, (trials, JAX_STEPS)) * gradients[0]
        steps = sums + JAX_SIGMA * rng.standard_normal((trials, JAX_STEPS))
        return snap(-steps, GRID)  # every step's update: the models after each step, differenced

    def build():
        records = np.zeros((JAX_STEPS, 1))
        records[0, 0] = 1.0
        return from_batched_callable(train, JAX_STEPS, name="jax-privacy CyclicPoissonSampling"), \
            (records, records[1:])
    return build


def _cases() -> list[DpSgdCase]:
    ratio = 4 / 3  # expected_batch_size 4 at 12 records, 3 at 11: the noise's std grows by 4/3
    shift = math.sqrt(5) / 1.5  # step sums (-2, -4, -3) against (-4, -4, -2), noise 1.5 per step
    cardinality = ("opacus-cardinality", "opacus issues 571, 819",
                   "make_private divides by int(len(dataset) / len(loader)): 12 records against 11, 200 parameters")
    fixed = ("opacus-fixed-batches", "opacus issue 80, PR 128",
             "poisson_sampling=False: fixed-size batches in order, accounted as Poisson (every step released)")
    weighted = ("opacus-weighted-sampler", "opacus issue 813",
                "a class-balancing WeightedRandomSampler under make_private_with_epsilon (poisson_sampling=False)")
    keras = ("jax-privacy-keras-fixed-batches", "jax_privacy issue 84",
             "Keras fit on shuffled fixed-size batches, accounted as a Poisson-sampled Gaussian (zero-out)")
    return [
        DpSgdCase(*cardinality[:1], True, *cardinality[1:], _cardinality(12), _reported,
                  scaled_gaussians_epsilon(200, ratio, DELTA), trials=2_000, needs="opacus"),
        DpSgdCase(cardinality[0] + ":correct", False, cardinality[1], "correct size: 11 records against 10 (the "
                  "divisor is 3 for both)", _cardinality(11), _reported, 0.0, trials=2_000, needs="opacus"),
        DpSgdCase(*fixed[:1], True, *fixed[1:], _fixed_batches(False), _reported,
                  float(gaussian_epsilon(DELTA, shift)), trials=10_000, needs="opacus"),
        DpSgdCase(fixed[0] + ":correct", False, fixed[1], "poisson_sampling=True (the batches the accountant "
                  "assumes)", _fixed_batches(True), _reported, None, trials=10_000, needs="opacus"),
        DpSgdCase(*weighted[:1], True, *weighted[1:], _weighted(False), _reported, None, trials=2_000,
                  needs="opacus"),
        DpSgdCase(weighted[0] + ":correct", False, weighted[1], "poisson_sampling=True (Opacus samples each "
                  "record at 1 / len(loader), as accounted)", _weighted(True), _reported, None, trials=2_000,
                  needs="opacus"),
        DpSgdCase(*keras[:1], True, *keras[1:], _keras_fixed_batches(False), _jax_claim, None, trials=100_000),
        DpSgdCase(keras[0] + ":correct", False, keras[1], "poisson_sampling_in_fit=True", _keras_fixed_batches(True),
                  _jax_claim, None, trials=100_000),
        DpSgdCase("jax-privacy-poisson-sampler", False, "jax_privacy issue 121",
                  "a binomial batch size, then that many records without replacement: Poisson in law",
                  _cyclic_poisson(), _jax_claim, None, trials=100_000),
    ]


DPSGD_ZOO: list[DpSgdCase] = _cases()


def run_dpsgd_zoo(*, trials: int | None = None, seed: int = 0, only: list[str] | None = None,
                  confidence: float = 0.95, cases: list[DpSgdCase] | None = None) -> list[DpSgdResult]:
    """``assert_private`` of each case at its claim (``trials`` per dataset, default each case's own); ``only``
    keeps the cases whose name contains one of its strings, ``cases`` gives the list to run (default
    :data:`DPSGD_ZOO`).

    A case whose optional library is not installed is ``skipped``; a buggy case flagged is ``caught`` (else
    ``missed``), a correct case passing is ``passed`` (else ``false-alarm``).
    """
    results = []
    for case in DPSGD_ZOO if cases is None else cases:
        if only and not any(part in case.name for part in only):
            continue
        start = time.perf_counter()
        budget = trials or case.trials
        if case.needs is not None and importlib.util.find_spec(case.needs) is None:
            results.append(DpSgdResult(case.name, case.buggy, case.report, SKIPPED, math.nan, math.nan,
                                       case.true_epsilon, budget, 0, None, 0.0, case.description))
            continue
        claim, flagged, result = audit_case(case, budget=budget, seed=seed, confidence=confidence)
        status = (CAUGHT if flagged else MISSED) if case.buggy else (FALSE_ALARM if flagged else PASSED)
        results.append(case_result(case, status, claim, result, budget, start))
    return results


def audit_case(case: Any, *, budget: int, seed: int, confidence: float) -> tuple[float, bool, Any]:
    """``assert_private`` of a training zoo's case at its claim: ``(claim, flagged, result)``."""
    mechanism, pair = case.build()
    claim = float(case.claim(mechanism))
    try:
        summary = assert_private(mechanism, epsilon=claim, delta=DELTA, dataset_pair=pair, trials=budget,
                                 seed=seed, confidence=confidence)
        return claim, False, summary["result"]
    except PrivacyViolation as violation:
        return claim, True, violation.result


def case_result(case: Any, status: str, claim: float, result: Any, budget: int,
                start: float) -> TrainingCaseResult:
    """One row of a training zoo: the case, its status, and what its audit certified with which score."""
    score = result.attack.get("score")
    return TrainingCaseResult(case.name, case.buggy, case.report, status, claim, result.epsilon_lower_bound,
                              case.true_epsilon, budget, int((result.sequential or {}).get("trials_used", budget)),
                              score if isinstance(score, str) else None, time.perf_counter() - start,
                              case.description)
