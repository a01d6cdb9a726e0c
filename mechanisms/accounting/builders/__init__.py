"""Descriptions to claims: the registry of claim builders (the only way a mechanism gets its claims).

Each module of this room declares ``BUILDERS``: builders that say which
description types they support (``supports``) and turn a description into
claims. :func:`claims_for` finds the one builder of a description and keeps
the claims it builds per description (and per canary position, for the
builders whose claims depend on it): a sweep over seeds, a per-index audit
and the soundness tests' fixtures build each claim set once. A description
no builder supports is an :class:`UnsupportedDescription`, never an empty
list of claims.

References
----------
Google's ``dp_accounting`` (``PrivacyAccountant.supports(event)``, and
``UnsupportedEventError`` for an event it cannot account).
"""

from __future__ import annotations

import functools
from typing import Any

from dpaudit.core.errors import DPAuditError
from dpaudit.mechanisms.accounting.builders import baseline, iterative, kernel, library, matrix, model, sgd
from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder, ClaimBuilderProtocol
from dpaudit.mechanisms.accounting.claims import Claim, ClaimEntry, evaluate_claims, shows_profile
from dpaudit.mechanisms.accounting.descriptions import PrivacyDescription

__all__ = ["BUILDERS", "ClaimBuilder", "ClaimBuilderProtocol", "UnsupportedDescription", "builder_for",
           "claims_for", "evaluated_claims", "pair_claims_for"]


class UnsupportedDescription(DPAuditError, TypeError):
    """No claim builder supports this description (the message names its type)."""


def _checked(builders: tuple[ClaimBuilderProtocol, ...]) -> tuple[ClaimBuilderProtocol, ...]:
    names = [builder.name for builder in builders]
    if len(set(names)) != len(names):
        raise ValueError(f"two claim builders share a name: {sorted(n for n in names if names.count(n) > 1)}")
    return builders


#: Every built-in builder (names unique; the contract test checks that no two support one description).
BUILDERS: tuple[ClaimBuilderProtocol, ...] = _checked(
    baseline.BUILDERS + kernel.BUILDERS + iterative.BUILDERS + sgd.BUILDERS + model.BUILDERS + library.BUILDERS
    + matrix.BUILDERS)


def builder_for(description: PrivacyDescription) -> ClaimBuilderProtocol:
    """The one builder that supports ``description``.

    Raises
    ------
    UnsupportedDescription
        When none does (or, a defect of the registry, more than one).
    """
    found = [builder for builder in BUILDERS if builder.supports(description)]
    if len(found) != 1:
        kind = type(description).__name__
        if not found:
            raise UnsupportedDescription(f"no claim builder supports a {kind} description; the builders are "
                                         f"{', '.join(builder.name for builder in BUILDERS)}")
        raise UnsupportedDescription(f"claim builders {[b.name for b in found]} all support a {kind} description")
    return found[0]


@functools.lru_cache(maxsize=1024)
def _built(description: PrivacyDescription, index: int | None) -> tuple[Claim, ...]:
    return tuple(builder_for(description).claims(description, index))


def claims_for(description: PrivacyDescription, index: int | None = None) -> list[Claim]:
    """Every claim of ``description`` at canary position ``index`` (``None``: the worst position), applicable
    or not; built once per description (and position) and kept.

    Parameters
    ----------
    description : PrivacyDescription
        A frozen, hashable description (``accounting.descriptions``).
    index : int, optional
        The 1-based canary position, for the builders whose claims depend on it.

    Returns
    -------
    list of Claim
        A new list each call (the claims themselves are frozen).
    """
    builder = builder_for(description)
    return list(_built(description, index if builder.per_index else None))


def pair_claims_for(description: PrivacyDescription, data_a: Any, data_b: Any, relation: str,
                    usual: list[Claim]) -> list[Claim] | None:
    """The claims of a canary pair that the ``usual`` claims do not describe (a canary inserted at chosen
    steps), or ``None`` when the usual claims apply."""
    return builder_for(description).pair_claims(description, data_a, data_b, relation, usual)


def evaluated_claims(description: PrivacyDescription, index: int | None, *, delta: float,
                     profile_epsilons: tuple[float, ...]) -> tuple[ClaimEntry, ...]:
    """Every claim of ``description`` evaluated at ``delta``, each applicable one with its privacy profile on
    ``profile_epsilons``; evaluated once per description, position, delta and grid, and kept (the entries are
    frozen)."""
    builder = builder_for(description)
    return _evaluated(description, index if builder.per_index else None, float(delta), tuple(profile_epsilons))


@functools.lru_cache(maxsize=1024)
def _evaluated(description: PrivacyDescription, index: int | None, delta: float,
               profile_epsilons: tuple[float, ...]) -> tuple[ClaimEntry, ...]:
    claims = _built(description, index)
    entries = evaluate_claims(list(claims), delta=delta)
    return tuple(entry.replace(profile=claim.profile(profile_epsilons)) if shows_profile(claim, entry) else entry
                 for claim, entry in zip(claims, entries))
