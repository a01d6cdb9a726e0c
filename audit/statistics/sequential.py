"""Looks planned before any data are seen: stop at the first certified violation (docs/theory.md 3.7).

A sequential audit certifies after ``c_1 < c_2 < ... < c_L`` certification
chunks per side (powers of two, then the whole budget), each look at
confidence ``1 - beta / L``. By a union bound over the ``L`` planned looks,
every bound stated at any look holds together with probability at least
``1 - beta``: stopping at the first look that certifies a violation, or
running the whole budget, keeps the audit's confidence. The looks depend
only on the number of trials and the chunk size, so a run is reproducible
from its seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dpaudit.mechanisms.validation import check_int

__all__ = ["Looks", "plan_looks"]


@dataclasses.dataclass(frozen=True, slots=True)
class Looks:
    """When a sequential audit looks (cumulative certification chunks per side) and what each costs."""

    chunks: tuple[int, ...]
    confidence: float

    @property
    def count(self) -> int:
        return len(self.chunks)

    @property
    def look_confidence(self) -> float:
        """The confidence of each look: ``1 - beta / L`` (a union bound over the planned looks)."""
        return 1 - (1 - self.confidence) / self.count

    def record(self, stopped_at: int, trials: int) -> dict[str, Any]:
        """The ``sequential`` entry of a result: the plan, the split of the failure probability, where it stopped."""
        return {"looks": list(self.chunks), "beta": 1 - self.confidence, "looks_planned": self.count,
                "beta_per_look": (1 - self.confidence) / self.count, "look_confidence": self.look_confidence,
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
