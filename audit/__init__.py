"""Audits, in three rooms: ``statistics`` (certified bounds), ``jobs`` (running audits) and ``checks`` (verdicts, regression tests, search, the zoo).

>>> from dpaudit.auditing import assert_private, PrivacyViolation

``dpaudit.audit`` is both this subpackage and the function
:func:`dpaudit.auditing.jobs.api.audit`: calling the package runs an audit, so
``dpaudit.audit(mechanism, ...)`` works whether or not the subpackage has
been imported (Python binds a subpackage to its parent's attribute).

The modules that lived here before the rooms keep their old import paths
(``dpaudit.auditing.config`` and so on, listed in :mod:`dpaudit.auditing._moved`):
they import the new module and warn with a :class:`DeprecationWarning`.
"""

import sys
import types

from dpaudit.auditing import _moved

__all__ = ["PrivacyViolation", "assert_private"]

_moved.install()


class _CallablePackage(types.ModuleType):
    """This package's module type: calling it calls :func:`dpaudit.auditing.jobs.api.audit`."""

    def __call__(self, *args, **kwargs):
        from dpaudit.auditing.jobs.api import audit

        return audit(*args, **kwargs)


def __getattr__(name: str):
    # imported on first use, so that the command line's start-up does not import torch
    if name in __all__:
        from dpaudit.auditing.checks import regression

        return getattr(regression, name)
    old = f"{__name__}.{name}"
    if old in _moved.MOVED:  # a module's old home: dpaudit.auditing.config and the like
        module = _moved.moved_module(old)
        setattr(sys.modules[__name__], name, module)
        return module
    raise AttributeError(f"module 'dpaudit.audit' has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallablePackage
