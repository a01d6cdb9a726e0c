"""Audit every zoo variant and report caught or not."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from dpaudit.auditing.checks.api import audit
from dpaudit.auditing.checks.zoo.realworld import REAL_WORLD, UserCodeVariant
from dpaudit.auditing.checks.zoo.statuses import (
    BEYOND_REACH,
    CAUGHT,
    FAILURES,
    FALSE_ALARM,
    MISSED,
    PASSED,
    WITHIN_CLAIM,
)
from dpaudit.auditing.checks.zoo.variants import VARIANTS, Variant, claimed_epsilon

__all__ = ["ZooResult", "run_zoo"]


@dataclasses.dataclass(frozen=True, slots=True)
class ZooResult:
    """The audit of one zoo variant (the JSON keys of ``dpaudit zoo``)."""

    name: str
    buggy: bool
    caught: bool
    epsilon_lower_bound: float
    claimed_epsilon: float
    true_epsilon: float | None
    delta: float
    trials: int
    seconds: float
    description: str
    ceiling: float | None = None  # the most this budget can certify, for bugs known to be out of its reach

    @property
    def exceeds_claim(self) -> bool:
        """Whether the variant's true epsilon exceeds its claim (assumed when the true value is unknown)."""
        return self.buggy and (self.true_epsilon is None or self.true_epsilon > self.claimed_epsilon)

    @property
    def status(self) -> str:
        """``caught``, ``missed``, ``within-claim`` (a bug no audit can flag on this instance),
        ``beyond-reach`` (its true epsilon exceeds the claim, but the claim lies above the most this
        budget can certify), ``false-alarm`` or ``passed``."""
        if not self.buggy:
            return FALSE_ALARM if self.caught else PASSED
        if self.caught:
            return CAUGHT
        if not self.exceeds_claim:
            return WITHIN_CLAIM
        return BEYOND_REACH if self.ceiling is not None and self.ceiling <= self.claimed_epsilon else MISSED

    @property
    def failed(self) -> bool:
        """A bug that exceeds its claim went uncaught, or a correct variant was flagged."""
        return self.status in FAILURES

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "exceeds_claim": self.exceeds_claim, "status": self.status}


def run_zoo(*, trials: int | None = None, seed: int = 0, confidence: float = 0.95,
            variants: list[Variant] | None = None) -> list[ZooResult]:
    """Audit each variant (``trials`` per dataset, default each variant's own); ``caught`` = certified violation.

    The default runs the zoo of :data:`VARIANTS` and the real-world bugs of :data:`REAL_WORLD`.
    """
    results = []
    for variant in variants or [*VARIANTS, *REAL_WORLD]:
        start = time.perf_counter()
        if isinstance(variant, UserCodeVariant):
            results.append(_run_user_code(variant, trials or variant.trials, seed, confidence, start))
            continue
        pair, claim_mechanism, relation = variant.build()
        claimed = claimed_epsilon(claim_mechanism, relation, pair.index, variant.delta)
        budget = trials or variant.trials
        result = audit(pair=pair, trials=budget, delta=variant.delta, confidence=confidence, score=variant.score,
                       seed=seed)
        bound = result.epsilon_lower_bound
        results.append(ZooResult(variant.name, variant.buggy, bound > claimed, bound, claimed,
                                 variant.true_epsilon, variant.delta, budget, time.perf_counter() - start, variant.description))
    return results


def _run_user_code(variant: UserCodeVariant, budget: int, seed: int, confidence: float, start: float) -> ZooResult:
    """Audit a user-code entry on its dataset pair against the epsilon it claims."""
    mechanism, pair = variant.build()
    result = audit(mechanism, dataset_pair=pair, trials=budget, delta=variant.delta, confidence=confidence,
                   score=variant.score, seed=seed)
    bound = result.epsilon_lower_bound
    ceiling = variant.ceiling(budget) if variant.ceiling is not None else None
    return ZooResult(variant.name, variant.buggy, bound > variant.claimed, bound, variant.claimed,
                     variant.true_epsilon, variant.delta, budget, time.perf_counter() - start,
                     variant.description, ceiling)
