"""Certification from counts, accumulated chunk by chunk (the main process never holds every score).

Every estimator fixes its orientation and thresholds on the calibration
scores (:func:`~dpaudit.auditing.statistics.estimators.plan_epsilon` and friends); after
that a certified bound needs only how many certification scores of each side
fall on each side of each threshold. :class:`StreamingCertifier` adds those
counts up one chunk at a time, together with the binned counts the figures
use (a histogram and an ROC at thresholds fixed on calibration), so memory
depends on the chunk size and the calibration part, never on the number of
certification trials. The bounds equal those of the estimators on the whole
arrays exactly: the same counts enter the same Clopper-Pearson bounds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from dpaudit.auditing.statistics.certify import (
    BUILTIN_ESTIMATORS,
    PROFILE_EPSILONS,
    CertifySettings,
    Estimate,
    Estimator,
    check_estimators,
)
from dpaudit.auditing.statistics.confidence import Counts, ThresholdPlan, check_scores
from dpaudit.auditing.statistics.hedged import PlanFamily
from dpaudit.auditing.statistics.tilt import TAIL_MODELS
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice

__all__ = ["ArraySource", "Certification", "PROFILE_EPSILONS", "ScoreSource", "StreamingCertifier",
           "certify_source"]

_SIDES = ("a", "b")


@dataclasses.dataclass(frozen=True, slots=True)
class Certification:
    """What certification of one canary position produced (frozen).

    Attributes
    ----------
    estimates : mapping
        Estimator name -> its certified record, in the order the estimators ran (the built-ins first).
    distributions : mapping
        The figures' ROC and histogram (binned counts, not certified).
    trials : mapping
        Certification trials per side.
    """

    estimates: Mapping[str, Estimate]
    distributions: Mapping[str, Any]
    trials: Mapping[str, int]

    @property
    def epsilon(self) -> Estimate:
        """The epsilon bound (the verdict uses it)."""
        return self.estimates["epsilon"]

    @property
    def gdp(self) -> Estimate:
        return self.estimates["gdp"]

    @property
    def profile(self) -> Estimate:
        return self.estimates["profile"]


class ScoreSource(Protocol):
    """Scores of one canary position: calibration arrays, certification scores in chunks."""

    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        """Calibration scores on ``S`` and ``S'``."""

    def chunks(self, side: str) -> Iterable[np.ndarray]:
        """Certification scores of side ``"a"`` (``S``) or ``"b"`` (``S'``), one chunk at a time."""


class ArraySource:
    """A :class:`ScoreSource` over arrays already in memory."""

    def __init__(self, cal_a: np.ndarray, cal_b: np.ndarray, cert_a: np.ndarray, cert_b: np.ndarray) -> None:
        self._calibration = (np.asarray(cal_a, dtype=float), np.asarray(cal_b, dtype=float))
        self._certification = {"a": np.asarray(cert_a, dtype=float), "b": np.asarray(cert_b, dtype=float)}

    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        return self._calibration

    def chunks(self, side: str) -> Iterator[np.ndarray]:
        yield self._certification[side]

    def planned(self) -> tuple[int, int]:
        """Certification trials per side."""
        return self._certification["a"].size, self._certification["b"].size


class StreamingCertifier:
    """Counts at thresholds fixed on calibration, added up over certification chunks.

    Parameters
    ----------
    cal_a, cal_b : numpy.ndarray
        Calibration scores on ``S`` and ``S'`` (they choose every threshold).
    delta, confidence : float
        Of the epsilon bound (each estimator holds at ``confidence``).
    threshold : {"split", "union"}
        Threshold strategy of the epsilon and mu bounds.
    bins, points : int
        Histogram bins and ROC points of the figures.
    estimators : sequence of Estimator, optional
        Estimators run after the built-ins (``audit.statistics.certify``).
    planned : (int, int), optional
        Certification trials per side to come (the epsilon test is placed for that budget).
    seed : int
        The audit's seed (of the tie-break uniforms, ``audit.statistics.confidence.tie_uniforms``).
    tail_model : {"calibration", "tilt", "hedged"}
        How calibration rates place the epsilon test (``audit.statistics.tilt``; the score's
        ``tail_model``, ``attacks.score_protocol.fitted_tail_model``).
    """

    def __init__(self, cal_a: np.ndarray, cal_b: np.ndarray, *, delta: float, confidence: float,
                 threshold: str = "split", bins: int = 60, points: int = 200,
                 estimators: Sequence[Estimator] = (), planned: tuple[int, int] | None = None,
                 seed: int = 0, tail_model: str = "calibration") -> None:
        cal_a, cal_b = check_scores("calibration_a", cal_a), check_scores("calibration_b", cal_b)
        self.settings = CertifySettings(delta=delta, confidence=confidence, threshold=threshold, planned=planned,
                                        seed=seed, tail_model=check_choice("tail_model", tail_model, TAIL_MODELS))
        self.estimators = BUILTIN_ESTIMATORS + check_estimators(estimators)
        self.plans = {e.name: e.plan(cal_a, cal_b, self.settings) for e in self.estimators}
        pooled = np.concatenate([cal_a, cal_b])
        low, high = np.quantile(pooled, [0.0005, 0.9995])
        self.edges = np.linspace(low, high, bins + 1) if high > low else np.linspace(low - 1, low + 1, bins + 1)
        # the ROC is oriented like the epsilon bound; its thresholds are calibration quantiles, dense in
        # both tails so that low false-positive rates (1e-3 and below) are resolved
        self.sign = self.plans["epsilon"].sign
        tails = np.geomspace(1e-6, 0.5, points // 4)
        levels = np.concatenate([np.linspace(0, 1, points // 2), tails, 1 - tails])
        self.roc_thresholds = np.unique(np.quantile(self.sign * pooled, np.clip(levels, 0, 1)))
        self.counts: dict[str, dict[str, Any]] = {name: {side: 0.0 for side in _SIDES} for name in self.plans}
        self.histogram = {side: np.zeros(bins, dtype=np.int64) for side in _SIDES}
        self.above = {side: np.zeros(self.roc_thresholds.size, dtype=np.int64) for side in _SIDES}
        self.trials = {side: 0 for side in _SIDES}
        self.chunks = {side: 0 for side in _SIDES}

    def add(self, side: str, scores: np.ndarray) -> None:
        """Count one chunk of certification scores of side ``"a"`` or ``"b"``."""
        if side not in _SIDES:
            raise ParameterError(f"side must be 'a' or 'b', got side={side!r}")
        chunk = check_scores(f"certification scores ({side})", scores)
        number = self.chunks[side]  # threshold plans draw each chunk's own tie-break uniforms
        for name, plan in self.plans.items():
            counts = plan.count(side, chunk, number) if isinstance(plan, (ThresholdPlan, PlanFamily)) \
                else plan.count(side, chunk)
            self.counts[name][side] = self.counts[name][side] + np.asarray(counts, dtype=float)
        self.chunks[side] += 1
        self.histogram[side] += np.histogram(chunk, self.edges)[0]
        ordered = np.sort(self.sign * chunk)
        self.above[side] += ordered.size - np.searchsorted(ordered, self.roc_thresholds, side="left")
        self.trials[side] += int(chunk.size)

    def _roc(self) -> dict[str, Any]:
        fpr, tpr = self.above["a"] / self.trials["a"], self.above["b"] / self.trials["b"]
        return {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "orientation": self.plans["epsilon"].orientation,
                **_roc_summary(fpr, tpr)}

    def _counts(self, name: str) -> Counts:
        return Counts(self.counts[name]["a"], self.counts[name]["b"], self.trials["a"], self.trials["b"])

    def finish(self) -> Certification:
        """Every estimator's certified record and the figures' ``distributions``."""
        for side in _SIDES:
            if self.trials[side] == 0:
                raise ParameterError(f"no certification scores for side {side!r}")
        estimates = {e.name: e.finish(self.plans[e.name], self._counts(e.name), self.settings)
                     for e in self.estimators}
        distributions = {
            "roc": self._roc(),
            "histogram": {"edges": self.edges.tolist(), "a": self.histogram["a"].tolist(),
                          "b": self.histogram["b"].tolist()},
        }
        return Certification(estimates=estimates, distributions=distributions, trials=dict(self.trials))


def _roc_summary(fpr: np.ndarray, tpr: np.ndarray, at: float = 1e-3) -> dict[str, float]:
    """Area under the (binned) ROC by the trapezoid rule, and the largest TPR at FPR <= ``at``.

    Empirical figures of the certification trials, for reading the report;
    they are not certified.
    """
    order = np.lexsort((tpr, fpr))
    x = np.concatenate([[0.0], fpr[order], [1.0]])
    y = np.concatenate([[0.0], tpr[order], [1.0]])
    area = float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))
    low = tpr[fpr <= at]
    return {"auc": area, "tpr_at_fpr": float(low.max()) if low.size else 0.0, "fpr_level": at}


def certify_source(source: ScoreSource, *, delta: float, confidence: float, threshold: str,
                   estimators: Sequence[Estimator] = (), seed: int = 0) -> Certification:
    """:meth:`StreamingCertifier.finish` over every chunk of ``source``.

    A source with ``planned() -> (m_a, m_b)`` (the certification trials per side it will yield) has its
    epsilon test placed for that budget; one with ``tail_model() -> str`` has it placed that way
    (:class:`StreamingCertifier`).
    """
    planned, tail_model = getattr(source, "planned", None), getattr(source, "tail_model", None)
    certifier = StreamingCertifier(*source.calibration(), delta=delta, confidence=confidence, threshold=threshold,
                                   estimators=estimators, planned=planned() if planned else None, seed=seed,
                                   tail_model=tail_model() if tail_model else "calibration")
    for side in _SIDES:
        for chunk in source.chunks(side):
            certifier.add(side, chunk)
    return certifier.finish()
