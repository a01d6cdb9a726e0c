"""One-run audits in f-DP (Mahloujifar, Melis, Chaudhuri 2024), and the choice of the number of guesses.

The game is that of :mod:`dpaudit.auditing.statistics.one_run`: ``m`` canaries, each
included with probability 1/2 independently before the run; the attacker
guesses inclusion for some ``r`` of them and abstains on the rest; ``v``
guesses are right. Steinke et al. bound the chance of ``v`` right guesses
under ``(eps, delta)``-DP; Mahloujifar et al. bound it under ``f``-DP for a
tradeoff function ``f``, which follows the whole tradeoff curve instead of
one point of it and certifies more from the same counts.

Their test, for the Gaussian tradeoff family ``f_mu`` (mu-GDP), at failure
probability ``tau``: start from ``r_v = tau v / m`` and ``h_v = tau (r - v) / m``
and recurse downwards, for ``i = v - 1, ..., 0``::

    h_i = max(h_{i+1}, f_mu^-(r_{i+1}))
    r_i = r_{i+1} + i / (r - i) * (h_i - h_{i+1})

where ``f_mu^-(x) = Phi(Phi^-1(x) - mu)`` inverts the blow-up ``x -> Phi(Phi^-1(x)
+ mu)`` of ``f_mu``. If ``r_0 + h_0 > r / m``, no mu-GDP mechanism gives
``v`` or more right guesses with probability ``tau``: mu-GDP is rejected at
level ``tau``. Rejection is monotone in mu (a larger mu blows up more), so
the certified ``mu`` is the supremum of the rejected ones, found on a grid
refined by bisection and rounded down; its epsilon at ``delta`` is then the
mu-GDP curve's, a lower bound on the epsilon of every mechanism whose
tradeoff curve is Gaussian-shaped (the stated family; docs/theory.md 3.3).

Choosing ``r``: the attacker guesses "included" for the ``r/2`` highest
scores and "excluded" for the ``r/2`` lowest. ``guesses="union"`` (the
default) tries every count of a fixed geometric grid, each at failure
probability ``beta / len(grid)`` (a union bound), and reports the best;
``guesses="calibrate"`` chooses the count on a random calibration part of
the canaries and certifies on the others at the full level; an integer fixes
it in advance; ``"auto"`` (the default) calibrates when there are enough
canaries.

References
----------
Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run",
arXiv:2410.22235, 2024 (the recursion above, their Algorithm for the
empirical privacy of a guessing game with abstention).
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run",
NeurIPS 2023.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from dpaudit.auditing.statistics.confidence import check_confidence, check_delta
from dpaudit.auditing.statistics.one_run import largest_rejected_mu, one_run_epsilon
from dpaudit.auditing.statistics.one_run_tail import tail_mu_lower_bound
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int

__all__ = ["GUESS_RULES", "METHODS", "OneRunAudit", "fdp_rejects", "fdp_mu_lower_bound", "one_run_audit",
           "guess_grid"]

#: Mahloujifar et al.'s f-DP test, Steinke et al.'s (eps, delta) test, Xiang et al.'s tail bound (audit.statistics.one_run_tail)
METHODS = ("fdp", "steinke", "tail")
GUESS_RULES = ("auto", "union", "calibrate")
#: ``guesses="auto"`` calibrates from this many canaries on (more certified, measured: 6.4 against 5.4 at
#: 10^4 canaries of a mu = 2 Gaussian score), and pays by the union bound below it (a calibration part
#: of a few hundred canaries chooses poorly).
AUTO_CALIBRATE_FROM = 1000


def fdp_rejects(mu: np.ndarray, *, canaries: int, guesses: int, correct: int, failure: float) -> np.ndarray:
    """Whether ``correct`` right guesses out of ``guesses`` reject mu-GDP at level ``failure`` (per mu)."""
    mu = np.atleast_1d(np.asarray(mu, dtype=float))
    if correct == 0 or guesses == 0:
        return np.zeros(mu.shape, dtype=bool)
    r = np.full(mu.shape, failure * correct / canaries)
    h = np.full(mu.shape, failure * (guesses - correct) / canaries)
    for i in range(correct - 1, -1, -1):
        with np.errstate(divide="ignore", invalid="ignore"):
            inverse = ndtr(ndtri(np.clip(r, 0.0, 1.0)) - mu)
        h_next = np.maximum(h, inverse)
        r = r + (i / (guesses - i)) * (h_next - h)
        h = h_next
    return r + h > guesses / canaries


def fdp_mu_lower_bound(*, canaries: int, guesses: int, correct: int, failure: float,
                       beat: float = 0.0) -> float:
    """The largest mu that the counts reject at level ``failure`` (0 if none), rounded down.

    One recursion per round over a vector of mu values: mu = 0 alone first
    (most counts under no leakage stop there), then a doubling grid, then
    two rounds of 16 points between the last rejected and the first kept
    value. With ``beat``, counts that do not reject ``beat`` return 0 at
    once (the caller already has a bound that large).
    """
    return largest_rejected_mu(
        lambda mu: fdp_rejects(mu, canaries=canaries, guesses=guesses, correct=correct, failure=failure), beat=beat)


@dataclasses.dataclass(frozen=True, slots=True)
class OneRunAudit:
    """The certified result of a one-run audit."""

    epsilon_lower_bound: float
    mu_lower_bound: float | None
    delta: float
    confidence: float
    method: str
    canaries: int
    guesses: int
    correct: int
    guess_rule: str
    failure_split: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def guess_grid(canaries: int) -> list[int]:
    """Even guess counts from 20 to ``canaries`` on a geometric grid (at most 16 values)."""
    top = canaries - canaries % 2
    if top < 2:
        return [top] if top else []
    values = np.unique((np.geomspace(min(20, top), top, 16) // 2 * 2).astype(int))
    return [int(v) for v in values if v >= 2]


def _count(order: np.ndarray, truth: np.ndarray, guesses: int) -> int:
    """Right guesses when the top ``guesses/2`` are called included and the bottom ones excluded."""
    half = guesses // 2
    positive = truth[order[order.size - (guesses - half):]].sum() if guesses - half else 0
    return int(positive + (~truth[order[:half]]).sum())


def _certify(method: str, *, canaries: int, guesses: int, correct: int, delta: float,
             failure: float, beat_mu: float = 0.0) -> tuple[float, float | None]:
    if method in ("fdp", "tail"):
        lower = fdp_mu_lower_bound if method == "fdp" else tail_mu_lower_bound
        mu = lower(canaries=canaries, guesses=guesses, correct=correct, failure=failure, beat=beat_mu)
        if mu == 0:
            return 0.0, mu
        if delta == 0:
            return math.inf, mu  # mu-GDP with mu > 0 is not (eps, 0)-DP for any finite eps
        # gaussian_epsilon bisects to float resolution and returns the upper end: step below the root
        eps = float(gaussian_epsilon(delta, mu))
        return max(eps * (1 - 1e-12) - 1e-15, 0.0), mu
    bound = one_run_epsilon(canaries=canaries, guesses=guesses, correct=correct, delta=delta,
                            confidence=1 - failure)
    return bound.epsilon_lower_bound, None


def one_run_audit(scores, included, *, delta: float, confidence: float = 0.95, method: str = "fdp",
                  guesses: int | str = "auto", calibration_fraction: float = 0.2, seed: int = 0) -> OneRunAudit:
    """Certify epsilon from the scores of one run's canaries and their inclusion bits.

    Parameters
    ----------
    scores : array_like
        One score per canary, larger for included canaries.
    included : array_like
        The inclusion bits (1 included, 0 not), drawn independently with
        probability 1/2 before the run.
    delta : float
        Of the reported epsilon.
    method : {"fdp", "steinke", "tail"}
        Mahloujifar et al.'s f-DP test in the Gaussian family (default),
        Steinke et al.'s (eps, delta) test, or Xiang et al.'s tail bound in the
        Gaussian family (``audit.statistics.one_run_tail``).
    guesses : {"auto", "union", "calibrate"} or int
        How many guesses to make (module docstring); ``"auto"`` calibrates
        from :data:`AUTO_CALIBRATE_FROM` canaries on and uses the union bound below.

    Returns
    -------
    OneRunAudit
    """
    scores = np.asarray(scores, dtype=float)
    truth = np.asarray(included)
    if scores.ndim != 1 or truth.shape != scores.shape or scores.size < 2:
        raise ParameterError(f"scores and included must be 1-D of equal length >= 2, got shapes {scores.shape} "
                             f"and {truth.shape}")
    if not np.all(np.isfinite(scores)):
        raise ParameterError("scores must be finite")
    if not np.all((truth == 0) | (truth == 1)):
        raise ParameterError("included must hold 0 (not included) or 1 (included) for every canary")
    truth = truth.astype(bool)
    delta, beta = check_delta(delta), 1 - check_confidence(confidence)
    check_choice("method", method, METHODS)
    if isinstance(guesses, str):
        check_choice("guesses", guesses, GUESS_RULES)
        if guesses == "auto":
            guesses = "calibrate" if scores.size >= AUTO_CALIBRATE_FROM else "union"
    else:
        check_int("guesses", guesses, minimum=1, maximum=scores.size)
    if guesses == "calibrate":
        return _calibrated(scores, truth, delta=delta, beta=beta, method=method, fraction=calibration_fraction,
                           seed=seed)
    counts = [guesses] if isinstance(guesses, int) else guess_grid(scores.size)
    failure = beta / len(counts)
    order = np.argsort(scores, kind="stable")
    best = None
    for count in counts:
        correct = _count(order, truth, count)
        eps, mu = _certify(method, canaries=scores.size, guesses=count, correct=correct, delta=delta,
                           failure=failure, beat_mu=best[1] if best and best[1] else 0.0)
        if best is None or eps > best[0]:
            best = (eps, mu, count, correct)
    eps, mu, count, correct = best
    rule = "fixed" if isinstance(guesses, int) else "union"
    return OneRunAudit(eps, mu, delta, 1 - beta, method, int(scores.size), count, correct, rule,
                       {"beta": beta, "guess_counts_tried": len(counts), "per_count": failure})


def _calibrated(scores, truth, *, delta, beta, method, fraction, seed) -> OneRunAudit:
    """Choose the guess count on a random part of the canaries, certify on the rest at the full level."""
    if not 0 < fraction < 1:
        raise ParameterError(f"calibration_fraction must be in (0, 1), got calibration_fraction={fraction}")
    permutation = np.random.default_rng(seed).permutation(scores.size)
    cut = int(round(fraction * scores.size))
    if cut < 2 or scores.size - cut < 2:
        raise ParameterError(f"calibration_fraction={fraction} leaves too few canaries on one side")
    cal, cert = permutation[:cut], permutation[cut:]
    cal_order = np.argsort(scores[cal], kind="stable")
    best_fraction, best_eps, best_mu = None, -1.0, 0.0
    for count in guess_grid(cal.size):
        correct = _count(cal_order, truth[cal], count)
        # counts that cannot beat the best mu so far stop at once (they would not be chosen either)
        eps, mu = _certify(method, canaries=cal.size, guesses=count, correct=correct, delta=delta, failure=beta,
                           beat_mu=best_mu)
        if eps > best_eps:
            best_fraction, best_eps, best_mu = count / cal.size, eps, mu or 0.0
    count = max(2, int(round((best_fraction or 1.0) * cert.size)) // 2 * 2)
    correct = _count(np.argsort(scores[cert], kind="stable"), truth[cert], count)
    eps, mu = _certify(method, canaries=cert.size, guesses=count, correct=correct, delta=delta, failure=beta)
    return OneRunAudit(eps, mu, delta, 1 - beta, method, int(cert.size), count, correct, "calibrate",
                       {"beta": beta, "calibration_canaries": int(cal.size)})
