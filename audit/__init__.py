"""Audits: configs, the runner, the store, certified estimators, verdicts and regression tests.

>>> from audit import assert_private, PrivacyViolation
"""

from dpaudit.audit.regression import PrivacyViolation, assert_private

__all__ = ["PrivacyViolation", "assert_private"]
