"""Scores that read every released step: for training loops released iterate by iterate (white box).

A release of ``T`` steps of ``P`` numbers (``output_dim = T P``) is read as
a ``(T, P)`` array per trial. When the mechanism releases iterates
(``output = "iterates"``) the steps are their increments ``theta_t -
theta_(t-1)``; otherwise (a user's loop releasing, say, its noisy sums) the
columns themselves. Each step is projected on the canary direction of that
step and standardised per step by the median and the MAD of the
calibration trials of both datasets (robust to the rare steps the canary
moves), oriented on the calibration trials so that the canary's pull in
``S`` is positive: ``z_t``.
Summing the steps (the ``projection`` score on the tiled direction) throws
this structure away: with Poisson or shuffled batches the canary moves few
steps, and a sum drowns them in the noise of the others.

========== ==========================================================
step-max   ``-max_t z_t``: the largest step-wise projection (no model)
step-mixture ``sum_t log m_S'(z_t) - log m_S(z_t)``, with ``m`` a mixture
           ``(1 - w) N(0, 1) + w N(a, 1)`` fitted per dataset by EM on the
           calibration steps: the exact per-step likelihood ratio of
           Poisson batches, close to it for shuffled ones
========== ==========================================================

They apply to any mechanism whose output is a sequence of steps: the number
of steps is the mechanism's ``training_steps`` or ``steps`` when the output
holds that many, else every column is a step. For the built-in DP-SGD the
``exact`` score (``accounting.white_box``) is the likelihood ratio itself.

References
----------
Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, "Tight
auditing of differentially private machine learning", USENIX Security 2023
(white-box gradient canaries, per-step tests).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from dpaudit.core.errors import ParameterError

__all__ = ["STEP_SCORES", "fit_step_score", "step_count", "step_values"]

STEP_SCORES = {
    "step-max": "largest step-wise projection on the canary direction (every released step)",
    "step-mixture": "per-step likelihood ratio of mixtures fitted on calibration steps (every released step)",
}
_MAD = 1.482602218505602  # MAD to standard deviation for a normal law


def step_count(mechanism, output_dim: int) -> int:
    """Steps in a release of ``output_dim`` numbers (see the module docstring); 1 for a last iterate."""
    declared = mechanism.released_steps
    if declared is not None and (declared == 1 or output_dim % declared == 0):
        return declared
    return output_dim


def step_values(mechanism, outputs: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """Every trial's per-step projections on the canary direction, ``(trials, T)`` (larger under ``S'``)."""
    outputs = np.asarray(outputs, dtype=float)
    steps = step_count(mechanism, outputs.shape[1])
    shaped = outputs.reshape(len(outputs), steps, -1)
    if mechanism.releases_iterates:
        shaped = np.diff(shaped, axis=1, prepend=0.0)  # the first step's offset is the public start: a constant
    return np.einsum("ntp,tp->nt", shaped, np.asarray(direction, dtype=float).reshape(steps, -1))


def _mixture(z: np.ndarray, iterations: int = 200) -> tuple[float, float]:
    """EM for ``(1 - w) N(0, 1) + w N(a, 1)`` on pooled values: ``(w, a)``."""
    w, a = 0.05, max(float(np.quantile(z, 0.995)), 0.5)
    for _ in range(iterations):
        log_one = np.log(w) - 0.5 * (z - a) ** 2
        log_zero = np.log1p(-w) - 0.5 * z**2
        r = np.exp(log_one - np.logaddexp(log_one, log_zero))
        total = float(r.sum())
        if total <= 1e-9:
            return 1e-9, a
        w_new, a_new = min(max(total / z.size, 1e-9), 1 - 1e-9), float((r * z).sum() / total)
        if abs(w_new - w) < 1e-10 and abs(a_new - a) < 1e-8:
            w, a = w_new, a_new
            break
        w, a = w_new, a_new
    return w, a


def fit_step_score(name: str, pair, calibration_a: np.ndarray, calibration_b: np.ndarray) -> Callable:
    """Fit the per-step score ``name`` on calibration outputs of ``S`` and ``S'`` (never certification trials)."""
    if name not in STEP_SCORES:
        raise ParameterError(f"score must be one of {', '.join(STEP_SCORES)}, got score={name!r}")
    mechanism = pair.mechanism
    if step_count(mechanism, len(pair.direction)) < 2:
        raise ParameterError(f"score {name!r} reads a release of several steps; {mechanism.name!r} releases one")
    values_a = step_values(mechanism, calibration_a, pair.direction)
    values_b = step_values(mechanism, calibration_b, pair.direction)
    pooled = np.concatenate([values_a, values_b])
    centre = np.median(pooled, axis=0)
    spread = _MAD * np.median(np.abs(pooled - centre), axis=0)
    spread = np.where(spread > 0, spread, pooled.std(axis=0) + 1e-300)
    # the canary's pull in S made positive: S's steps lie below S''s along the direction, or above them
    sign = 1.0 if values_b.mean() >= values_a.mean() else -1.0

    def standard(outputs):
        return sign * (centre - step_values(mechanism, outputs, pair.direction)) / spread

    if name == "step-max":
        return lambda outputs: -standard(outputs).max(axis=1)
    w_a, a_a = _mixture(standard(calibration_a).ravel())
    w_b, a_b = _mixture(standard(calibration_b).ravel())

    def log_mixture(z, w, a):
        return logsumexp(np.stack([np.log1p(-w) - 0.5 * z**2, np.log(w) - 0.5 * (z - a) ** 2]), axis=0)

    def score(outputs):
        z = standard(outputs)
        return (log_mixture(z, w_b, a_b) - log_mixture(z, w_a, a_a)).sum(axis=1)
    return score


def _applies(name: str) -> Callable:
    def applies(pair) -> str | None:
        if step_count(pair.mechanism, len(pair.direction)) < 2:
            return f"score {name!r} reads a release of several steps; {pair.mechanism.name!r} releases one"
        return None
    return applies


def _register() -> None:
    """Register the per-step scores (imported by ``attacks.scores`` on the registry's first use)."""
    from dpaudit.attacks.scores import BuiltinScore, register_score

    for name, summary in STEP_SCORES.items():
        register_score(BuiltinScore(name, summary, True,
                                    lambda pair, a, b, seed, name=name: fit_step_score(name, pair, a, b),
                                    _applies(name)))


_register()
