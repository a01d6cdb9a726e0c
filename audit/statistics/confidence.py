"""Clopper-Pearson bounds and the calibration/certification split.

Every certified rate in :mod:`audit.statistics.estimators` and
:mod:`audit.statistics.conditional` goes through :func:`cp_upper` and
:func:`cp_lower` (one implementation, :func:`clopper_pearson`), so the
failure probability is paid for by one rule.

References
----------
Clopper & Pearson 1934 (exact binomial intervals): with ``k`` of ``n``, the
one-sided lower bound at level ``1 - b`` is the ``b``-quantile of
``Beta(k, n - k + 1)`` (``betaincinv``) and the upper bound the upper
``b``-quantile of ``Beta(k + 1, n - k)`` (``betainccinv``, exact where ``b`` is
far below float precision of ``1 - b``): what statsmodels'
``proportion_confint(method="beta")`` computes as the ends of the two-sided
interval at ``alpha = 2 b``, bit for bit (tests/attacks/test_classifiers.py),
without importing statsmodels and pandas (about a second of a process's
first audit).
"""

from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np
from scipy.special import betainccinv, betaincinv

from dpaudit.core.errors import ParameterError

__all__ = [
    "Counts",
    "ORIENTATIONS",
    "TIE_BREAK_KEY",
    "ThresholdPlan",
    "check_confidence",
    "check_delta",
    "check_scores",
    "clopper_pearson",
    "cp_lower",
    "cp_upper",
    "error_counts",
    "split_calibration",
    "tie_uniforms",
]


ORIENTATIONS = ("larger under S'", "smaller under S'")


#: The first entry of the spawn key of the tie-break uniforms: no chunk of trials uses it (audit.jobs.runner)
TIE_BREAK_KEY = 0x7469


def tie_uniforms(seed: int, side: str, chunk: int, size: int) -> np.ndarray:
    """The uniforms ``U`` of the randomised tie-break of one certification chunk (docs/theory.md 7).

    Drawn from ``SeedSequence(seed, spawn_key=(TIE_BREAK_KEY, side, chunk))``: a stream of the audit's seed
    that no mechanism draws from, so ``U`` is independent of every output; one per trial, in trial order.
    """
    key = (TIE_BREAK_KEY, 0 if side == "a" else 1, int(chunk))
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=key)).random(size)


@dataclasses.dataclass(frozen=True)
class ThresholdPlan:
    """What calibration fixed before any certification score is seen: orientation and tests.

    A test is a threshold ``t`` and a tie fraction ``g`` (docs/theory.md 7): a
    trial with oriented score ``s`` is on the ``S'`` side when ``s > t``, or
    ``s == t`` and its uniform ``U < g`` (:func:`tie_uniforms`, seeded by
    ``tie_seed``, independent of the outputs); ``g = 1`` is the test
    ``s >= t``. Certification then needs only the counts :meth:`count`
    returns, so they can be accumulated chunk by chunk
    (:mod:`dpaudit.auditing.jobs.streaming`) and the result equals that of the
    whole arrays.
    """

    sign: float
    thresholds: np.ndarray
    calibration: dict[str, int]
    #: how the epsilon bound is certified: "clopper-pearson" (each rate on its own) or "conditional"
    #: (the ratio of the two rates in one step, ``audit.statistics.conditional``; one threshold)
    method: str = "clopper-pearson"
    #: for "conditional": the region of the ratio, 0 ``score >= t`` (likely under S'), 1 ``score < t``
    direction: int = 0
    #: the tie fraction ``g`` of each threshold (None: 1 for each, the deterministic tests ``s >= t``)
    tie_fractions: np.ndarray | None = None
    #: the seed of the tie-break uniforms (the audit's seed)
    tie_seed: int = 0
    #: how calibration placed the test: "calibration (level L)", its counts at their upper bounds at ``L``
    #: (``audit.statistics.thresholds.PLANNING_LEVELS``), or "tilt" (``audit.statistics.tilt``)
    placement: str = "calibration"

    @property
    def orientation(self) -> str:
        return ORIENTATIONS[0] if self.sign > 0 else ORIENTATIONS[1]

    @property
    def fractions(self) -> np.ndarray:
        """The tie fraction of each threshold (1 where none was set)."""
        if self.tie_fractions is None:
            return np.ones(np.shape(self.thresholds))
        return np.asarray(self.tie_fractions, dtype=float)

    def count(self, side: str, scores: np.ndarray, chunk: int = 0) -> np.ndarray:
        """False positives (side ``"a"``: tests that fire) or false negatives (side ``"b"``: tests that do not).

        ``chunk`` numbers the chunks of one side (0, 1, ...): it selects the tie-break uniforms of those
        trials, so every trial of the audit has its own.
        """
        oriented = self.sign * np.asarray(scores, dtype=float)
        ordered = np.sort(oriented)
        above = ordered.size - np.searchsorted(ordered, self.thresholds, side="right")
        fractions = self.fractions
        split = np.flatnonzero(fractions < 1)
        fires = (ordered.size - np.searchsorted(ordered, self.thresholds, side="left")).astype(float)
        if split.size:
            uniforms = tie_uniforms(self.tie_seed, side, chunk, oriented.size)
            for k in split:  # one row per split threshold (a split plan has one)
                tied = oriented == self.thresholds[k]
                fires[k] = above[k] + np.count_nonzero(tied & (uniforms < fractions[k]))
        return fires if side == "a" else oriented.size - fires


@dataclasses.dataclass(frozen=True)
class Counts:
    """Error counts at a plan's thresholds and the number of certification trials per side."""

    false_positives: np.ndarray
    false_negatives: np.ndarray
    trials_a: int
    trials_b: int

    @classmethod
    def of(cls, plan: ThresholdPlan, cert_a: np.ndarray, cert_b: np.ndarray) -> "Counts":
        return cls(plan.count("a", cert_a), plan.count("b", cert_b), int(cert_a.size), int(cert_b.size))

    def trials(self, plan: ThresholdPlan) -> dict[str, int]:
        return {"a": self.trials_a, "b": self.trials_b, **plan.calibration}


def clopper_pearson(counts, trials, failure: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds ``(lower, upper)`` on proportions ``counts / trials``.

    Each bound on its own fails with probability at most ``failure``. ``lower`` is 0 where
    ``counts`` is 0 and ``upper`` is 1 where ``counts`` reaches ``trials`` (also for ``trials``
    0: nothing is known). ``trials`` may be an array of the shape of ``counts``.
    """
    return cp_lower(counts, trials, failure), cp_upper(counts, trials, failure)


class _InverseBetaMemo:
    """Values of one inverse beta function already computed, per ``(trials, failure)``.

    The threshold searches evaluate the Clopper-Pearson bounds of the same counts at the same number of trials
    and level again and again (every score of a portfolio, every planned test, every chunk): in the family
    soundness audits four of five evaluations repeat one already made in the process. A memo keeps, for each
    ``(trials, failure)``, the counts seen (sorted) beside their values; a call evaluates only the counts it has
    not seen, elementwise with the same function, so every value is the one the direct evaluation gives, bit for
    bit. It holds at most :attr:`KEYS` pairs (the least recently used goes first) and :attr:`SIZE` counts a pair
    (a full pair still answers what it holds; what it lacks is computed and not kept).
    """

    KEYS = 64
    SIZE = 200_000
    SMALLEST = 8  #: fewer counts than this are evaluated directly (the lookup would cost more)

    def __init__(self, inverse):
        self.inverse = inverse
        self.tables: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}
        self.lock = threading.Lock()  # audits on joblib's threads share the memo

    def __call__(self, counts: np.ndarray, trials: float, failure: float) -> np.ndarray:
        key = (float(trials), float(failure))
        flat = counts.ravel()
        with self.lock:
            known, values = self.tables.pop(key, (np.empty(0), np.empty(0)))
            if known.size:
                self.tables[key] = known, values  # most recently used last
        at = np.minimum(np.searchsorted(known, flat), max(known.size - 1, 0))
        hit = known[at] == flat if known.size else np.zeros(flat.size, dtype=bool)
        out = np.empty(flat.size)
        out[hit] = values[at[hit]]
        if not hit.all():
            missing = np.unique(flat[~hit])
            fresh = self._evaluate(missing, trials, failure)
            out[~hit] = fresh[np.searchsorted(missing, flat[~hit])]
            if known.size + missing.size <= self.SIZE:
                places = np.searchsorted(known, missing)  # both sorted, none in common: a merge, not a sort
                merged = np.insert(known, places, missing), np.insert(values, places, fresh)
                with self.lock:
                    self.tables[key] = merged
                    while len(self.tables) > self.KEYS:
                        del self.tables[next(iter(self.tables))]
        return out.reshape(counts.shape)

    def _evaluate(self, counts: np.ndarray, trials: float, failure: float) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.inverse(counts, trials, failure), dtype=float)


def _upper(counts, trials, failure):
    return betainccinv(counts + 1, trials - counts, failure)


def _lower(counts, trials, failure):
    return betaincinv(counts, trials - counts + 1, failure)


_UPPER = _InverseBetaMemo(_upper)
_LOWER = _InverseBetaMemo(_lower)


def _inverse_beta(memo: _InverseBetaMemo, counts, trials, failure: float) -> np.ndarray:
    """``memo.inverse`` at every count: through the memo where ``trials`` is one number, else directly."""
    counts = np.asarray(counts, dtype=float)
    trials = np.asarray(trials, dtype=float)
    if trials.size == 1 and counts.size >= _InverseBetaMemo.SMALLEST:
        return memo(counts, trials.item(), failure)
    return memo._evaluate(counts, trials, failure)


def cp_upper(counts, trials, failure: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bounds on proportions, each failing w.p. <= ``failure`` (1 where
    ``counts`` reaches ``trials``). Only this side's inverse beta is computed, and each value once a process
    (:class:`_InverseBetaMemo`): the threshold searches call it on thousands of candidates at a time."""
    counts = np.asarray(counts, dtype=float)
    trials = np.asarray(trials, dtype=float)
    upper = _inverse_beta(_UPPER, counts, trials, failure)
    return np.where(counts >= trials, 1.0, np.nan_to_num(upper, nan=1.0))


def cp_lower(counts, trials, failure: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bounds on proportions, each failing w.p. <= ``failure`` (0 where
    ``counts`` is 0)."""
    counts = np.asarray(counts, dtype=float)
    trials = np.asarray(trials, dtype=float)
    lower = _inverse_beta(_LOWER, counts, trials, failure)
    return np.where(counts <= 0, 0.0, np.nan_to_num(lower, nan=0.0))


def error_counts(scores_a: np.ndarray, scores_b: np.ndarray, thresholds) -> tuple[np.ndarray, np.ndarray]:
    """False positives ``#{a >= t}`` and false negatives ``#{b < t}`` for each threshold ``t``."""
    sorted_a = np.sort(scores_a)
    sorted_b = np.sort(scores_b)
    thresholds = np.asarray(thresholds, dtype=float)
    false_positives = sorted_a.size - np.searchsorted(sorted_a, thresholds, side="left")
    false_negatives = np.searchsorted(sorted_b, thresholds, side="left")
    return false_positives.astype(float), false_negatives.astype(float)


def check_scores(name: str, scores) -> np.ndarray:
    """A non-empty, finite, one-dimensional float array, or a ParameterError naming ``name``."""
    try:
        array = np.asarray(scores, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be numbers, got {type(scores).__name__}") from None
    if array.ndim != 1:
        raise ParameterError(f"{name} must be one score per trial (1-D), got shape {array.shape}")
    if array.size == 0:
        raise ParameterError(f"{name} must not be empty")
    bad = ~np.isfinite(array)
    if bad.any():
        raise ParameterError(f"{name} must be finite, got {int(bad.sum())} NaN or infinite scores")
    return array


def check_delta(delta) -> float:
    """``delta`` in [0, 1)."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not 0 <= delta < 1:
        raise ParameterError(f"delta must be in [0, 1), got delta={delta!r}")
    return float(delta)


def check_confidence(confidence) -> float:
    """``confidence`` in (0, 1)."""
    if (isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating))
            or not 0 < confidence < 1):
        raise ParameterError(f"confidence must be in (0, 1), got confidence={confidence!r}")
    return float(confidence)


def split_calibration(scores_a: np.ndarray, scores_b: np.ndarray, fraction: float,
                      seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Randomly split both arrays into calibration and certification parts.

    Returns ``(calibration_a, calibration_b, certify_a, certify_b)``. The
    permutation is seeded, so the split is reproducible; the certification
    parts are never used to choose anything.
    """
    if not 0 < fraction < 1:
        raise ParameterError(f"calibration_fraction must be in (0, 1), got calibration_fraction={fraction}")
    rng = np.random.default_rng(seed)
    parts = []
    for scores in (scores_a, scores_b):
        order = rng.permutation(scores.size)
        cut = int(math.floor(fraction * scores.size))
        if cut < 1 or cut >= scores.size:
            raise ParameterError(
                f"calibration_fraction={fraction} leaves an empty part of {scores.size} scores")
        parts.append((scores[order[:cut]], scores[order[cut:]]))
    (cal_a, cert_a), (cal_b, cert_b) = parts
    return cal_a, cal_b, cert_a, cert_b
