"""dpaudit: empirical privacy auditing of differentially private mechanisms.

The top level holds the small public API; everything else lives in its
subpackage (:mod:`dpaudit.mechanisms`, :mod:`dpaudit.attacks`,
:mod:`dpaudit.auditing` (the folder ``audit/``), :mod:`dpaudit.reports`;
:mod:`dpaudit.core` holds the errors and checks every layer uses).

>>> import dpaudit
>>> mech = dpaudit.make("gaussian", sigma=1.0)
>>> result = dpaudit.audit(mech, trials=20_000, delta=1e-5)   # doctest: +SKIP
>>> result.verdict                                            # doctest: +SKIP
'consistent'
>>> result = dpaudit.audit(mech, design=dpaudit.ManyRuns(trials=20_000))   # doctest: +SKIP

Attributes are imported on first use, so ``import dpaudit`` (and
``dpaudit --help``) stays fast and does not load torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_PUBLIC = {
    "make": "dpaudit.mechanisms.registry",
    "from_callable": "dpaudit.mechanisms.wrapped",
    "from_batched_callable": "dpaudit.mechanisms.wrapped",
    "from_jax_privacy": "dpaudit.mechanisms.adapters.jax_privacy",  # jax loads when it is called, not here
    "audit": "dpaudit.auditing.checks.api",
    "ManyRuns": "dpaudit.auditing.checks.designs",
    "OneRun": "dpaudit.auditing.checks.designs",
    "PairSearch": "dpaudit.auditing.checks.designs",
    "Anytime": "dpaudit.auditing.checks.designs",
    "search": "dpaudit.auditing.checks.search",
    "load_result": "dpaudit.auditing.jobs.result",
    "AuditResult": "dpaudit.auditing.jobs.result",
    "assert_private": "dpaudit.auditing.checks.regression",
    "PrivacyViolation": "dpaudit.auditing.checks.regression",
    "ParameterError": "dpaudit.core.errors",
    "DPAuditError": "dpaudit.core.errors",
}
__all__ = ["__version__", *_PUBLIC]

if TYPE_CHECKING:  # pragma: no cover
    from dpaudit.auditing.checks.api import audit
    from dpaudit.auditing.checks.designs import Anytime, ManyRuns, OneRun, PairSearch
    from dpaudit.auditing.checks.regression import PrivacyViolation, assert_private
    from dpaudit.auditing.checks.search import search
    from dpaudit.auditing.jobs.result import AuditResult, load_result
    from dpaudit.core.errors import DPAuditError, ParameterError
    from dpaudit.mechanisms.adapters.jax_privacy import from_jax_privacy
    from dpaudit.mechanisms.registry import make
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
