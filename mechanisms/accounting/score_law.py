"""The law of a score under both datasets, and how it was obtained (for the statistical ceiling)."""

from __future__ import annotations

import numpy as np

__all__ = ["ScoreLaw"]


class ScoreLaw(tuple):
    """``(values, mass_a, mass_b)`` of a score, with ``source``: ``"exact"`` or how it was simulated."""

    source: str

    def __new__(cls, values: np.ndarray, mass_a: np.ndarray, mass_b: np.ndarray, source: str = "exact"):
        law = super().__new__(cls, (values, mass_a, mass_b))
        law.source = source
        return law
