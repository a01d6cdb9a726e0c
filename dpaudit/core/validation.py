"""Small checks that raise :class:`ParameterError` naming parameter and value."""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable
from typing import Any

from dpaudit.core.errors import ParameterError

__all__ = [
    "is_integer",
    "is_real",
    "check_choice",
    "check_int",
    "check_real",
    "check_probability",
    "suggestion",
]


def is_integer(value: Any) -> bool:
    """True for an integral number that is not a bool (``True`` is no count of trials)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """True for a real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_int(name: str, value: Any, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise naming ``name``."""
    if not is_integer(value):
        raise ParameterError(f"{name} must be an integer, got {name}={value!r}")
    return _within(name, int(value), minimum, maximum)


def check_real(name: str, value: Any, *, positive: bool = False,
               nonnegative: bool = False, minimum: float | None = None,
               maximum: float | None = None, allow_inf: bool = False) -> float:
    """Return ``value`` as a float, or raise naming ``name``.

    NaN is always refused; infinity only with ``allow_inf``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{name} must be a real number, got {name}={value!r}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ParameterError(f"{name} must be finite, got {name}={value}")
    if positive and not value > 0:
        raise ParameterError(f"{name} must be > 0, got {name}={value}")
    if nonnegative and not value >= 0:
        raise ParameterError(f"{name} must be >= 0, got {name}={value}")
    return _within(name, value, minimum, maximum)


def _within(name: str, value, minimum, maximum):
    """``value``, or a ParameterError naming ``name`` when it lies below ``minimum`` or above ``maximum``."""
    if minimum is not None and value < minimum:
        raise ParameterError(f"{name} must be >= {minimum}, got {name}={value}")
    if maximum is not None and value > maximum:
        raise ParameterError(f"{name} must be <= {maximum}, got {name}={value}")
    return value


def check_probability(name: str, value: Any, *, open_low: bool = False,
                      open_high: bool = False) -> float:
    """Return ``value`` as a float in [0, 1] (ends optionally open)."""
    value = check_real(name, value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (low_ok and high_ok):
        interval = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ParameterError(f"{name} must be in {interval}, got {name}={value}")
    return value


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``; the error lists them."""
    options = tuple(choices)
    if value not in options:
        listed = ", ".join(repr(c) for c in options)
        raise ParameterError(f"{name} must be one of {listed}, got {name}={value!r}{suggestion(value, options)}")
    return value


def suggestion(value: Any, options: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest option to a misspelt ``value`` (stdlib difflib), else ``""``."""
    close = difflib.get_close_matches(str(value), [str(option) for option in options], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
