"""The DP-MF bug zoo: correlated-noise training with a wrong claim or wrong noise, beside its correct twin.

Each case is a ``dp-mf`` training (linear loss on the whole space, every
iterate released, one-dimensional model, zero background records) with a
gradient canary in the batch slot whose cyclic pattern is the worst, the
epsilon claimed for it, and the pair's true epsilon: in cyclic order the
release is Gaussian, ``mu = |W 1_pi| / sigma`` with ``pi`` the canary's steps
and ``W`` the strategy ``C`` (``C^{-1}`` when the noise is ``C z``; docs/theory.md
12.3). The claims the bugs make are re-created in NumPy from the library
code they come from (cited on each function). ``run_dpmf_zoo`` checks each
case with ``assert_private`` (default settings but the budget): a violating
case must be flagged, a correct one must pass.

========================================== ===========================================================
``jax-privacy-pr238-sep-sensitivity``      jax_privacy PR 238: ``examples/dpmf_strategy_optimization.py``
                                           ('banded-sqrt', 32 iterations, 8 participations) calls
                                           ``toeplitz.minsep_sensitivity_squared(coef, min_sep=sep,
                                           max_participations=8)`` without ``n``: ``n = len(coef) = sep``,
                                           one participation counted, the squared sensitivity 8 times too
                                           small; twin: the same training, ``n=32`` (exact)
``one-participation-claim``                the square root of the prefix sum (Fichtenberger et al., every
                                           band) trained for 4 epochs, accounted as one Gaussian at its
                                           single-participation sensitivity (the largest column norm of C):
                                           the cross terms of the 4 participations are dropped as well;
                                           twin: the 4-participation value
``toeplitz-closed-form-non-monotone``      C = Toeplitz (1, -0.75), 8 epochs of 2 batches, claimed for every
                                           order (``min_sep=1``, 8 participations) with the closed form of
                                           ``toeplitz.minsep_sensitivity_squared(..., skip_checks=True)``,
                                           valid for non-negative non-increasing coefficients only: it takes
                                           8 consecutive steps, whose columns cancel (2.0); the cyclic
                                           pattern's do not (12.5); twin: the exact cyclic value
``noise-correlated-by-C``                  the strategy C handed to the privatizer, which wants ``C^{-1}``
                                           (``noise_addition.matrix_factorization_privatizer``): noise
                                           ``C z``, precision ``(C C^T)^{-1}``; BandMF as
                                           ``toeplitz.optimize_banded_toeplitz(32, bands=4)`` gives it, 8
                                           epochs, claimed at the ``C^{-1} z`` value; twin: dp-mf itself
``reshuffled-epochs``                      the BandMF of ``optimize_banded_toeplitz(16, bands=4)`` on batches
                                           reshuffled every epoch, claimed at the cyclic value. The release is
                                           a mixture over the canary's slots whose mean shift is the average
                                           of the slots' (never more than the worst slot's), so it can exceed
                                           the cyclic claim only in its tail; here it does not (Monte Carlo
                                           3.77 against 4.38): ``within-claim``; twin: cyclic order
========================================== ===========================================================

References
----------
jax_privacy PRs 218 (review of the BandInvMF loss, fix f2dfd26) and 238 (merge 769467c), and
``jax_privacy/matrix_factorization/{toeplitz,sensitivity}.py`` and ``noise_addition`` at 2.0.0 (03294e2)
(github.com/google-deepmind/jax_privacy); Choquette-Choo, McMahan, Rush, Thakurta, "Multi-Epoch Matrix
Factorization Mechanisms for Private Machine Learning", ICML 2023; Choquette-Choo et al., "(Amplified)
Banded Matrix Factorization", NeurIPS 2023; Fichtenberger, Henzinger, Upadhyay, "Constant Matters",
ICML 2023; docs/theory.md 12.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.checks.zoo.dpmf_laws import (
    DELTA,
    cyclic_sensitivity_squared,
    epsilon_at,
    pattern_mu,
    reshuffled_epsilon,
    single_participation_sensitivity,
    toeplitz_matrix,
    toeplitz_minsep_sensitivity_squared,
)
from dpaudit.auditing.checks.zoo.dpsgd import TrainingCaseResult, audit_case, case_result
from dpaudit.auditing.checks.zoo.statuses import CAUGHT, FALSE_ALARM, MISSED, PASSED, WITHIN_CLAIM
from dpaudit.mechanisms.accounting.descriptions import Strategy
from dpaudit.mechanisms.accounting.strategies import banded_sqrt_coefficients, dense_strategy, lower_matrix
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.dpmf import DPMF

__all__ = ["DELTA", "DPMF_ZOO", "DpMfCase", "DpMfResult", "NoiseCorrelatedByC", "cyclic_sensitivity_squared",
           "reshuffled_epsilon", "run_dpmf_zoo", "single_participation_sensitivity",
           "toeplitz_minsep_sensitivity_squared"]



@dataclasses.dataclass(frozen=True)
class DpMfCase:
    """One entry: ``build() -> (mechanism, (S, S'))``, the epsilon claimed for it (``claim(mechanism)``), the
    report it comes from, and the pair's true epsilon where known."""

    name: str
    buggy: bool
    report: str
    description: str
    build: Callable[[], tuple[Any, tuple[Dataset, Dataset]]]
    claim: Callable[[Any], float]
    true_epsilon: float | None = None
    trials: int = 100_000


#: The dp-mf zoo's results: the training zoos share one result (``dpaudit zoo`` prints both alike).
DpMfResult = TrainingCaseResult


# -- the noise as C z ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=16)
def _inverse_strategy(strategy: Strategy) -> Strategy:
    """The dense strategy ``C^{-1}``: dp-mf's noise ``(C^{-1})^{-1} z = C z``."""
    return dense_strategy(np.linalg.inv(lower_matrix(strategy)), label="C as the noising matrix")


@dataclasses.dataclass(frozen=True)
class _NoisingMatrixC(DPMF):
    """dp-mf drawing its noise with the factor ``C`` (what :class:`NoiseCorrelatedByC` samples)."""

    @property
    def strategy_value(self) -> Strategy:
        return _inverse_strategy(DPMF.strategy_value.fget(self))


@dataclasses.dataclass(frozen=True)
class NoiseCorrelatedByC(DPMF):
    """Bug: the strategy ``C`` is handed to the privatizer as its noising matrix, which is ``C^{-1}``: the noise
    is ``C z``, not ``C^{-1} z``.

    jax_privacy's ``noise_addition.matrix_factorization_privatizer(noising_matrix, *, stddev, ...)``
    (``noise_addition.py`` at 2.0.0) adds ``(M Z)_t`` for the ``noising_matrix`` ``M`` it is given, which for a
    strategy ``C`` must be ``C^{-1}`` (``toeplitz.inverse_as_streaming_matrix(coef)``); its docstring calls ``M``
    "a matrix used to generate correlated noise" and gives the covariance as ``M^T M`` (it is ``M M^T``).
    Only the noise draw changes: the description, hence the claims and the canary, are dp-mf's (the
    training the code believes it runs). Its release is Gaussian with noise covariance ``C C^T``: ``mu =
    |C^{-1} 1_pi| / sigma``. The exact laws describe dp-mf, so the score ``exact`` does not apply
    (``exact_output_laws`` refuses a subclass that samples in its own way).
    """

    name = "zoo-dp-mf-noise-by-c"
    summary = "zoo bug: dp-mf whose noise is C z instead of C^-1 z"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        fields = {field.name: getattr(self, field.name) for field in dataclasses.fields(DPMF)}
        return DPMF._sample(_NoisingMatrixC(**fields), data, trials, rng, dtype)


# -- the cases -----------------------------------------------------------------------------------------------
#: ``toeplitz.optimize_banded_toeplitz(n, bands=4)`` on jax_privacy 2.0.0 (jax 0.10.2, x64, CPU), column norm 1
BANDMF_32 = (0.75017743, 0.45844207, 0.36685036, 0.30411429)  # n = 32
BANDMF_16 = (0.79487528, 0.43843304, 0.32927408, 0.25986215)  # n = 16
#: reshuffled_epsilon(toeplitz_matrix(BANDMF_16, 16), epochs=4, noise_multiplier=2.0) (2e6 draws, seed 0): the
#: reshuffled case's epsilon and its standard error (tests/audit/checks/test_zoo_dpmf.py re-estimates it)
RESHUFFLED_EPSILON = (3.774, 0.016)


@dataclasses.dataclass(frozen=True, slots=True)
class _Training:
    """A case's dp-mf training: its parameters, its strategy ``C`` (``matrix``) and its canary's batch slot."""

    params: dict[str, Any]
    matrix: np.ndarray
    slot: int

    @property
    def epochs(self) -> int:
        return int(self.params["epochs"])

    @property
    def sigma(self) -> float:
        return float(self.params["noise_multiplier"])

    def build(self, kind: type[DPMF] = DPMF, **changes: Any) -> Callable[[], tuple[DPMF, tuple[Dataset, Dataset]]]:
        """``build()`` of a case: the mechanism and the gradient canary pair at the last record of the slot
        (``L`` at every participation against a zero gradient; the background records are zero)."""
        def build() -> tuple[DPMF, tuple[Dataset, Dataset]]:
            mechanism = kind(**{**self.params, **changes})
            pair = CanarySpec(kind="gradient", pair="zero", background="zeros").build(
                mechanism, (self.slot + 1) * mechanism.batch_size)
            return mechanism, (pair.dataset_a, pair.dataset_b)
        return build


def _training(matrix: np.ndarray, **params: Any) -> _Training:
    """The training (every iterate released, linear loss on the whole space) with its canary in the worst slot."""
    _, slot = cyclic_sensitivity_squared(matrix, params["epochs"])
    return _Training({"loss": "linear", "domain": "whole", "output": "iterates", "dim": 1, **params}, matrix, slot)


def _cyclic_claim(training: _Training) -> Callable[[Any], float]:
    """The correct claim: the Gaussian at the brute-force cyclic sensitivity (``cyclic_sensitivity_squared``)."""
    squared, _ = cyclic_sensitivity_squared(training.matrix, training.epochs)
    return lambda mechanism: epsilon_at(math.sqrt(squared) / mechanism.noise_multiplier)


def _true(training: _Training, weights: np.ndarray | None = None) -> float:
    """The pair's exact epsilon (cyclic order): the Gaussian at ``|W 1_pi| / sigma`` (``W``: default ``C``)."""
    weights = training.matrix if weights is None else weights
    return epsilon_at(pattern_mu(weights, training.epochs, training.slot, training.sigma))


def _pr238_case() -> tuple[DpMfCase, DpMfCase]:
    iterations, participations = 32, 8
    sep = iterations // participations  # the example's sep = n // participations
    coef = banded_sqrt_coefficients(sep)  # toeplitz.optimal_max_error_strategy_coefs(sep)
    training = _training(toeplitz_matrix(coef, iterations), n=16, steps=iterations, epochs=participations,
                         strategy="banded-sqrt", bands=sep, noise_multiplier=2.3)
    understated = toeplitz_minsep_sensitivity_squared(coef, min_sep=sep, max_participations=participations)

    def claim(mechanism) -> float:
        """``GaussianDpEvent`` at the sensitivity PR 238 fixed: ``minsep_sensitivity_squared(coef, min_sep=sep,
        max_participations=8)`` without ``n`` (``examples/dpmf_strategy_optimization.py``, 'banded-sqrt',
        before 769467c)."""
        return epsilon_at(math.sqrt(understated) / mechanism.noise_multiplier)

    name, report = "jax-privacy-pr238-sep-sensitivity", "jax_privacy PR 238"
    true = _true(training)
    return (DpMfCase(name, True, report, "banded square root (4 bands), 32 steps, 8 cyclic epochs; squared "
                     "sensitivity 1.488 (one participation: n = len(coef)) instead of 11.906", training.build(),
                     claim, true),
            DpMfCase(name + ":correct", False, report, "the same training at minsep_sensitivity_squared(coef, n=32, "
                     "min_sep=4, max_participations=8) = 11.906", training.build(), _cyclic_claim(training), true))


def _one_participation_case() -> tuple[DpMfCase, DpMfCase]:
    steps, epochs = 16, 4
    training = _training(toeplitz_matrix(banded_sqrt_coefficients(steps), steps), n=16, steps=steps, epochs=epochs,
                         strategy="banded-sqrt", bands=steps, noise_multiplier=2.5)
    single = single_participation_sensitivity(training.matrix)

    def claim(mechanism) -> float:
        """One ``GaussianDpEvent`` at ``stddev / (clip single_participation_sensitivity(C))``, as
        jax_privacy's ``SingleReleaseTrainingAccountant`` composes it, for 4 epochs."""
        return epsilon_at(single / mechanism.noise_multiplier)

    name, report = "one-participation-claim", "multi-epoch MF (ICML 2023)"
    true = _true(training)
    return (DpMfCase(name, True, report, "square root of the prefix sum (16 bands), 16 steps, 4 cyclic epochs, "
                     "accounted at one participation (squared sensitivity 1.944 instead of 13.803)",
                     training.build(), claim, true),
            DpMfCase(name + ":correct", False, report, "the same training at its 4-participation sensitivity "
                     "(13.803, jax_privacy's fixed_epoch_sensitivity)", training.build(), _cyclic_claim(training),
                     true))


def _closed_form_case() -> tuple[DpMfCase, DpMfCase]:
    coef, steps, epochs = (1.0, -0.75), 16, 8
    training = _training(toeplitz_matrix(coef, steps), n=16, steps=steps, epochs=epochs, strategy="toeplitz",
                         coefficients=coef, noise_multiplier=2.4)
    closed = toeplitz_minsep_sensitivity_squared(coef, min_sep=1, max_participations=epochs, n=steps)

    def claim(mechanism) -> float:
        """``GaussianDpEvent`` at ``minsep_sensitivity_squared(coef, min_sep=1, max_participations=8, n=16,
        skip_checks=True)``: the closed form of non-negative non-increasing coefficients, here for (1, -0.75)."""
        return epsilon_at(math.sqrt(closed) / mechanism.noise_multiplier)

    name, report = "toeplitz-closed-form-non-monotone", "jax_privacy PR 218 review"
    true = _true(training)
    return (DpMfCase(name, True, report, "Toeplitz (1, -0.75), 16 steps, 8 cyclic epochs of 2 batches, claimed for "
                     "every order (min_sep=1) by the closed form: 2.0, the cyclic pattern's 12.5", training.build(),
                     claim, true),
            DpMfCase(name + ":correct", False, report, "the same training at its cyclic sensitivity, brute force over "
                     "slots and signs (12.5; C^T C is zero two steps apart: exact)", training.build(),
                     _cyclic_claim(training), true))


def _noise_by_c_case() -> tuple[DpMfCase, DpMfCase]:
    steps, epochs = 32, 8
    training = _training(toeplitz_matrix(BANDMF_32, steps), n=16, steps=steps, epochs=epochs, strategy="toeplitz",
                         coefficients=BANDMF_32, noise_multiplier=4.5)
    name, report = "noise-correlated-by-C", "jax_privacy noise_addition"
    return (DpMfCase(name, True, report, "BandMF (optimize_banded_toeplitz(32, bands=4)), 8 cyclic epochs, noise C z "
                     "(squared value 36.3) claimed at C^-1 z (8.0)", training.build(NoiseCorrelatedByC),
                     _cyclic_claim(training), _true(training, np.linalg.inv(training.matrix))),
            DpMfCase(name + ":correct", False, report, "dp-mf itself: noise C^-1 z", training.build(),
                     _cyclic_claim(training), _true(training)))


def _reshuffled_case() -> tuple[DpMfCase, DpMfCase]:
    steps, epochs = 16, 4
    training = _training(toeplitz_matrix(BANDMF_16, steps), n=16, steps=steps, epochs=epochs, strategy="toeplitz",
                         coefficients=BANDMF_16, noise_multiplier=2.0)
    name, report = "reshuffled-epochs", "BandMF min-separation"
    return (DpMfCase(name, True, report, "BandMF (optimize_banded_toeplitz(16, bands=4)), 4 epochs reshuffled, "
                     "claimed at the cyclic value; the slot mixture stays within it (Monte Carlo, +-0.016)",
                     training.build(selection="shuffled"), _cyclic_claim(training), RESHUFFLED_EPSILON[0]),
            DpMfCase(name + ":correct", False, report, "selection='cyclic'", training.build(),
                     _cyclic_claim(training), _true(training)))


def _cases() -> list[DpMfCase]:
    return [case for pair in (_pr238_case(), _one_participation_case(), _closed_form_case(), _noise_by_c_case(),
                              _reshuffled_case()) for case in pair]


DPMF_ZOO: list[DpMfCase] = _cases()


def run_dpmf_zoo(*, trials: int | None = None, seed: int = 0, only: list[str] | None = None,
                 confidence: float = 0.95, cases: list[DpMfCase] | None = None) -> list[DpMfResult]:
    """``assert_private`` of each case at its claim (``trials`` per dataset, default each case's own); ``only``
    keeps the cases whose name contains one of its strings, ``cases`` gives the list to run (default
    :data:`DPMF_ZOO`).

    A buggy case whose true epsilon exceeds its claim is ``caught`` when flagged (else ``missed``); a correct
    case, or a bug whose true epsilon stays within its claim, is ``passed`` or ``within-claim`` when not
    flagged (else ``false-alarm``).
    """
    results = []
    for case in DPMF_ZOO if cases is None else cases:
        if only and not any(part in case.name for part in only):
            continue
        start = time.perf_counter()
        budget = trials or case.trials
        claim, flagged, result = audit_case(case, budget=budget, seed=seed, confidence=confidence)
        exceeds = case.true_epsilon is None or case.true_epsilon > claim
        if case.buggy and exceeds:
            status = CAUGHT if flagged else MISSED
        else:
            status = FALSE_ALARM if flagged else (WITHIN_CLAIM if case.buggy else PASSED)
        results.append(case_result(case, status, claim, result, budget, start))
    return results
