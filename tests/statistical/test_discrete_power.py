"""Few-valued and mixed outputs (docs/theory.md 7): soundness of the ``discrete`` score with tests that
split an atom and placement at the planned budget, and the power of the default audit.

The algorithms and their exact epsilons are in ``tests/discrete_algorithms.py``.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.discrete import CALIBRATION_SHARE, fit_discrete
from dpaudit.attacks.score_protocol import fitted_tail_model
from dpaudit.attacks.value_counts import record_groups
from dpaudit.auditing.checks.regression import PrivacyViolation
from dpaudit.auditing.jobs.streaming import StreamingCertifier
from dpaudit.mechanisms.dataset import as_dataset
from tests import discrete_algorithms as algorithms

pytestmark = pytest.mark.statistical

NULL_SEEDS = 200
# 200 audits of a correct algorithm at confidence 0.95: under a sound estimator the number that certify
# above the exact epsilon is at most Binomial(200, 0.05) (mean 10, sd 3.08); 19 = mean + 3 sd
# (P[Bin(200, 0.05) >= 20] = 0.003)
NULL_ALLOWED = 19
# The mixed output's audits fit a classifier each and cost about ten times more: 100 of them, for which the
# same reasoning gives Binomial(100, 0.05) (mean 5, sd 2.18) and 11 = mean + 3 sd (P[Bin(100, 0.05) >= 12] = 0.004)
MIXED_SEEDS, MIXED_ALLOWED = 100, 11
# Three such coordinates read together, each audit certified twice (the fitted score and the exact log-ratio):
# 60 of them, Binomial(60, 0.05) (mean 3, sd 1.69) and 8 = mean + 3 sd (P[Bin(60, 0.05) >= 9] = 0.003)
GROUPED_SEEDS, GROUPED_ALLOWED = 60, 8


def _null_audit(algorithm, seed: int, *, calibration: int, certification: int, chunks: int,
                models: list | None = None, oracle: list | None = None) -> float:
    """One audit as the runner makes it: the score fitted on calibration outputs (its coordinates grouped as
    ``attacks.value_counts.record_groups`` groups them for the pair), the test (with its tie fraction) placed
    for the planned budget on their scores as the score declares (hedged), certification counted chunk by
    chunk. The score's ``model`` is appended to ``models`` where given, and to ``oracle`` the bound the same
    audit certifies on the same trials with the exact log-ratio as its score (``algorithm.log_ratio``)."""
    rng = np.random.default_rng(seed)
    a, b = (algorithm.sample(side, calibration + certification, int(rng.integers(2**32))) for side in (0, 1))
    pair = types.SimpleNamespace(dataset_a=as_dataset(algorithm.pair[0]), dataset_b=as_dataset(algorithm.pair[1]))
    groups = record_groups(pair, a.shape[1])  # the datasets are all it reads of a pair
    score = fit_discrete(a[:calibration], b[:calibration], seed=seed, groups=groups)
    if models is not None:
        models.append(getattr(score, "model", None))
    if oracle is not None:
        oracle.append(_certified(algorithm.log_ratio, "hedged", a, b, calibration, seed, chunks))
    return _certified(score, fitted_tail_model(score), a, b, calibration, seed, chunks)  # hedged: theory 7


def _certified(score, tail_model: str, a: np.ndarray, b: np.ndarray, calibration: int, seed: int,
               chunks: int) -> float:
    """The bound of ``score``'s test placed on the first ``calibration`` outputs of each side for the rest,
    then certified on the rest chunk by chunk."""
    certification = (a.shape[0] - calibration, b.shape[0] - calibration)
    certifier = StreamingCertifier(score(a[:calibration]), score(b[:calibration]), delta=0.0, confidence=0.95,
                                   planned=certification, seed=seed, tail_model=tail_model)
    for side, outputs in (("a", a[calibration:]), ("b", b[calibration:])):
        for chunk in np.array_split(outputs, chunks):
            certifier.add(side, score(chunk))
    return certifier.finish().epsilon.epsilon_lower_bound


@pytest.mark.parametrize(("make", "calibration", "seeds", "allowed", "grouped"),
                         [(lambda: algorithms.randomized_response(0.5, k=4), 2_000, NULL_SEEDS, NULL_ALLOWED, False),
                          (lambda: algorithms.noisy_max_index(1.0), 2_000, NULL_SEEDS, NULL_ALLOWED, False),
                          (lambda: algorithms.sentinel_or_value(0.5), 4_000, MIXED_SEEDS, MIXED_ALLOWED, False),
                          (lambda: algorithms.sentinel_or_value(1.5, coordinates=3, values="exponential"), 4_000,
                           GROUPED_SEEDS, GROUPED_ALLOWED, True)],
                         ids=["rr", "noisy-max", "sentinel-or-value", "grouped-sentinels-and-values"])
def test_null_discrete_outputs_certify_above_the_exact_epsilon_rarely(make, calibration, seeds, allowed,
                                                                     grouped):
    # the outcome table (rr, noisy max), the classifier on a sentinel flag and a value (mixed), and the
    # regression on three coordinates' sentinels counted and values summed (grouped: the pair moves all alike)
    algorithm = make()
    # the split the runner makes for this score (its calibration share, audit.jobs.runner)
    certification = round(calibration * (1 - CALIBRATION_SHARE) / CALIBRATION_SHARE)
    models: list = []
    oracle: list | None = None if algorithm.log_ratio is None else []
    bounds = np.array([_null_audit(algorithm, seed, calibration=calibration, certification=certification,
                                   chunks=3, models=models, oracle=oracle) for seed in range(seeds)])
    excess = int(np.sum(bounds > algorithm.exact))
    assert excess <= allowed, (excess, algorithm.exact, np.quantile(bounds, [0.5, 0.95]))
    # and the audits are not vacuous: the median certifies most of the exact epsilon, or, where that is
    # reached only in a joint tail of three coordinates that no such budget sees, most of what the same
    # audit certifies with the exact log-ratio as its score (measured on these 60 seeds: medians 0.873 fitted
    # and 0.859 with the exact log-ratio, of an exact epsilon of 1.458; the seeds are fixed, so the test is
    # deterministic, and 0.8 leaves room below the measured ratio 1.02)
    if oracle is None:
        assert np.median(bounds) > 0.6 * algorithm.exact
    else:
        assert np.median(bounds) > 0.8 * np.median(oracle), (np.median(bounds), np.median(oracle))
    if grouped:  # the case that tests the counted regression: most fits take it
        assert models.count("value counts") > seeds // 2, models


# Power of the default audit (portfolio "auto") at a budget CI affords; epsilon 0.5 so that 5 x 10^4
# trials per side resolve it. Observed over seeds 0-2: noisy max 0.85-0.87 of the exact epsilon, SVT1
# 0.70-0.97, the sentinel 0.88-0.92 (seed 0 is the one tested; the floors leave room below it).
@pytest.mark.parametrize(("make", "floor"), [(lambda: algorithms.noisy_max_index(0.5), 0.75),
                                             (lambda: algorithms.svt_booleans(0.5), 0.6),
                                             (lambda: algorithms.sentinel_or_value(0.5), 0.75)],
                         ids=["noisy-max-index", "svt1-booleans", "sentinel-or-value"])
def test_default_audit_certifies_a_fraction_of_the_exact_epsilon(make, floor):
    algorithm = make()
    result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=50_000, delta=0.0, seed=0)
    assert result.epsilon_lower_bound >= floor * algorithm.exact, (result.epsilon_lower_bound, algorithm.exact)


def test_default_audit_flags_sparse_vector_without_its_cutoff():
    # every query answered (no cutoff): exact epsilon 1.06 on the half-up half-down pair, claimed 0.5
    algorithm = algorithms.svt_booleans(0.5, cutoff=False, queries=10)
    assert algorithm.exact > 1.0
    with pytest.raises(PrivacyViolation):
        dpaudit.assert_private(algorithm.mechanism, epsilon=0.5, delta=0.0, dataset_pair=algorithm.pair,
                               trials=100_000)


def test_correct_sparse_vector_passes_at_its_claim():
    algorithm = algorithms.svt_booleans(0.5)
    summary = dpaudit.assert_private(algorithm.mechanism, epsilon=0.5, delta=0.0, dataset_pair=algorithm.pair,
                                     trials=50_000)
    assert summary["epsilon_lower_bound"] <= 0.5
