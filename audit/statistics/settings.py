"""How much an audit samples and how it certifies: the ``[audit]`` settings, declared once.

Each setting is a field of :class:`AuditSettings` with its default and its
check; :data:`AUDIT_DEFAULTS` and :func:`check_setting` are read off the
fields, so a config, ``dpaudit.audit(...)`` and the size checks of
``budget`` all see one declaration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dpaudit.auditing.statistics.estimators import STRATEGIES
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import is_integer, is_real

__all__ = ["AUDIT_DEFAULTS", "AuditSettings", "check_setting"]


def _setting(default: Any, valid: Callable[[Any], bool], expected: str, doc: str) -> Any:
    """A settings field: its default, its check and what the check expects (for the error)."""
    return dataclasses.field(default=default, metadata={"valid": valid, "expected": expected, "doc": doc})


@dataclasses.dataclass(frozen=True, slots=True)
class AuditSettings:
    """How much to sample and how to certify (the ``[audit]`` table); every field checked when made."""

    trials: int = _setting(100_000, lambda v: is_integer(v) and v >= 20, "an integer >= 20",
                           "trials per dataset")
    delta: float = _setting(1e-5, lambda v: is_real(v) and 0 <= v < 1, "a number in [0, 1)",
                            "the delta at which epsilon is certified")
    # at least 1/2: a bound more likely false than true is no certificate (and below it the splits of the
    # failure probability over positions, rates and looks leave nothing: 1 - beta / K rounds to 0)
    confidence: float = _setting(0.95, lambda v: is_real(v) and 0.5 <= v < 1, "a number in [0.5, 1)",
                                 "the confidence of every certified statement")
    seed: int = _setting(0, lambda v: is_integer(v) and v >= 0, "a non-negative integer",
                         "the seed of every chunk's generator")
    threshold: str = _setting("split", lambda v: v in STRATEGIES,
                              "one of " + ", ".join(repr(s) for s in STRATEGIES), "how the threshold is placed")
    chunk_size: int = _setting(10_000, lambda v: is_integer(v) and v >= 1, "a positive integer",
                               "trials per stored chunk")
    calibration_fraction: float = _setting(0.1, lambda v: is_real(v) and 0 < v < 0.5, "a number in (0, 0.5)",
                                           "the share of trials that calibrates the scores")

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check_setting(field.name, getattr(self, field.name))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_FIELDS = {field.name: field for field in dataclasses.fields(AuditSettings)}
#: Every setting and its default, in declaration order.
AUDIT_DEFAULTS: dict[str, Any] = {name: field.default for name, field in _FIELDS.items()}


def check_setting(key: str, value: Any) -> Any:
    """``value`` if it is valid for the audit setting ``key``; a ParameterError naming both otherwise."""
    if key not in _FIELDS:
        raise ParameterError(f"unknown audit setting {key!r} (valid: {', '.join(_FIELDS)})")
    if not _FIELDS[key].metadata["valid"](value):
        raise ParameterError(f"{key} must be {_FIELDS[key].metadata['expected']}, got {key}={value!r}")
    return value
