"""Audits: configs, jobs, the runner, the store, certified estimators, verdicts, results and regression tests.

>>> from dpaudit.audit import assert_private, PrivacyViolation

``dpaudit.audit`` is both this subpackage and the function
:func:`dpaudit.audit.api.audit`: calling the package runs an audit, so
``dpaudit.audit(mechanism, ...)`` works whether or not the subpackage has
been imported (Python binds a subpackage to its parent's attribute).
"""

import sys
import types


__all__ = ["PrivacyViolation", "assert_private"]


class _CallablePackage(types.ModuleType):
    """This package's module type: calling it calls :func:`dpaudit.audit.api.audit`."""

    def __call__(self, *args, **kwargs):
        from dpaudit.audit.api import audit

        return audit(*args, **kwargs)


def __getattr__(name: str):
    # imported on first use, so that the command line's start-up does not import torch
    if name in __all__:
        from dpaudit.audit import regression

        return getattr(regression, name)
    raise AttributeError(f"module 'dpaudit.audit' has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallablePackage
