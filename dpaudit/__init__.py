"""dpaudit: empirical privacy auditing of differentially private mechanisms.

The top level holds the small public API; everything else lives in its
subpackage (:mod:`dpaudit.mechanisms`, :mod:`dpaudit.attacks`,
:mod:`dpaudit.audit`, :mod:`dpaudit.reports`).

>>> import dpaudit
>>> mech = dpaudit.make("gaussian", sigma=1.0)
>>> result = dpaudit.audit(mech, trials=20_000, delta=1e-5)   # doctest: +SKIP
>>> result.verdict                                            # doctest: +SKIP
'consistent'

Attributes are imported on first use, so ``import dpaudit`` (and
``dpaudit --help``) stays fast and does not load torch. ``dpaudit.audit`` is
also the name of the subpackage; the subpackage is callable and forwards to
the function, so both spellings run an audit.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_PUBLIC = {
    "make": "dpaudit.mechanisms.base",
    "from_callable": "dpaudit.mechanisms.wrapped",
    "from_batched_callable": "dpaudit.mechanisms.wrapped",
    "audit": "dpaudit.auditing.jobs.api",
    "search": "dpaudit.auditing.checks.search",
    "load_result": "dpaudit.auditing.jobs.result",
    "AuditResult": "dpaudit.auditing.jobs.result",
    "assert_private": "dpaudit.auditing.checks.regression",
    "PrivacyViolation": "dpaudit.auditing.checks.regression",
}
__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:  # pragma: no cover
    from dpaudit.auditing.jobs.api import audit
    from dpaudit.auditing.checks.regression import PrivacyViolation, assert_private
    from dpaudit.auditing.jobs.result import AuditResult, load_result
    from dpaudit.auditing.checks.search import search
    from dpaudit.mechanisms.base import make
    from dpaudit.mechanisms.wrapped import from_batched_callable, from_callable


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'dpaudit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
