"""The records the epsilon, mu and delta estimators certify (``audit.statistics.estimators``).

Each is a frozen dataclass whose ``value`` is the certified figure and whose
``to_dict`` is what audit results store; ``quantity`` says what the figure
bounds.

References
----------
docs/theory.md 3 (lower bounds from an audit), 7 (tests that split an atom, placement).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["EpsilonBound", "GDPBound", "ProfileBound"]

@dataclasses.dataclass(frozen=True, slots=True)
class EpsilonBound:
    """A certified lower bound on epsilon at ``delta``."""

    epsilon_lower_bound: float
    delta: float
    confidence: float
    method: str
    threshold: float
    orientation: str
    direction: str
    false_positive_rate_upper: float
    false_negative_rate_upper: float
    trials: dict[str, int]
    failure_split: dict[str, Any]
    #: method "conditional/split" only: the bounds the certificate is made of (``audit.statistics.conditional``):
    #: the odds ratio's lower limit and the big rate's bounds and the small rate's lower bound (the
    #: rate uppers above are then Clopper-Pearson at ``per_rate``, for reading, not what certified)
    conditional: dict[str, float] | None = None
    #: the share of the boundary score ``threshold`` the test counts on the ``S'`` side (docs/theory.md 7;
    #: 1: the test ``score >= threshold``), the rest of the test fixed on calibration with the threshold
    tie_fraction: float = 1.0
    #: how the calibration scores placed the test (``ThresholdPlan.placement``): read from their counts at
    #: a planning level, or from the exponential tilt fitted to them (docs/theory.md 7)
    placement: str = "calibration"
    #: a hedged placement only (``audit.statistics.hedged``): every test certified together, each at
    #: ``failure_split["per_test"]``, with its placement and bound; the record above is the largest's
    hedge: list[dict[str, Any]] | None = None

    quantity = "epsilon >="

    @property
    def value(self) -> float:
        return self.epsilon_lower_bound

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class GDPBound:
    """A certified lower bound on mu (mu-GDP), and the epsilon it implies under that model."""

    mu_lower_bound: float
    confidence: float
    method: str
    threshold: float
    orientation: str
    trials: dict[str, int]
    failure_split: dict[str, Any]
    model_based_epsilon: float | None
    model_based_delta: float | None

    quantity = "mu >= (mu-GDP)"

    @property
    def value(self) -> float:
        return self.mu_lower_bound

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, slots=True)
class ProfileBound:
    """Certified lower bounds ``delta_lb(eps)`` on an epsilon grid, simultaneous over the grid."""

    epsilons: tuple[float, ...]
    delta_lower_bounds: tuple[float, ...]
    confidence: float
    method: str
    orientation: str
    trials: dict[str, int]
    failure_split: dict[str, Any]

    quantity = "delta >= at the smallest epsilon of the grid"

    @property
    def value(self) -> float:
        return self.delta_lower_bounds[0]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
