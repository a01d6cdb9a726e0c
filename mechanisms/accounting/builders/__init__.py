"""Claim builders, one module per mechanism family (imported for registration)."""

from dpaudit.mechanisms.accounting.builders import baseline, iterative, kernel, sgd  # noqa: F401
