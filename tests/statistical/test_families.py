"""Seeded audits of every built-in family with a known exact value, with every score and with the
default portfolio (``"auto"``), never overstate it.

For each family and score, 20 audits with independent seeds; the certified
epsilon may exceed the exact epsilon of the audited instance in at most a
``beta = 1 - confidence`` fraction of them. With 20 audits, more than 4
excesses has probability below 0.016 under a sound estimator
(``P[Bin(20, 0.05) >= 5] = 0.0026``; ``>= 4``: 0.016), so a cell may have at
most 4; pooled over all cells the excess rate must stay within 3 binomial
standard deviations of ``beta``. The float-bits score reads the released
floats' bits: it would certify far above the truth if a mechanism leaked
through its low bits (see ``test_float_bits_catches_a_naive_float_laplace``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms.accounting.instances import exact_epsilon
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon, laplace_epsilon
from dpaudit.mechanisms.accounting.shuffle_exact import shuffled_rr_epsilon

pytestmark = pytest.mark.statistical

DELTA = 0.1
SEEDS = 20
TRIALS = 2_000
BETA = 0.05


def _family(name: str):
    """``(canary pair, exact epsilon at DELTA, scores)`` of one instance."""
    # "auto" is the default: the portfolio of every applicable score, one chosen on calibration trials
    every = ["projection", "gaussian", "logistic", "mlp", "float-bits", "auto"]
    if name == "gaussian":
        pair = CanarySpec(kind="input").build(dpaudit.make("gaussian", sigma=2.0), None)
        return pair, float(gaussian_epsilon(DELTA, 1.0)), every + ["exact"]
    if name == "laplace":
        pair = CanarySpec(kind="input").build(dpaudit.make("laplace", scale=2.0), None)
        return pair, float(laplace_epsilon(DELTA, 1.0)), every + ["exact"]
    if name == "kernel-whole":
        mech = dpaudit.make("projected-kernel", n=4, dim=1, sigma=1.0, domain="whole")
        pair = CanarySpec(kind="reset").build(mech, 2)
    elif name == "kernel-box":
        mech = dpaudit.make("projected-kernel", n=4, dim=1, sigma=1.0, domain="box", low=-1.0, high=1.0)
        pair = CanarySpec(kind="gradient").build(mech, 3)
    elif name == "pnsgd-1d":
        mech = dpaudit.make("pnsgd", n=4, dim=1, eta=0.5, sigma=1.0, domain="box", low=0.0, high=1.0)
        pair = CanarySpec(kind="gradient").build(mech, 4)
    else:
        mech = dpaudit.make("shuffled-rr", n=20, epsilon0=2.0)
        pair = CanarySpec(kind="input").build(mech, None)
        return pair, shuffled_rr_epsilon(DELTA, n=20, epsilon0=2.0, ones=0), every
    truth = exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, DELTA)
    return pair, truth, every + ["exact"]


FAMILIES = ["gaussian", "laplace", "kernel-whole", "kernel-box", "pnsgd-1d", "shuffled-rr"]


@pytest.fixture(scope="module")
def excesses() -> dict[tuple[str, str], int]:
    counts = {}
    for family in FAMILIES:
        pair, truth, scores = _family(family)
        for score in scores:
            bounds = np.array([dpaudit.audit(pair=pair, score=score, trials=TRIALS, delta=DELTA, seed=500 + seed)
                               .epsilon_lower_bound for seed in range(SEEDS)])
            counts[(family, score)] = int(np.sum(bounds > truth))
    return counts


def test_no_family_and_score_overstates_the_exact_value(excesses):
    bad = {cell: count for cell, count in excesses.items() if count > 4}
    assert bad == {}
    audits = SEEDS * len(excesses)
    rate = sum(excesses.values()) / audits
    assert rate <= BETA + 3 * math.sqrt(BETA * (1 - BETA) / audits), (rate, excesses)


def test_float_bits_catches_a_naive_float_laplace():
    """A Laplace mechanism in plain float arithmetic leaks through its low bits; the built-in one does not."""
    scale = 2.0

    def naive_laplace(records, rng):
        return [np.clip(records[:, 0], -1.0, 1.0).sum() + rng.laplace(0.0, scale)]

    claim = 2.0 / scale  # replace-one: the sums differ by 2
    naive = dpaudit.from_callable(naive_laplace, output_dim=1)
    caught = dpaudit.audit(naive, dataset_pair=(np.array([[1.0]]), np.array([[-1.0]])), score="float-bits",
                           trials=100_000, delta=1e-5, seed=0)
    assert caught.epsilon_lower_bound > 3 * claim  # 7.8 measured: far above the true 1.0
    with pytest.raises(dpaudit.PrivacyViolation):
        dpaudit.assert_private(naive, epsilon=claim, delta=1e-5, score="float-bits", trials=100_000,
                               dataset_pair=(np.array([[1.0]]), np.array([[-1.0]])))
    builtin = dpaudit.make("laplace", scale=scale)
    for score in ("float-bits", "exact"):
        result = dpaudit.audit(builtin, score=score, trials=100_000, delta=1e-5, seed=0)
        assert result.verdict == "consistent" and result.epsilon_lower_bound <= claim
