"""Smoothed tail rates for placing a test: the exponential tilt (docs/theory.md 7).

At small epsilon the rates of a candidate test differ between the two
datasets by a few percent, about as much as the calibration part's noise in
a tail, so the test that the plug-in calibration rates place best is often
the luckiest. Some scores have a log likelihood ratio close to a straight
line in their value (exactly: a Gaussian shift, a count of independent signs
with a common shift); under that *exponential tilt* the laws of the score on
``S`` and ``S'`` are one pooled law reweighted,

    dP_b / dP_a (s) = exp(alpha + theta s),

and a logistic regression of the dataset label on the score estimates the
two parameters from all calibration scores at once (Anderson 1979; Qin
1998). Each pooled calibration score then carries a weight under each
dataset, the fitted probability of its label normalised, and the rates of
every candidate test are sums of weights: smooth in the threshold, with the
noise of two parameters and of the pooled sample (twice as many scores as
either side) instead of that of two thin tails.

The tilt is only used where the calibration scores cannot tell it apart
from a richer model: a logistic regression on a linear spline of the score
(knots at the pooled quantiles :data:`KNOT_QUANTILES`, denser in the tails,
where a ratio that levels off or jumps would show; a knot whose tail holds
one dataset's scores only is left out, for its hinge has no finite fit). When the likelihood-ratio
test of the straight line inside the spline rejects at :data:`TILT_GATE`, or
either fit does not converge (a score value seen under one dataset only
separates them), :func:`fit_tilt` returns ``None`` and the caller keeps
the plug-in rates. Everything here is a function of calibration scores
only: it places the test and certifies nothing.

Only a score that declares the tilt (a fitted score's ``tail_model``,
``attacks.score_protocol.fitted_tail_model``) is placed this way: a score
whose ratio levels off in its tail (a Laplace value) is read by a straight
line as ever more telling further out, which at small epsilon the
calibration scores cannot show, and its test lands in too thin a tail.

References
----------
docs/theory.md 7 (placing a test at the planned budget); Anderson, J. A.
(1979), "Multivariate logistic compounds", Biometrika 66; Qin, J. (1998),
"Inferences for case-control and semiparametric two-sample density ratio
models", Biometrika 85.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import expit
from scipy.stats import chi2

from dpaudit.attacks.score_protocol import TAIL_MODELS

__all__ = ["KNOT_QUANTILES", "TAIL_MODELS", "TILT_GATE", "Tilt", "fit_tilt"]

#: The straight line is kept unless the spline fit rejects it at this level
TILT_GATE = 0.01
#: Knots of the spline the straight line is tested inside (pooled quantiles; tails first)
KNOT_QUANTILES = (0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99)
_NEWTON_STEPS = 50
_NEWTON_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class Tilt:
    """A fitted exponential tilt: the pooled calibration scores and the straight line of their log-odds.

    Attributes
    ----------
    scores : numpy.ndarray
        The pooled calibration scores, sorted.
    intercept, slope : float
        The fitted log-odds of ``S'`` at a score ``s``: ``intercept + slope (s - centre)``; ``slope`` is
        ``theta``, per unit of the score.
    slope_error : float
        The slope's standard error (from the fit's information; for reading: the rates use the slope
        itself, docs/theory.md 7).
    centre : float
        Where the intercept is read (the pooled mean).
    p_value : float
        Of the straight line against the spline (1.0 when the spline has no knot to add).
    """

    scores: np.ndarray
    intercept: float
    slope: float
    slope_error: float
    centre: float
    p_value: float

    def negated(self) -> "Tilt":
        """The tilt of the negated scores (the other orientation)."""
        return Tilt(-self.scores[::-1], self.intercept, -self.slope, self.slope_error, -self.centre, self.p_value)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """The weights of the pooled scores under ``S`` and ``S'`` (each summing to 1)."""
        fitted = expit(self.intercept + self.slope * (self.scores - self.centre))
        return (1 - fitted) / np.sum(1 - fitted), fitted / np.sum(fitted)

    def counts(self, thresholds: np.ndarray, fractions: np.ndarray, trials_a: int,
               trials_b: int) -> tuple[np.ndarray, np.ndarray]:
        """Expected error counts of the tests ``s > t, or s == t and U < g`` among ``trials_a``, ``trials_b``.

        The tests of :func:`dpaudit.auditing.statistics.thresholds.candidate_tests`, their rates read from the
        tilt's weights instead of the raw calibration tails.
        """
        weight_a, weight_b = self.weights()
        below_a = np.concatenate([[0.0], np.cumsum(weight_a)])
        below_b = np.concatenate([[0.0], np.cumsum(weight_b)])
        low = np.searchsorted(self.scores, thresholds, side="left")
        high = np.searchsorted(self.scores, thresholds, side="right")
        false_positive_rate = 1 - below_a[high] + fractions * (below_a[high] - below_a[low])
        false_negative_rate = below_b[low] + (1 - fractions) * (below_b[high] - below_b[low])
        return (np.clip(false_positive_rate, 0.0, 1.0) * trials_a,
                np.clip(false_negative_rate, 0.0, 1.0) * trials_b)


def _logistic_fit(design: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, float, np.ndarray] | None:
    """Newton's method for a logistic regression: ``(coefficients, log-likelihood, covariance)``, ``None`` if it
    diverges (the covariance is the inverse of the information at the fit)."""
    coefficients = np.zeros(design.shape[1])
    for _ in range(_NEWTON_STEPS):
        fitted = expit(design @ coefficients)
        curvature = (design * (fitted * (1 - fitted))[:, None]).T @ design
        try:
            step = np.linalg.solve(curvature, design.T @ (labels - fitted))
        except np.linalg.LinAlgError:
            return None
        coefficients = coefficients + step
        if not np.all(np.isfinite(coefficients)):
            return None
        if np.max(np.abs(step)) < _NEWTON_TOLERANCE:
            fitted = np.clip(expit(design @ coefficients), 1e-300, 1 - 1e-16)
            likelihood = float(np.sum(labels * np.log(fitted) + (1 - labels) * np.log1p(-fitted)))
            return coefficients, likelihood, np.linalg.pinv(curvature)
    return None


def _quantile_knots(centred: np.ndarray) -> np.ndarray:
    """The pooled quantiles :data:`KNOT_QUANTILES` strictly inside the scores' range (distinct)."""
    knots = np.unique(np.quantile(centred, KNOT_QUANTILES))
    return knots[(knots > centred.min()) & (knots < centred.max())]


def _informative_knots(centred: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The spline's knots (pooled quantiles :data:`KNOT_QUANTILES`) whose tail holds both datasets' scores.

    A knot's tail is the side away from the pooled median: the scores above it for a knot above the median,
    below it for one below. Where that tail holds one dataset's scores only, the spline's hinge there has no
    finite fit (its slope grows without end), which a clean shift shows as well as a leak: 100 scores per
    side of ``N(0, 1)`` and ``N(2, 1)`` put the pooled top 1% all under ``S'`` on almost every draw. Such a
    knot is left out, so the line is tested where both datasets are seen; a value seen under one dataset
    only still stops the line's own fit (``None``)."""
    knots = _quantile_knots(centred)
    middle = np.median(centred)
    kept = []
    for knot in knots:
        tail = labels[centred > knot] if knot >= middle else labels[centred < knot]
        if 0 < tail.sum() < tail.size:
            kept.append(knot)
    return np.array(kept)


def fit_tilt(cal_a: np.ndarray, cal_b: np.ndarray) -> Tilt | None:
    """The exponential tilt of the calibration scores, or ``None`` where the data reject it.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        One-dimensional calibration scores of ``S`` and ``S'``.

    Returns
    -------
    Tilt or None
        ``None`` when the score is constant, a fit does not converge, or the
        spline rejects the straight line at :data:`TILT_GATE` (module docstring).
    """
    cal_a, cal_b = np.asarray(cal_a, dtype=float).ravel(), np.asarray(cal_b, dtype=float).ravel()
    pooled = np.concatenate([cal_a, cal_b])
    labels = np.concatenate([np.zeros(cal_a.size), np.ones(cal_b.size)])
    with np.errstate(over="ignore", invalid="ignore"):
        spread = float(pooled.std())
    if cal_a.size == 0 or cal_b.size == 0 or not np.isfinite(spread) or spread == 0:
        return None
    centred = (pooled - pooled.mean()) / spread
    line = _logistic_fit(np.column_stack([np.ones_like(centred), centred]), labels)
    if line is None:
        return None
    knots = _informative_knots(centred, labels)
    p_value = 1.0
    if knots.size:
        hinges = np.maximum(centred[:, None] - knots, 0.0)
        spline = _logistic_fit(np.column_stack([np.ones_like(centred), centred, hinges]), labels)
        if spline is None:
            return None
        p_value = float(chi2.sf(max(2 * (spline[1] - line[1]), 0.0), knots.size))
        if p_value < TILT_GATE:
            return None
    (intercept, slope), covariance = line[0], line[2]
    return Tilt(np.sort(pooled, kind="stable"), float(intercept), float(slope / spread),
                float(np.sqrt(max(covariance[1, 1], 0.0)) / spread), float(pooled.mean()), p_value)
