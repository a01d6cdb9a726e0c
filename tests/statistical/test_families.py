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
# every DP-SGD iterate released: the scores that read the steps, the projection and the bit patterns
# (the fitted logistic and mlp scores are covered by the other families; scale reads the steps' spreads)
WHITE_BOX = ["projection", "float-bits", "exact", "step-max", "step-mixture", "scale"]


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
    elif name == "dpsgd-iterates-poisson":
        # every iterate of Poisson DP-SGD (q = 0.2, noise 1 on the sum): the PLD accountant is the exact
        # epsilon of this release (up to its pessimistic discretisation, docs/theory.md 6)
        mech = dpaudit.make("dp-sgd", n=5, dim=1, batch_size=1, steps=4, noise_std=1.0, sampling="poisson",
                            output="iterates")
        pair = CanarySpec(pair="zero").build(mech, 5)
        truth = next(c for c in mech.claims() if c.name == "sgm-pld").epsilon(DELTA)
        return pair, truth, WHITE_BOX
    elif name in ("dpsgd-shuffle", "dpsgd-shuffle-once"):
        # two batches of two records (worst-case background, zero-out): one epoch, or two epochs of one
        # permutation; the exact epsilon by integrating the two-dimensional mixtures (_shuffled_epsilon)
        once = name == "dpsgd-shuffle-once"
        mech = dpaudit.make("dp-sgd", n=4, dim=1, batch_size=2, steps=4 if once else 2, noise_std=0.5,
                            sampling="shuffle-once" if once else "shuffle", output="iterates")
        pair = CanarySpec().build(mech, 4)
        return pair, _shuffled_epsilon(DELTA, 1 / math.sqrt(2) if once else 1.0), \
            ["projection", "exact", "step-max"] if once else WHITE_BOX
    else:
        mech = dpaudit.make("shuffled-rr", n=20, epsilon0=2.0)
        pair = CanarySpec(kind="input").build(mech, None)
        return pair, shuffled_rr_epsilon(DELTA, n=20, epsilon0=2.0, ones=0), every + ["scale"]
    truth = exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, DELTA)
    return pair, truth, every + ["exact"]


def _shuffled_epsilon(delta: float, sigma: float) -> float:
    """Exact epsilon of ``P = (N(2 e_1) + N(2 e_2)) / 2`` against ``Q = (N(e_1) + N(e_2)) / 2``, noise ``sigma``.

    One epoch of two shuffled batches (docs/theory.md 6). ``delta(eps)`` of both orders by a midpoint
    rule on a grid of step 0.01 sigma over +-9 sigma (error far below 1e-4); epsilon by bisection. The
    cells are sorted once by their likelihood ratio, so each ``delta(eps)`` is a difference of two tail sums
    (the same cells as summing ``max(p - e^eps q, 0)``, in another order: 5e-14 apart).
    """
    from scipy import stats

    axis = np.arange(-9 * sigma, 2 + 9 * sigma, 0.01 * sigma)
    centre = stats.norm.pdf(axis, 0, sigma)

    def mixture(mean):
        moved = stats.norm.pdf(axis, mean, sigma)
        return (0.5 * (np.multiply.outer(moved, centre) + np.multiply.outer(centre, moved))
                * (0.01 * sigma) ** 2).ravel()
    p, q = mixture(2.0), mixture(1.0)
    tails = []  # per order: the cells' negated log ratios, ascending, and the tail sums of both laws over them
    for big, small in ((p, q), (q, p)):
        ratio = np.log(big) - np.log(small)
        order = np.argsort(-ratio)
        tails.append((-ratio[order], np.concatenate([[0.0], np.cumsum(big[order])]),
                      np.concatenate([[0.0], np.cumsum(small[order])])))

    def delta_of(eps):
        # the cells whose ratio exceeds e^eps: sum of (big - e^eps small) over them
        return max(big[k] - math.exp(eps) * small[k]
                   for negated, big, small in tails for k in [np.searchsorted(negated, -eps, side="left")])
    low, high = 0.0, 20.0
    for _ in range(50):
        mid = 0.5 * (low + high)
        low, high = (low, mid) if delta_of(mid) <= delta else (mid, high)
    return high


FAMILIES = ["gaussian", "laplace", "kernel-whole", "kernel-box", "pnsgd-1d", "shuffled-rr",
            "dpsgd-iterates-poisson", "dpsgd-shuffle", "dpsgd-shuffle-once"]


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
