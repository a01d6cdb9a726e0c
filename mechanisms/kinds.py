"""Closed vocabularies as string enums: noise kinds, neighbouring relations, samplings.

Each is a :class:`enum.StrEnum`, so a member compares equal to its string
and serialises as one (``json.dumps(NoiseKind.GAUSSIAN) == '"gaussian"'``),
while a typo is an error instead of a silent fallback.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from dpaudit.mechanisms.errors import ParameterError

__all__ = ["NoiseKind", "Relation", "Sampling", "check_enum"]

E = TypeVar("E", bound=enum.StrEnum)


class _Vocabulary(enum.StrEnum):
    """A string enum whose ``repr`` is its value's, so messages read ``noise='laplace'``."""

    def __repr__(self) -> str:
        return repr(self.value)


class NoiseKind(_Vocabulary):
    """Noise added by a mechanism: Gaussian (spread = std) or Laplace (spread = scale)."""

    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"


class Relation(_Vocabulary):
    """The neighbouring relation a canary pair realises and a claim assumes."""

    REPLACE_ONE = "replace-one"
    ADD_REMOVE = "add-remove"


class Sampling(_Vocabulary):
    """How DP-SGD draws its batches."""

    WITHOUT_REPLACEMENT = "without-replacement"
    POISSON = "poisson"


def check_enum(name: str, value: Any, kind: type[E]) -> E:
    """``value`` as a member of ``kind``, or a :class:`ParameterError` naming ``name`` and the valid values."""
    try:
        return kind(value)
    except ValueError:
        listed = ", ".join(repr(member.value) for member in kind)
        raise ParameterError(f"{name} must be one of {listed}, got {name}={value!r}") from None
