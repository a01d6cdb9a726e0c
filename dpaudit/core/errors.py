"""Exception types shared by the whole toolkit."""

from __future__ import annotations

__all__ = ["DPAuditError", "NotExact", "ParameterError"]


class DPAuditError(Exception):
    """Base class of the errors dpaudit raises on purpose."""


class ParameterError(DPAuditError, ValueError):
    """A parameter has a value outside its domain.

    The message always names the parameter and the offending value, e.g.
    ``sigma must be > 0, got sigma=-1.0``.
    """


class NotExact(DPAuditError):
    """An instance is outside what the exact accountant computes (the message says why)."""
