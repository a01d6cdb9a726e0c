"""The learned scores without torch.optim (attacks/classifiers.py), and Clopper-Pearson without statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from dpaudit.attacks.classifiers import fit_logistic, fit_logistic_counted, fit_mlp
from dpaudit.auditing.statistics.confidence import clopper_pearson, cp_upper
from dpaudit.core.errors import ParameterError


def _shifted(seed: int, shift: float = 1.0, size: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(size, 3)), rng.normal(size=(size, 3)) + np.array([shift, 0.0, 0.0])


def test_logistic_regression_finds_the_likelihood_ratio_of_a_gaussian_shift():
    """For N(0, I) against N(u, I) the log-likelihood ratio is linear, <x, u> - |u|^2 / 2, so logistic
    regression on equal classes converges to it; with 4000 trials a side its coefficients are within about
    4 standard errors (about 0.035 each) of (1, 0, 0) and intercept -1/2 (after undoing the standardisation)."""
    a, b = _shifted(0)
    score = fit_logistic(a, b, seed=0)
    points = np.vstack([np.zeros(3), np.eye(3)])
    values = score(points)
    np.testing.assert_allclose(values[1:] - values[0], [1.0, 0.0, 0.0], atol=0.15)
    assert values[0] == pytest.approx(-0.5, abs=0.15)
    assert np.array_equal(score(points), fit_logistic(a, b, seed=0)(points))  # deterministic


def test_logistic_regression_reaches_its_optimum_on_many_one_hot_columns():
    """Ten categories of ten levels, one-hot (collinear with the intercept, as the ``discrete`` score's
    columns are): the fit stops at the optimum, where the cross-entropy's gradient, ``X^T (p - y) / n``, is 0
    up to rounding. Started from random weights, the damped Newton iteration stalled here at a gradient of
    about 6e-3, worse than the intercept alone."""
    from scipy.special import expit

    rng = np.random.default_rng(1)
    shares = np.cumsum(rng.dirichlet(np.full(10, 0.7), size=10), axis=1)

    def one_hot(trials: int) -> np.ndarray:
        codes = np.minimum((rng.random((trials, 10, 1)) > shares[None]).sum(axis=2), 9)
        return (codes[:, :, None] == np.arange(10)).reshape(trials, -1).astype(float)
    a, b = one_hot(20_000), one_hot(20_000)
    score = fit_logistic(a, b, seed=0)
    features, labels = np.vstack([a, b]), np.r_[np.zeros(len(a)), np.ones(len(b))]
    gradient = features.T @ (expit(score(features)) - labels) / len(labels)
    assert np.max(np.abs(gradient)) < 1e-9


def test_logistic_regression_on_counted_rows_is_the_one_on_the_trials_written_out():
    """The ``discrete`` score fits on its distinct outcomes with their counts: the same standardisation and
    the same optimum as on every calibration trial, so the scores agree up to rounding (sums taken in
    another order: 1e-12 is about 10^4 times the rounding of logits of order 1). Here 40,000 trials of
    three one-hot categories (60 outcomes at most) against their 60 counted rows."""
    rng = np.random.default_rng(2)

    def one_hot(trials: int, tilt: float) -> np.ndarray:
        levels = [rng.choice(k, size=trials, p=np.r_[1.0 + tilt, np.ones(k - 1)] / (k + tilt)) for k in (3, 4, 5)]
        return np.hstack([(level[:, None] == np.arange(level.max() + 1)).astype(float) for level in levels])
    a, b = one_hot(20_000, 0.0), one_hot(20_000, 0.3)
    rows, inverse = np.unique(np.vstack([a, b]), axis=0, return_inverse=True)
    inverse = inverse.ravel()
    count_a = np.bincount(inverse[:len(a)], minlength=len(rows))
    count_b = np.bincount(inverse[len(a):], minlength=len(rows))
    assert len(rows) <= 60 and count_a.sum() + count_b.sum() == 40_000
    written_out, counted = fit_logistic(a, b, seed=0), fit_logistic_counted(rows, count_a, count_b, seed=0)
    np.testing.assert_allclose(counted(rows), written_out(rows), rtol=0, atol=1e-12)
    assert np.ptp(written_out(rows)) > 0.1  # the fit reads the tilt: the comparison is not between constants
    with pytest.raises(ParameterError, match="count_a of shape"):
        fit_logistic_counted(rows, count_a[1:], count_b, seed=0)


def test_mlp_scores_are_larger_under_the_shifted_dataset_and_reproducible():
    a, b = _shifted(1)
    score = fit_mlp(a, b, hidden=8, seed=3)
    test_a, test_b = _shifted(2)
    assert np.mean(score(test_b) > np.median(score(test_a))) > 0.6  # AUC-like: 0.69 for this shift at best
    np.testing.assert_array_equal(score(test_a[:50]), fit_mlp(a, b, hidden=8, seed=3)(test_a[:50]))


def _autograd_mlp(cal_a, cal_b, *, hidden, seed):
    """The network score trained through torch's autograd and modules (the reference of the written-out gradient),
    on one torch thread as ``fit_mlp`` trains."""
    import torch

    from dpaudit.attacks import classifiers

    x, y, mean, std = classifiers._standardise(cal_a, cal_b)
    features, labels = torch.from_numpy(x), torch.from_numpy(y)
    generator = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(features.shape[1], hidden), torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 1)).to(torch.float64)
    parameters = list(model.parameters())
    with torch.no_grad():
        for parameter in parameters:
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.1)
    (beta1, beta2) = classifiers.ADAM_BETAS
    first, second = [torch.zeros_like(p) for p in parameters], [torch.zeros_like(p) for p in parameters]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _autograd_steps(model, features, labels, first, second)
    finally:
        torch.set_num_threads(threads)
    return lambda outputs: model(torch.from_numpy((outputs - mean) / std)).squeeze(-1).detach().numpy()


def _autograd_steps(model, features, labels, first, second):
    import torch

    from dpaudit.attacks import classifiers

    (beta1, beta2), parameters = classifiers.ADAM_BETAS, list(model.parameters())
    for step in range(1, classifiers.MLP_STEPS + 1):
        for parameter in parameters:
            parameter.grad = None
        torch.nn.BCEWithLogitsLoss()(model(features).squeeze(-1), labels).backward()
        with torch.no_grad():
            for parameter, m, v in zip(parameters, first, second):
                m.mul_(beta1).add_(parameter.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(parameter.grad, parameter.grad, value=1 - beta2)
                denominator = (v / (1 - beta2 ** step)).sqrt_().add_(classifiers.ADAM_EPS)
                parameter.addcdiv_(m, denominator, value=-classifiers.MLP_LEARNING_RATE / (1 - beta1 ** step))


def test_mlp_gradient_written_out_gives_autograds_scores_bit_for_bit():
    # sizes from two records to thousands, one to hundreds of coordinates, rounded outputs (ties at the ReLU)
    rng = np.random.default_rng(0)
    for case, (n, dim, shift) in enumerate([(2, 1, 0.0), (20, 3, 0.5), (300, 1, 2.0), (1000, 40, 0.1),
                                            (3000, 200, 0.1), (64, 500, 1.0)]):
        cal_a, cal_b = rng.normal(size=(n, dim)), rng.normal(size=(n, dim)) + shift
        if case % 2:
            cal_a, cal_b = np.round(cal_a), np.round(cal_b)
        probe = rng.normal(size=(200, dim))
        assert np.array_equal(fit_mlp(cal_a, cal_b, hidden=32, seed=case)(probe),
                              _autograd_mlp(cal_a, cal_b, hidden=32, seed=case)(probe)), (n, dim)


def test_clopper_pearson_bounds_equal_statsmodels_bit_for_bit():
    rng = np.random.default_rng(7)
    for trials in (1, 7, 1000, 10**6):
        counts = np.unique(np.concatenate([rng.integers(0, trials + 1, 500), [0, 1, trials - 1, trials]]))
        for failure in (0.025, 1e-3, 1e-7):
            lower, upper = proportion_confint(counts, trials, alpha=2 * failure, method="beta")
            expected_upper = np.nan_to_num(np.where(counts >= trials, 1.0, np.asarray(upper, dtype=float)), nan=1.0)
            expected_lower = np.nan_to_num(np.where(counts <= 0, 0.0, np.asarray(lower, dtype=float)), nan=0.0)
            np.testing.assert_array_equal(cp_upper(counts, trials, failure), expected_upper)
            np.testing.assert_array_equal(clopper_pearson(counts, trials, failure)[0], expected_lower)
    sizes = rng.integers(1, 5000, 300)  # trials given per count, as the conditional estimate does
    counts = rng.integers(0, sizes + 1)
    lower, upper = proportion_confint(counts, sizes, alpha=2e-3, method="beta")
    got_lower, got_upper = clopper_pearson(counts, sizes, 1e-3)
    np.testing.assert_array_equal(got_upper, np.where(counts >= sizes, 1.0, np.nan_to_num(upper, nan=1.0)))
    np.testing.assert_array_equal(got_lower, np.where(counts <= 0, 0.0, np.nan_to_num(lower, nan=0.0)))


def test_remembered_clopper_pearson_values_are_the_direct_ones_bit_for_bit():
    """The memo of inverse betas (audit/statistics/confidence.py) returns, for counts seen before, unseen, fractional
    (expected counts of randomised tests) and repeated, in any shape, what a fresh evaluation gives; a small
    memo that forgets pairs and refuses to grow still does."""
    from scipy.special import betainccinv, betaincinv

    from dpaudit.auditing.statistics import confidence

    def direct(counts, trials, failure):
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = np.nan_to_num(betainccinv(counts + 1, trials - counts, failure), nan=1.0)
            lower = np.nan_to_num(betaincinv(counts, trials - counts + 1, failure), nan=0.0)
        return np.where(counts <= 0, 0.0, lower), np.where(counts >= trials, 1.0, upper)

    rng = np.random.default_rng(11)
    small = confidence._InverseBetaMemo(confidence._upper)
    small.KEYS, small.SIZE = 2, 300
    for _ in range(6):
        for trials in (9, 1400, 10**5):
            counts = np.concatenate([rng.integers(0, trials + 1, 200).astype(float), rng.uniform(0, trials, 100),
                                     [0.0, trials, trials - 0.5, np.nan]])
            counts = np.concatenate([counts, counts[:50]]).reshape(-1, 1)
            for failure in (0.025, 0.5):
                lower, upper = direct(counts, trials, failure)
                np.testing.assert_array_equal(cp_upper(counts, trials, failure), upper)
                np.testing.assert_array_equal(clopper_pearson(counts, trials, failure)[0], lower)
                with np.errstate(invalid="ignore"):
                    np.testing.assert_array_equal(np.nan_to_num(small(counts, trials, failure), nan=1.0),
                                                  np.nan_to_num(confidence._upper(counts, trials, failure), nan=1.0))
    assert len(small.tables) <= 2 and all(known.size <= 300 for known, _ in small.tables.values())
    assert confidence._UPPER.tables, "the searches above went through the memo"
