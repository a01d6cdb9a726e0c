"""DP matrix factorisation's claims against an independent computation (docs/theory.md 12).

Each exact value is recomputed here from scratch: the strategy's matrix
written out by hand (the tree from its dyadic decomposition, recursively),
the noise covariance ``K = M M^T``, ``mu^2 = 1_pi^T K^{-1} 1_pi`` over the
cyclic patterns by brute force, and the Gaussian profile of Balle and Wang
(Thm 8) inverted with ``scipy.optimize.brentq`` from ``scipy.stats.norm``:
no module of ``accounting`` is used for the reference figures.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import comb

import dpaudit
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.participation import minsep_sensitivity, pattern_value

DELTA = 1e-5


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """Balle & Wang 2018, Thm 8: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), inverted."""
    def excess(eps):
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2) - delta
    return 0.0 if excess(0.0) <= 0 else optimize.brentq(excess, 0.0, 200.0, xtol=1e-13)


def _dyadic(t: int, offset: int = 0) -> list[tuple[int, int]]:
    """The dyadic intervals [start, end] (1-based) that cover 1..t, largest first, recursively."""
    if t == 0:
        return []
    size = 1 << (t.bit_length() - 1)
    return [(offset + 1, offset + size)] + _dyadic(t - size, offset + size)


def _tree_noise(steps: int, period: int) -> np.ndarray:
    """Each step's gradient noise over the tree's node noises, built from the dyadic decompositions."""
    nodes: dict[tuple[int, int, int], int] = {}
    prefix = []
    for epoch in range(steps // period):
        for t in range(1, period + 1):
            row = {}
            for interval in _dyadic(t):
                row[nodes.setdefault((epoch, *interval), len(nodes))] = 1.0
            prefix.append((epoch, row))
    dense = np.zeros((steps, len(nodes)))
    for i, (_, row) in enumerate(prefix):
        for node, value in row.items():
            dense[i, node] = value
    noise = dense.copy()
    for i in range(1, steps):
        if prefix[i][0] == prefix[i - 1][0]:
            noise[i] -= dense[i - 1]
    return noise


def _square(strategy: str, steps: int, bands: int = 0) -> np.ndarray:
    if strategy == "identity":
        return np.eye(steps)
    coefficients = [comb(2 * j, j) / 4**j for j in range(bands)]
    return sum(np.diag(np.full(steps - j, c), -j) for j, c in enumerate(coefficients))


def _reference(strategy: str, steps: int, epochs: int, sigma: float, bands: int = 0) -> tuple[float, float]:
    """(mu of every noisy gradient at the worst cyclic pattern, mu of the last iterate) under zero-out."""
    period = steps // epochs
    if strategy == "tree":
        noise = _tree_noise(steps, period)
    else:
        noise = np.linalg.inv(_square(strategy, steps, bands))
    covariance = noise @ noise.T
    precision = np.linalg.inv(covariance)
    squared = max(precision[np.ix_(p, p)].sum() for p in
                  (list(range(slot, steps, period)) for slot in range(period)))
    return math.sqrt(squared) / sigma, epochs / (sigma * math.sqrt(covariance.sum()))


CASES = [("identity", 0), ("tree", 0), ("banded-sqrt", 4)]


@pytest.mark.parametrize("strategy,bands", CASES)
@pytest.mark.parametrize("epochs", [1, 4])
def test_exact_values_agree_with_a_direct_computation(strategy, bands, epochs):
    steps, sigma = 32, 3.0
    params = {"bands": bands} if bands else {}
    mech = dpaudit.make("dp-mf", n=steps, steps=steps, epochs=epochs, strategy=strategy, noise_multiplier=sigma,
                        **params)
    mu_release, mu_last = _reference(strategy, steps, epochs, sigma, bands)
    claims = {(c.name, str(c.relation)): c for c in mech.claims()}
    for relation, move in (("zero-out", 1.0), ("replace-one", 2.0)):
        assert claims["mf-releases", relation].epsilon(DELTA) == pytest.approx(
            _gaussian_epsilon(move * mu_release, DELTA), rel=1e-8)
        assert claims["mf-last-iterate", relation].epsilon(DELTA) == pytest.approx(
            _gaussian_epsilon(move * mu_last, DELTA), rel=1e-8)
    # the audited instance at the default canary (the worst pattern) is exactly the claim
    iterates = dpaudit.make("dp-mf", n=steps, steps=steps, epochs=epochs, strategy=strategy,
                            noise_multiplier=sigma, output="iterates", **params)
    pair = CanarySpec().build(iterates, iterates.default_index)
    laws = iterates.exact_output_laws(pair.dataset_a, pair.dataset_b)
    assert abs(laws.means_b[0] - laws.means_a[0]) / laws.std == pytest.approx(mu_release, rel=1e-9)


def test_the_tree_claim_of_dp_accounting_is_never_below_the_exact_value():
    for epochs in (1, 4):
        mech = dpaudit.make("dp-mf", n=64, steps=64, epochs=epochs, strategy="tree", noise_multiplier=4.0)
        claims = {(c.name, str(c.relation)): c.epsilon(DELTA) for c in mech.claims()}
        assert claims["tree-rdp", "zero-out"] >= claims["mf-releases", "zero-out"]


def test_a_banded_precision_gives_the_exact_min_separation_value():
    rng = np.random.default_rng(3)
    steps = 10
    for bands, separation, participations in ((2, 2, 3), (3, 3, 3), (3, 2, 4)):
        lower = sum(np.diag(rng.uniform(0.2, 1.0, steps - j), -j) for j in range(bands))
        precision = lower.T @ lower
        found = minsep_sensitivity(precision, participations, separation)
        best = max(precision[np.ix_(p, p)].sum() for k in range(1, participations + 1)
                   for p in itertools.combinations(range(steps), k)
                   if all(b - a >= separation for a, b in zip(p, p[1:])))
        if found.exact:
            assert found.squared == pytest.approx(best, rel=1e-12)
            assert precision[np.ix_(found.pattern, found.pattern)].sum() == pytest.approx(best, rel=1e-12)
        else:  # P is wider than the separation: a certified upper bound
            assert found.squared >= best * (1 - 1e-12)


def test_negative_entries_give_an_upper_bound_or_the_exact_maximum_over_signs():
    lower = np.eye(6) - 0.5 * np.eye(6, k=-1)
    precision = lower.T @ lower
    pattern = (0, 1, 2)
    one_dim = pattern_value(precision, pattern, dim=1)
    block = precision[np.ix_(pattern, pattern)]
    signs = [np.array(s) for s in itertools.product((1, -1), repeat=3)]
    assert one_dim.exact and one_dim.squared == pytest.approx(max(s @ block @ s for s in signs))
    many = pattern_value(precision, pattern, dim=3)
    assert not many.exact and many.squared >= one_dim.squared


@pytest.mark.parametrize("params,words", [
    ({"steps": 10, "epochs": 3}, "steps must be a multiple of epochs"),
    ({"n": 5, "steps": 4, "epochs": 2}, "n must fill"),
    ({"strategy": "toeplitz"}, "needs coefficients"),
    ({"strategy": "toeplitz", "coefficients": [0.0, 1.0]}, "c_0 != 0"),
    ({"strategy": "banded-sqrt", "bands": 40}, "bands must be at most"),
    ({"strategy": "banded-sqrt"}, "needs bands"),
    ({"coefficients": [1.0]}, "coefficients apply to strategy='toeplitz'"),
    ({"strategy": "fourier"}, "strategy must be one of"),
    ({"strategy": "missing.npy"}, "strategy must be a readable .npy"),
    ({"noise_multiplier": 0.0}, "noise_multiplier"),
    ({"selection": "poisson"}, "selection must be one of"),
])
def test_bad_parameters_are_refused_naming_them(params, words):
    with pytest.raises(ParameterError, match=words.replace("(", r"\(").replace(")", r"\)")):
        dpaudit.make("dp-mf", **params)


def test_a_dense_strategy_from_a_file(tmp_path):
    lower = _square("banded-sqrt", 8, 3)
    path = tmp_path / "c.npy"
    np.save(path, lower)
    from_file = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy=str(path), noise_multiplier=2.0)
    named = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="banded-sqrt", bands=3, noise_multiplier=2.0)
    for a, b in zip(from_file.claims(), named.claims()):
        # jax_privacy's figure (where installed) reads a Toeplitz strategy's coefficients and a dense one's
        # matrix with two functions of its own: equal to its accountant's precision
        assert a.name == b.name and a.epsilon(DELTA) == pytest.approx(
            b.epsilon(DELTA), rel=1e-6 if a.name == "jax-privacy" else 1e-12, nan_ok=True)
    upper = tmp_path / "upper.npy"
    np.save(upper, lower.T)
    with pytest.raises(ParameterError, match="lower-triangular"):
        dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy=str(upper))


@pytest.mark.parametrize("strategy,steps,epochs,bands,expected", [
    ("banded-sqrt", 64, 1, 4, 14.1279), ("banded-sqrt", 1000, 1, 16, 51.1119), ("tree", 64, 1, 0, 1.0),
    ("tree", 64, 4, 0, 4.0), ("tree", 48, 1, 0, 2.0), ("identity", 64, 1, 0, 64.0)])
def test_the_summed_noise_of_correlated_strategies_is_small(strategy, steps, epochs, bands, expected):
    """docs/theory.md 12.3 quotes these variances of the last iterate's noise, 1^T K 1 (unit sigma L): for the tree,
    k times the set bits of p."""
    if strategy == "tree":
        covariance = (lambda m: m @ m.T)(_tree_noise(steps, steps // epochs))
    else:
        inverse = np.linalg.inv(_square(strategy, steps, bands))
        covariance = inverse @ inverse.T
    assert covariance.sum() == pytest.approx(expected, abs=1e-4)
    from dpaudit.mechanisms.accounting.strategies import factor

    mech = dpaudit.make("dp-mf", n=steps, steps=steps, epochs=epochs, strategy=strategy,
                        **({"bands": bands} if bands else {}))
    assert factor(mech.strategy_value).last_variance == pytest.approx(covariance.sum(), rel=1e-9)


def test_without_jax_privacy_its_claim_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jax_privacy", None)  # an import of it now raises ImportError
    mech = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="banded-sqrt", bands=2, noise_multiplier=3.0)
    from dpaudit.mechanisms.accounting.builders.matrix import matrix_claims

    claim = next(c for c in matrix_claims(mech.privacy_description, None) if c.name == "jax-privacy")
    assert not claim.applicable and 'pip install -e ".[jax]"' in claim.reason


def test_an_optimised_strategy_without_jax_privacy_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "jax_privacy", None)
    monkeypatch.setitem(sys.modules, "jax_privacy.matrix_factorization", None)
    with pytest.raises(ParameterError, match=r'strategy=.bandmf. is computed by jax_privacy.*pip install -e ".\[jax\]"'):
        dpaudit.make("dp-mf", n=8, steps=8, strategy="bandmf", bands=2, noise_multiplier=1.0)
