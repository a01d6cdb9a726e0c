"""Closed vocabularies as string enums: noise kinds, neighbouring relations, samplings.

Each is a :class:`enum.StrEnum`, so a member compares equal to its string
and serialises as one (``json.dumps(NoiseKind.GAUSSIAN) == '"gaussian"'``),
while a typo is an error instead of a silent fallback.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from dpaudit.core.errors import ParameterError

__all__ = ["NoiseKind", "Relation", "SHUFFLED", "Sampling", "check_enum"]

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
    #: replace the canary by a record whose gradient is zero, keeping the number of records and the
    #: batch sizes (the relation of fixed-size shuffled batches, docs/theory.md 6)
    ZERO_OUT = "zero-out"


class Sampling(_Vocabulary):
    """How DP-SGD draws its batches.

    ``shuffle``: a fresh uniform permutation of the records each epoch, cut
    into consecutive batches of ``batch_size`` (PyTorch's DataLoader with
    ``shuffle=True``); ``shuffle-once``: one permutation drawn before the
    first epoch and reused in every epoch.
    """

    WITHOUT_REPLACEMENT = "without-replacement"
    POISSON = "poisson"
    SHUFFLE = "shuffle"
    SHUFFLE_ONCE = "shuffle-once"


#: Samplings that cut a permutation into fixed-size batches (each record at most once per epoch).
SHUFFLED = frozenset({Sampling.SHUFFLE, Sampling.SHUFFLE_ONCE})


def check_enum(name: str, value: Any, kind: type[E]) -> E:
    """``value`` as a member of ``kind``, or a :class:`ParameterError` naming ``name`` and the valid values."""
    try:
        return kind(value)
    except ValueError:
        listed = ", ".join(repr(member.value) for member in kind)
        raise ParameterError(f"{name} must be one of {listed}, got {name}={value!r}") from None
