"""The epsilon a threshold test's two error rates show, either way (docs/theory.md 3.1): one copy of the rule.

``(eps, delta)``-DP implies ``FPR + e^eps FNR >= 1 - delta`` and
``FNR + e^eps FPR >= 1 - delta``, so a test with false-positive rate ``FPR``
and false-negative rate ``FNR`` shows
``eps >= max(log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR))``.
Certified bounds put upper confidence bounds on both rates in; screening
statistics put plug-in rates in (never certified).
"""

from __future__ import annotations

import numpy as np

__all__ = ["rates_epsilon"]


def rates_epsilon(fpr: np.ndarray, fnr: np.ndarray, delta: float, *,
                  floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """``(bound, direction)`` of tests with error rates ``fpr`` and ``fnr`` (arrays of one shape).

    ``bound`` is the larger of the two directions (``-inf`` where neither is
    positive and finite); ``direction`` is 0 where ``log((1 - delta - FNR) /
    FPR)`` is the larger, 1 where ``log((1 - delta - FPR) / FNR)`` is.
    ``floor`` is added to each denominator (a plug-in statistic's guard
    against a rate of zero).
    """
    fpr, fnr = np.asarray(fpr, dtype=float), np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        forward = np.log(np.maximum(1 - delta - fnr, 0.0) / (fpr + floor))
        backward = np.log(np.maximum(1 - delta - fpr, 0.0) / (fnr + floor))
    forward = np.nan_to_num(forward, nan=-np.inf)
    backward = np.nan_to_num(backward, nan=-np.inf)
    return np.maximum(forward, backward), np.where(forward >= backward, 0, 1)
