"""The estimator protocol: a plan fixed on calibration scores, a bound finished from counts.

An estimator is any object with a ``name`` and two methods:

- ``plan(cal_a, cal_b, settings) -> plan``: decided on calibration scores
  only; the plan has ``count(side, scores) -> numpy.ndarray``, the counts of
  one chunk of certification scores of side ``"a"`` (``S``) or ``"b"``
  (``S'``) that the bound needs (they are added up over chunks).
- ``finish(plan, counts, settings) -> estimate``: the certified record, from
  the summed :class:`~dpaudit.auditing.statistics.confidence.Counts` (``false_positives``
  are side ``a``'s counts, ``false_negatives`` side ``b``'s). The record has
  ``quantity`` (what is bounded, e.g. ``"epsilon >="``), ``value``,
  ``method``, ``confidence`` and ``to_dict()``.

:class:`~dpaudit.auditing.jobs.streaming.StreamingCertifier` iterates over the
estimators; results list every estimate (``empirical.estimates``) and the
reports show whichever ran. The built-ins (:data:`BUILTIN_ESTIMATORS`)
always run: the verdict uses ``epsilon``; ``dpaudit.audit(..., estimators=[...])``
adds others. Soundness is each estimator's own: its plan must not look at
certification scores (it never receives them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dpaudit.auditing.statistics.confidence import Counts
from dpaudit.auditing.statistics.estimators import (finish_epsilon, finish_gdp, finish_profile, plan_epsilon, plan_gdp,
                                                plan_profile)
from dpaudit.core.errors import ParameterError

__all__ = ["BUILTIN_ESTIMATORS", "CertifySettings", "CountPlan", "Estimate", "Estimator", "PROFILE_EPSILONS",
           "check_estimators"]

PROFILE_EPSILONS = tuple(np.round(np.linspace(0.0, 8.0, 33), 4))


@dataclasses.dataclass(frozen=True, slots=True)
class CertifySettings:
    """What every estimator is told: ``delta``, ``confidence``, the threshold strategy, the certification
    trials per side to come (``planned``, None when unknown), the audit's ``seed`` (of the tie-break) and
    the score's ``tail_model`` (how calibration rates place a test, ``audit.statistics.tilt``)."""

    delta: float
    confidence: float
    threshold: str = "split"
    planned: tuple[int, int] | None = None
    seed: int = 0
    tail_model: str = "calibration"


@runtime_checkable
class CountPlan(Protocol):
    """Fixed on calibration: which counts a chunk of certification scores contributes."""

    def count(self, side: str, scores: np.ndarray) -> np.ndarray:
        """Counts of one chunk of side ``"a"`` or ``"b"`` (summed over chunks)."""


@runtime_checkable
class Estimate(Protocol):
    """A certified record."""

    quantity: str
    value: float
    method: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""


@runtime_checkable
class Estimator(Protocol):
    """Plan on calibration scores, finish from counts.

    Attributes
    ----------
    name : str
        Non-empty and distinct from the built-ins' (``epsilon``, ``gdp``, ``profile``); the key of
        its record in ``result.empirical.estimates``.

    Methods
    -------
    plan(cal_a, cal_b, settings) -> CountPlan
        Decided on calibration scores only (an object with ``count(side, scores)``).
    finish(plan, counts, settings) -> Estimate
        The certified record from the summed counts.

    Notes
    -----
    The members are checked where an estimator enters (:func:`check_estimators`, called for
    ``dpaudit.audit(estimators=[...])`` and every job): a member of the wrong type is refused with a
    :class:`ParameterError` naming it.
    """

    name: str

    def plan(self, cal_a: np.ndarray, cal_b: np.ndarray, settings: CertifySettings) -> CountPlan:
        """Orientation, thresholds or whatever the bound needs, from calibration scores only."""

    def finish(self, plan: CountPlan, counts: Counts, settings: CertifySettings) -> Estimate:
        """The certified record from the counts summed over every certification chunk."""


class _Epsilon:
    name = "epsilon"

    def plan(self, cal_a, cal_b, settings):
        return plan_epsilon(cal_a, cal_b, delta=settings.delta, confidence=settings.confidence,
                            threshold=settings.threshold, planned=getattr(settings, "planned", None),
                            seed=getattr(settings, "seed", 0),
                            tail_model=getattr(settings, "tail_model", "calibration"))

    def finish(self, plan, counts, settings):
        return finish_epsilon(plan, counts, delta=settings.delta, confidence=settings.confidence,
                              threshold=settings.threshold)


class _GDP:
    name = "gdp"

    def plan(self, cal_a, cal_b, settings):
        return plan_gdp(cal_a, cal_b, confidence=settings.confidence, threshold=settings.threshold)

    def finish(self, plan, counts, settings):
        return finish_gdp(plan, counts, confidence=settings.confidence, delta=settings.delta,
                          threshold=settings.threshold)


class _Profile:
    name = "profile"

    def plan(self, cal_a, cal_b, settings):
        return plan_profile(cal_a, cal_b, confidence=settings.confidence)

    def finish(self, plan, counts, settings):
        return finish_profile(plan, counts, epsilons=PROFILE_EPSILONS, confidence=settings.confidence)


#: Run by every audit, in this order (``epsilon`` decides the verdict; the ROC is oriented like it).
BUILTIN_ESTIMATORS: tuple[Estimator, ...] = (_Epsilon(), _GDP(), _Profile())


def check_estimators(extra: Sequence[Any] | None) -> tuple[Estimator, ...]:
    """Validate user estimators (objects of the protocol, distinct names, none of a built-in's)."""
    extra = tuple(extra or ())
    names = [e.name for e in BUILTIN_ESTIMATORS]
    for estimator in extra:
        if not isinstance(estimator, Estimator) or not isinstance(estimator.name, str) or not estimator.name:
            raise ParameterError(f"estimators must be objects with a name, plan() and finish(), "
                                 f"got estimators=[..., {estimator!r}]")
        for member in ("plan", "finish"):
            if not callable(getattr(estimator, member)):
                raise ParameterError(f"estimator {estimator.name!r}: {member} must be a method, "
                                     f"got {member}={getattr(estimator, member)!r}")
        if estimator.name in names:
            raise ParameterError(f"estimator names must be distinct (built-ins: epsilon, gdp, profile), "
                                 f"got a second {estimator.name!r}")
        names.append(estimator.name)
    return extra
