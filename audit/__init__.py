"""Audits, in three rooms: ``statistics`` (certified bounds), ``jobs`` (running audits) and ``checks`` (verdicts,
regression tests, search, the zoo, and ``dpaudit.audit(...)`` itself).

The folder ``audit/`` installs as ``dpaudit.auditing``, so that ``dpaudit.audit``
is the function (:func:`dpaudit.auditing.checks.api.audit`) and nothing else.

>>> from dpaudit import assert_private, PrivacyViolation
"""
