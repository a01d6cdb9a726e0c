"""Estimators: efficiency against the ceiling, profile and one-run bounds, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpaudit.auditing.statistics.ceiling import gaussian_ceiling
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound, profile_lower_bound
from dpaudit.auditing.statistics.one_run import one_run_epsilon, one_run_from_scores
from dpaudit.cli import main
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.profiles import gaussian_delta


# docs/theory.md 3.4: Gaussian ceiling, confidence 0.95, delta 1e-5, oracle threshold, the better of
# the rates bounded alone and the conditional bound on their ratio
@pytest.mark.parametrize("mu, trials, expected", [
    (0.5, 10**4, 1.07), (0.5, 10**6, 1.66), (1.0, 10**5, 2.97), (1.0, 10**6, 3.48),
    (1.0, 10**7, 3.90), (2.0, 10**4, 4.68), (2.0, 10**7, 7.56),
])
def test_ceiling_reproduces_the_table(mu, trials, expected):
    # the table is rounded to 2 decimals; the expected counts are rounded to integers
    assert gaussian_ceiling(mu, trials=trials, delta=1e-5) == pytest.approx(expected, abs=0.015)


@pytest.fixture(scope="module")
def million():
    rng = np.random.default_rng(2024)
    return rng.standard_normal(10**6), rng.standard_normal(10**6) + 1.0


def test_default_estimator_reaches_the_ceiling(million):
    # Issue 4: mu = 1, 10^6 trials per side, delta = 1e-5, confidence 0.95: a certified mu of at least
    # 0.97, and epsilon at least 0.93 of 3.35, the ceiling with each rate bounded alone. The conditional
    # bound on their ratio (chosen here on calibration) raises the ceiling at 9 x 10^5 certification
    # trials to 3.46, and this seed certifies 0.92 of it; the realised bound varies between seeds
    # even at the oracle threshold (a few tens of expected tail counts: about +-0.1).
    a, b = million
    eps = epsilon_lower_bound(a, b, delta=1e-5)
    assert eps.epsilon_lower_bound >= 0.93 * 3.35, eps
    assert eps.method == "conditional/split"
    assert eps.failure_split == {"beta": pytest.approx(0.05), "odds_ratio": pytest.approx(0.045), "rates": 3,
                                 "thresholds": 1, "per_rate": pytest.approx(0.005 / 3)}
    assert eps.trials["calibration_a"] == 100_000 and eps.trials["a"] == 900_000
    gdp = gdp_lower_bound(a, b, delta=1e-5)
    assert gdp.mu_lower_bound >= 0.97, gdp
    assert gdp.model_based_epsilon == pytest.approx(4.377, abs=0.15)


def test_union_strategy_records_its_split(million):
    a, b = million
    eps = epsilon_lower_bound(a[:100_000], b[:100_000], delta=1e-5, threshold="union", grid_size=16)
    assert eps.failure_split["thresholds"] == 16
    assert eps.failure_split["per_rate"] == pytest.approx(0.05 / 32)
    assert 0 < eps.epsilon_lower_bound < 4.377


def test_profile_bound_lies_under_the_true_profile(million):
    a, b = million
    grid = [0.0, 0.5, 1.0, 2.0, 3.0]
    profile = profile_lower_bound(a, b, epsilons=grid)
    truth = gaussian_delta(np.array(grid), 1.0)
    lower = np.array(profile.delta_lower_bounds)
    assert np.all(lower <= truth) and np.all(lower[:3] >= 0.9 * truth[:3])


def test_one_run_closed_forms():
    # all r guesses right and delta = 0: q^r < beta, so eps = log(q/(1-q)) with q = beta^(1/r)
    bound = one_run_epsilon(canaries=1000, guesses=100, correct=100, delta=0.0)
    q = 0.05 ** (1 / 100)
    assert bound.epsilon_lower_bound == pytest.approx(np.log(q / (1 - q)), rel=1e-6)
    assert one_run_epsilon(canaries=1000, guesses=100, correct=50, delta=0.0).epsilon_lower_bound == 0.0
    with_delta = one_run_epsilon(canaries=1000, guesses=100, correct=100, delta=1e-4)
    assert with_delta.epsilon_lower_bound < bound.epsilon_lower_bound


def test_one_run_from_scores():
    rng = np.random.default_rng(0)
    included = rng.integers(0, 2, 2000).astype(bool)
    scores = rng.standard_normal(2000) + 3.0 * included
    bound = one_run_from_scores(scores, included, guesses_positive=100, guesses_negative=100, delta=1e-5)
    assert bound.guesses == 200 and bound.correct >= 195 and bound.epsilon_lower_bound > 2.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(scores_a=[], scores_b=[1.0, 2.0], delta=0.1), "scores_a must not be empty"),
    (dict(scores_a=[1.0, np.nan], scores_b=[1.0, 2.0], delta=0.1), "scores_a must be finite, got 1 NaN"),
    (dict(scores_a=np.ones((3, 2)), scores_b=[1.0], delta=0.1), "scores_a must be one score per trial (1-D)"),
    (dict(scores_a=[1.0] * 20, scores_b=[1.0] * 20, delta=1.0), "delta must be in [0, 1), got delta=1.0"),
    (dict(scores_a=[1.0] * 20, scores_b=[1.0] * 20, delta=-0.1), "delta must be in [0, 1), got delta=-0.1"),
    (dict(scores_a=[1.0] * 20, scores_b=[1.0] * 20, delta=0.1, confidence=1.0),
     "confidence must be in (0, 1), got confidence=1.0"),
    (dict(scores_a=[1.0] * 20, scores_b=[1.0] * 20, delta=0.1, threshold="best"), "threshold must be one of"),
    (dict(scores_a=[1.0] * 20, scores_b=[1.0] * 20, delta=0.1, calibration=([1.0],)),
     "calibration must be a pair"),
    (dict(scores_a=[1.0] * 5, scores_b=[1.0] * 5, delta=0.1, calibration_fraction=0.05),
     "leaves an empty part of 5 scores"),
])
def test_bad_input_is_named(kwargs, message):
    with pytest.raises(ParameterError) as info:
        epsilon_lower_bound(**kwargs)
    assert message in str(info.value)


def test_identical_distributions_certify_nothing():
    rng = np.random.default_rng(1)
    eps = epsilon_lower_bound(rng.standard_normal(20_000), rng.standard_normal(20_000), delta=1e-5)
    assert eps.epsilon_lower_bound < 0.2


def test_estimate_cli(tmp_path, capsys):
    rng = np.random.default_rng(3)
    np.save(tmp_path / "a.npy", rng.standard_normal(50_000))
    np.savetxt(tmp_path / "b.txt", rng.standard_normal(50_000) + 1.0)
    argv = ["estimate", "--scores-a", str(tmp_path / "a.npy"), "--scores-b", str(tmp_path / "b.txt"),
            "--delta", "1e-5", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    empirical = document["empirical"]
    assert 1.0 < empirical["epsilon_lower_bound"] < 4.38 and 0.9 < empirical["mu_lower_bound"] <= 1.0
    assert empirical["confidence"] == 0.95 and empirical["delta"] == 1e-5
    (tmp_path / "bad.txt").write_text("1.0\nnot-a-number\n")
    assert main(["estimate", "--scores-a", str(tmp_path / "bad.txt"), "--scores-b",
                 str(tmp_path / "b.txt"), "--delta", "1e-5"]) == 2
    assert "is not a text file of numbers" in capsys.readouterr().err


def test_estimate_in_either_order_of_the_files(tmp_path, capsys):
    """The orientation is chosen on calibration scores: swapping the files keeps the bound (mu = 1, 10^5 each)."""
    rng = np.random.default_rng(7)
    low, high = tmp_path / "low.npy", tmp_path / "high.npy"
    np.save(low, rng.standard_normal(100_000))
    np.save(high, rng.standard_normal(100_000) + 1.0)
    bounds = {}
    for name, (a, b) in {"ordered": (low, high), "swapped": (high, low)}.items():
        assert main(["estimate", "--scores-a", str(a), "--scores-b", str(b), "--delta", "1e-5", "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        bounds[name] = document["empirical"]["epsilon_lower_bound"]
        assert isinstance(document["empirical"]["trials"], int)
        assert document["empirical"]["epsilon"]["orientation"] == (
            "larger under S'" if name == "ordered" else "smaller under S'")
    assert bounds["ordered"] > 2.0 and bounds["swapped"] >= 0.85 * bounds["ordered"]


def test_one_run_tail_confidence_lies_just_past_the_root():
    # the tail bound's confidence s (mass ``tail`` above it) is rounded up: at or past the root of the mass
    # (a smaller error rate, a larger p-value), by at most the relative margin 1e-7 plus 1e-7, over the cut
    # quantiles the bound uses and the mu values it tries (Newton stops once its steps are below 1e-12)
    from scipy.special import ndtr

    from dpaudit.auditing.statistics.one_run_tail import CELLS, _confidence_at, _cut_quantiles

    mu = np.array([0.0, 0.05, 0.25, 1.0, 2.5, 8.0, 16.0, 40.0])[None, :]
    for canaries, guesses in ((1000, 100), (1000, 900), (10_000, 50)):
        tail = (1.0 - _cut_quantiles(canaries, guesses, CELLS))[:, None]
        tail = tail[tail[:, 0] > 0]
        s = _confidence_at(tail, mu)

        def mass(x):
            return ndtr(-(x + mu / 2)) + ndtr(-(x - mu / 2))
        low, high = np.zeros_like(s), s + 50.0
        for _ in range(200):
            middle = (low + high) / 2
            above = mass(middle) > tail
            low, high = np.where(above, middle, low), np.where(above, high, middle)
        root = high  # the root by bisection (200 halvings: at the float's resolution), mass at most tail
        assert np.all(s >= root), (canaries, guesses)
        assert np.all(s <= root * (1 + 1e-7) + 1e-7 + 1e-9 * (1 + root)), (canaries, guesses)
