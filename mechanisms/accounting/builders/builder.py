"""The claim-builder protocol and the plain builder every module of this room declares.

A builder says which descriptions it supports and turns one into claims; the
registry (:mod:`dpaudit.mechanisms.accounting.builders`) holds the built-in
builders, refuses two for one description type, and keeps each description's
claims once built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from dpaudit.mechanisms.accounting.claims import Claim
from dpaudit.mechanisms.accounting.descriptions import PrivacyDescription

__all__ = ["ClaimBuilder", "ClaimBuilderProtocol"]


@runtime_checkable
class ClaimBuilderProtocol(Protocol):
    """What the registry asks of a builder."""

    name: str
    #: False when the claims do not depend on the canary's position (built once for every index)
    per_index: bool

    def supports(self, description: PrivacyDescription) -> bool: ...

    def claims(self, description: PrivacyDescription, index: int | None) -> list[Claim]: ...

    def pair_claims(self, description: PrivacyDescription, data_a: Any, data_b: Any, relation: str,
                    usual: list[Claim]) -> list[Claim] | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class ClaimBuilder:
    """A builder for the description types ``types``: ``build(description, index) -> claims``.

    ``pair`` builds the claims of a canary pair that the usual claims do not describe (a canary inserted at
    chosen steps): ``pair(description, data_a, data_b, relation, usual) -> claims or None``.
    """

    name: str
    types: tuple[type, ...]
    build: Callable[[Any, int | None], list[Claim]]
    per_index: bool = True
    pair: Callable[..., list[Claim] | None] | None = None

    def supports(self, description: PrivacyDescription) -> bool:
        return isinstance(description, self.types)

    def claims(self, description: PrivacyDescription, index: int | None) -> list[Claim]:
        return list(self.build(description, index))

    def pair_claims(self, description: PrivacyDescription, data_a: Any, data_b: Any, relation: str,
                    usual: list[Claim]) -> list[Claim] | None:
        return None if self.pair is None else self.pair(description, data_a, data_b, relation, usual)
