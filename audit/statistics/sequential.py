"""Looks planned before any data are seen: stop at the first certified violation (docs/theory.md 3.7).

A sequential audit certifies after ``c_1 < c_2 < ... < c_L`` certification
chunks per side (powers of two, then the whole budget). The failure
probability ``beta`` is spent unevenly, and fixed before any data are seen:
the final look, whose bound is the one a correct mechanism reports, gets
``FINAL_SHARE`` of it, and the earlier looks, which exist to stop early on a
leak that shows in a few chunks, share the rest equally. By a union bound
over the ``L`` planned looks, every bound stated at any look holds together
with probability at least ``1 - beta``: stopping at the first look that
certifies a violation, or running the whole budget, keeps the audit's
confidence. The looks depend only on the number of trials and the chunk
size, so a run is reproducible from its seed.

References
----------
docs/theory.md 3.7; K. K. G. Lan and D. L. DeMets, "Discrete sequential
boundaries for clinical trials", Biometrika 70 (1983): spending the failure
probability unevenly over planned looks.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpaudit.core.validation import check_int

__all__ = ["FINAL_SHARE", "Looks", "plan_looks"]

#: Share of the failure probability spent at the final look (the rest is shared equally by the earlier
#: looks). With seven looks at beta = 0.05 the final look certifies at 0.975 instead of 1 - 0.05 / 7 = 0.993:
#: SVT1 at 5 x 10^5 trials per side (docs/theory.md 8) certifies about 0.018 instead of 0.016 (median of 4 seeds)
FINAL_SHARE = 0.5


@dataclasses.dataclass(frozen=True, slots=True)
class Looks:
    """When a sequential audit looks (cumulative certification chunks per side) and what each costs."""

    chunks: tuple[int, ...]
    confidence: float

    @property
    def count(self) -> int:
        return len(self.chunks)

    @property
    def betas(self) -> tuple[float, ...]:
        """The failure probability spent at each look: ``FINAL_SHARE`` of ``beta`` at the last, the rest
        shared equally by the earlier ones (all of it when there is one look); they add up to ``beta``."""
        beta = 1 - self.confidence
        if self.count == 1:
            return (beta,)
        early = (1 - FINAL_SHARE) * beta / (self.count - 1)
        return (early,) * (self.count - 1) + (FINAL_SHARE * beta,)

    def confidence_at(self, look: int) -> float:
        """The confidence look ``look`` (from 0) certifies at: ``1 - betas[look]``."""
        return 1 - self.betas[look]

    def record(self, stopped_at: int, trials: int) -> dict[str, Any]:
        """The ``sequential`` entry of a result: the plan, the split of the failure probability, where it stopped."""
        betas = self.betas
        return {"looks": list(self.chunks), "beta": 1 - self.confidence, "looks_planned": self.count,
                "beta_per_look": list(betas), "look_confidence": 1 - betas[stopped_at],
                "stopped_at_look": stopped_at + 1, "chunks_used": self.chunks[stopped_at], "trials_used": trials,
                "stopped_early": stopped_at + 1 < self.count}


def plan_looks(chunks: int, confidence: float) -> Looks:
    """Looks after 1, 2, 4, ... certification chunks and after all ``chunks`` (planned from the budget only)."""
    chunks = check_int("chunks", chunks, minimum=1)
    points = []
    step = 1
    while step < chunks:
        points.append(step)
        step *= 2
    return Looks(tuple(points) + (chunks,), confidence)
