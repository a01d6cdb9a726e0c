"""Audits: configs, jobs, the runner, the store, certified estimators, verdicts, results and regression tests.

>>> from dpaudit.audit import assert_private, PrivacyViolation

``dpaudit.audit`` is both this subpackage and the function
:func:`dpaudit.audit.api.audit`: calling the package runs an audit, so
``dpaudit.audit(mechanism, ...)`` works whether or not the subpackage has
been imported (Python binds a subpackage to its parent's attribute).
"""

import sys
import types

from dpaudit.audit.regression import PrivacyViolation, assert_private

__all__ = ["PrivacyViolation", "assert_private"]


class _CallablePackage(types.ModuleType):
    """This package's module type: calling it calls :func:`dpaudit.audit.api.audit`."""

    def __call__(self, *args, **kwargs):
        from dpaudit.audit.api import audit

        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
