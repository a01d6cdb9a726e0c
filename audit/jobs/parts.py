"""How an audit's trials are split: the calibration part, the certification part, and their chunks.

Every dataset's trials are drawn in chunks of at most ``chunk_size``. The
calibration part comes first: ``calibration_fraction`` of the trials, drawn
before any score is fitted, then, where a fitted score asks for a larger share
(``attacks.score_protocol.fitted_calibration_share``), the missing trials in
chunks of their own, taken out of the certification part (docs/theory.md 7).
Chunk keys follow this order, so a rerun on the same store finds the same
chunks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dpaudit.attacks.score_protocol import ScoreFunction, fitted_calibration_share
from dpaudit.core.errors import ParameterError

__all__ = ["calibration_chunks", "calibration_trials", "chunk_sizes", "requested_calibration"]


def chunk_sizes(total: int, size: int) -> list[int]:
    """``total`` trials in chunks of at most ``size``."""
    return [min(size, total - k * size) for k in range(math.ceil(total / size))]


def calibration_trials(trials: int, fraction: float) -> int:
    """Trials per dataset set aside for calibration (scores are fitted and thresholds chosen on them)."""
    if not 0 < fraction < 1:
        raise ParameterError(f"calibration_fraction must be in (0, 1), got calibration_fraction={fraction}")
    count = int(math.ceil(fraction * trials))
    if count < 1 or count >= trials:
        raise ParameterError(f"trials={trials} is too few to set aside a calibration part")
    return count


def calibration_chunks(first: int, total: int, size: int) -> list[int]:
    """The calibration chunks' sizes: the ``first`` trials drawn before fitting, then the rest up to ``total``."""
    return chunk_sizes(first, size) + (chunk_sizes(total - first, size) if total > first else [])


def requested_calibration(trials: int, calibration: int, scorers: Iterable[ScoreFunction]) -> int:
    """The calibration trials the fitted ``scorers`` ask for: the largest of their shares of ``trials``, or
    ``calibration`` (the trials drawn so far) when that is no fewer."""
    share = max((fitted_calibration_share(scorer) for scorer in scorers), default=0.0)
    return max(calibration, calibration_trials(trials, share) if share > 0 else 0)
