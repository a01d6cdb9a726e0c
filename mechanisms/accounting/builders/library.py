"""Claims of what a DP library states about an object of its own, and of a mechanism that states nothing.

A library adapter reads the guarantees from the configured object
(``mechanisms.adapters``) into a :class:`LibraryGuarantees` description;
this builder turns each into a claim in the same shape whatever the
library: a fixed ``(epsilon, delta)`` holds for every larger delta and
nothing below its own; zCDP is converted to a privacy profile by
Canonne-Kamath-Steinke Prop. 12; a Gaussian mechanism gets its exact
profile.
"""

from __future__ import annotations

import numpy as np

from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import Claim, fixed_claim, not_applicable, profile_claim, rdp_claim
from dpaudit.mechanisms.accounting.descriptions import (
    FixedGuarantee,
    GaussianGuarantee,
    InapplicableGuarantee,
    LibraryGuarantees,
    ProfileGuarantee,
    Undeclared,
    ZcdpGuarantee,
)
from dpaudit.mechanisms.accounting.profiles import gaussian_log_delta

__all__ = ["BUILDERS", "ZCDP_ORDERS", "library_claims"]

#: Renyi orders at which a zCDP guarantee ``rho * alpha`` is converted.
ZCDP_ORDERS = np.concatenate([np.linspace(1.01, 10, 200), np.geomspace(10, 10_000, 200)])


def _claim(guarantee) -> Claim:
    name, citation, relation = guarantee.name, guarantee.citation, guarantee.relation
    if isinstance(guarantee, FixedGuarantee):
        return fixed_claim(name, citation, relation, guarantee.epsilon, guarantee.delta)
    if isinstance(guarantee, ZcdpGuarantee):
        return rdp_claim(name, citation + f" (rho={guarantee.rho:g}, Canonne-Kamath-Steinke Prop. 12)", relation,
                         ZCDP_ORDERS, guarantee.rho * ZCDP_ORDERS)
    if isinstance(guarantee, GaussianGuarantee):
        return profile_claim(name, citation, relation, lambda e, mu=guarantee.mu: gaussian_log_delta(e, mu))
    if isinstance(guarantee, ProfileGuarantee):
        # a library's own profile answers every delta (inf where it claims nothing), delta = 0 included
        return Claim(name, citation, relation, epsilon_fn=guarantee.epsilon_of, delta_fn=guarantee.delta_of,
                     covers_delta_zero=True)
    if isinstance(guarantee, InapplicableGuarantee):
        return not_applicable(name, citation, relation, guarantee.reason)
    raise TypeError(f"unknown library guarantee {guarantee!r}")


def library_claims(stated: LibraryGuarantees, index: int | None) -> list[Claim]:
    """Each stated guarantee as a claim; all not applicable, with the reason, when the query is not covered."""
    claims = [_claim(guarantee) for guarantee in stated.guarantees]
    if stated.not_covered is None:
        return claims
    return [not_applicable(c.name, c.citation, c.relation, stated.not_covered) for c in claims]


BUILDERS = (
    ClaimBuilder("library-guarantees", (LibraryGuarantees,), library_claims, per_index=False),
    ClaimBuilder("undeclared", (Undeclared,), lambda description, index: [], per_index=False),
)
