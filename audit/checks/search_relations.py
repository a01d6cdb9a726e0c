"""Which neighbouring relations a neighbour search looks at, and whether the claim is made for them.

A privacy claim is made for one neighbouring relation or more: a sum over
datasets of a known size (OpenDP's sized bounded sum) for replace-one pairs
only, an unbounded sum for add/remove and replace-one pairs, shuffled DP-SGD
for zero-out pairs. A certified bound on a pair of another relation says
nothing about such a claim, so the search builds, by default, only pairs of
the relations the claim is made for (:func:`claim_relations`: the
mechanism's own claims, read as the audits read them), and the pairs of a
mechanism that takes datasets of one size only (:func:`known_size`) all hold
that many records. A function that states no claim (``from_callable``) is
searched under replace-one and add/remove, and the caller's ``epsilon`` is
read as a claim for both; ``relation=`` names one. A relation named that the
claim is not made for is searched, and the result says the claim does not
apply to it (never a violation).

References
----------
docs/theory.md 3.8 (searching for the pair); docs/guide.md, "Neighbour search".
"""

from __future__ import annotations

from typing import Any

from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation, check_enum
from dpaudit.mechanisms.base import Mechanism

__all__ = ["DEFAULT_RELATIONS", "claim_relations", "known_size", "searched_relations"]

#: The relations searched when the mechanism states no claim
DEFAULT_RELATIONS = (Relation.REPLACE_ONE, Relation.ADD_REMOVE)


def claim_relations(mechanism: Mechanism) -> tuple[Relation, ...] | None:
    """The relations the mechanism's upper-bound claims are made for (those that apply, else all of them), in the
    order of :class:`~dpaudit.core.kinds.Relation`; None when it states no claim (a user's function)."""
    bounds = [claim for claim in mechanism.claims() if claim.kind == "upper-bound"]
    if not bounds:
        return None
    chosen = {str(claim.relation) for claim in ([c for c in bounds if c.applicable] or bounds)}
    return tuple(relation for relation in Relation if relation.value in chosen)


def known_size(mechanism: Mechanism) -> int | None:
    """The one number of records the mechanism takes and its claim is made for (``dataset_size``: an OpenDP
    measurement on a sized domain), or None."""
    size = mechanism.dataset_size
    return None if size is None else int(size)


def searched_relations(relation: Any, claimed: tuple[Relation, ...] | None,
                       size: int | None) -> tuple[Relation, ...]:
    """The relations to search: ``relation`` when named, else those the claim is made for (replace-one and
    add/remove when none is known), without add/remove when every dataset holds ``size`` records.

    Raises
    ------
    ParameterError
        For an unknown relation, or add/remove named for a mechanism of one dataset size.
    """
    if relation is not None:
        named = check_enum("relation", relation, Relation)
        if named == Relation.ADD_REMOVE and size is not None:
            raise ParameterError(f"relation='add-remove' needs datasets of two sizes, but the mechanism takes datasets "
                                 f"of {size} records only (a claim for a known size: replace-one neighbours)")
        return (named,)
    found = tuple(r for r in (claimed or DEFAULT_RELATIONS) if not (size is not None and r == Relation.ADD_REMOVE))
    if not found:
        raise ParameterError(f"the claim is made for add/remove neighbours only, but the mechanism takes datasets of "
                             f"{size} records only: no pair of that relation can be built")
    return found
