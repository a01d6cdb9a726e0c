"""diffprivlib mechanisms as dpaudit mechanisms: ``from_diffprivlib(Laplace(epsilon=1, sensitivity=1))``.

Any numeric mechanism class of ``diffprivlib.mechanisms`` (Laplace and its
bounded, truncated and folded forms, Gaussian, GaussianAnalytic,
GaussianDiscrete, Geometric, Snapping, Staircase, Uniform, ...) is called
once per trial with ``randomise(value)``; the claim is the object's own
``(epsilon, delta)`` for query values at most ``sensitivity`` apart.
Blocks of trials use a copy of the object seeded with ``random_state``
(per-block seeds), so they can run in worker processes.

References
----------
Holohan, Braghin, Mac Aonghusa, Levacher, "Diffprivlib: the IBM
Differential Privacy Library", arXiv:1907.02444, 2019.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.descriptions import FixedGuarantee
from dpaudit.mechanisms.adapters.base import LibraryMechanism, check_version, require

__all__ = ["DiffprivlibMechanism", "SUPPORTED_VERSIONS", "from_diffprivlib"]

#: The diffprivlib releases this adapter reads correctly: the floor is the lowest tested (pyproject.toml,
#: docs/versions.md; 0.6.6 the newest). Up to 0.3 a mechanism is configured by ``set_epsilon`` and
#: ``set_sensitivity`` and has no ``sensitivity`` attribute to read the claim from.
SUPPORTED_VERSIONS = ">=0.6"


@dataclasses.dataclass(frozen=True)
class DiffprivlibMechanism(LibraryMechanism):
    """A diffprivlib mechanism object on a query of the dataset (one ``randomise`` call per trial)."""

    obj: Any = None

    name = "diffprivlib"
    summary = "a diffprivlib mechanism on a query, claim (epsilon, delta) read from the object"
    library = "diffprivlib"

    def validate(self) -> None:
        super().validate()
        if not hasattr(self.obj, "randomise") or not hasattr(self.obj, "epsilon"):
            raise ParameterError(f"obj must be a diffprivlib mechanism (with randomise and epsilon), got {self.obj!r}")

    def object_params(self) -> dict[str, Any]:
        keys = ("epsilon", "delta", "sensitivity", "lower", "upper", "gamma")
        return {key: float(getattr(self.obj, key)) for key in keys
                if isinstance(getattr(self.obj, key, None), (int, float, np.number))}

    def draw_block(self, values: np.ndarray, size: int, seed: int) -> np.ndarray:
        mech = copy.copy(self.obj)
        rng = np.random.RandomState(seed % 2**32)
        mech.random_state = rng
        mech._rng = rng  # diffprivlib reads its generator from _rng, set once in __init__
        randomise = mech.randomise
        if self.dim != 1:
            raise ParameterError(f"diffprivlib mechanisms randomise one number, got dim={self.dim}")
        value = self._value(float(values[0]))
        out = np.empty((size, 1))
        for trial in range(size):  # the library's own calling convention: one value per call
            out[trial, 0] = randomise(value)
        return out

    def _value(self, value: float) -> float | int:
        """The query value as the mechanism takes it: an int for the integer ones (Geometric, GaussianDiscrete)."""
        try:
            copy.copy(self.obj)._check_all(value)
        except TypeError:
            if not value.is_integer():
                raise ParameterError(f"{self.label} randomises integers; the query gave {value!r}") from None
            return int(value)
        return value

    def library_guarantees(self) -> list:
        epsilon = float(self.obj.epsilon)
        delta = float(getattr(self.obj, "delta", 0.0) or 0.0)
        citation = (f"diffprivlib {type(self.obj).__name__}(epsilon={epsilon:g}, delta={delta:g}, "
                    f"sensitivity={self.sensitivity:g}): the object's own guarantee")
        return [FixedGuarantee("diffprivlib-claim", citation, relation, epsilon, delta) for relation in self.relations()]


def from_diffprivlib(mechanism: Any, *, query=None, record_domain: tuple[float, float] | None = None,
                     workers: int = 1) -> DiffprivlibMechanism:
    """Wrap a diffprivlib mechanism object as a dpaudit mechanism.

    Parameters
    ----------
    mechanism : diffprivlib.mechanisms.DPMechanism
        A configured numeric mechanism (its ``epsilon``, ``delta`` and
        ``sensitivity`` are the claim).
    query : callable, optional
        ``records -> number``; default the sum of records over
        ``[0, sensitivity]``.
    record_domain : (float, float), optional
        Where records lie (default ``(0, sensitivity)``).
    workers : int
        Worker processes for blocks of trials (default 1: this process).

    Returns
    -------
    DiffprivlibMechanism
        Audit it with ``dpaudit.audit(mech, dataset_pair=mech.neighbours())``.
    """
    require("diffprivlib")
    check_version("diffprivlib", SUPPORTED_VERSIONS, "from_diffprivlib")
    sensitivity = getattr(mechanism, "sensitivity", None)
    if not isinstance(sensitivity, (int, float, np.number)):
        raise ParameterError(f"mechanism must be a numeric diffprivlib mechanism with a sensitivity, got "
                             f"{type(mechanism).__name__}")
    own = copy.copy(mechanism)  # a copy whose generator pickles (worker processes); each block reseeds it
    own._rng = own.random_state = np.random.RandomState(0)
    return DiffprivlibMechanism(query=query, sensitivity=float(sensitivity), record_domain=record_domain,
                                workers=workers, label=type(mechanism).__name__, obj=own)
