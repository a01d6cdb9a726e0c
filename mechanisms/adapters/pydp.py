"""python-dp (Google's differential privacy library) algorithms as dpaudit mechanisms.

``from_pydp(BoundedSum, epsilon=1.0, lower_bound=0, upper_bound=1, dtype="float")``
builds the algorithm from its class and keyword arguments (the objects do
not pickle, so worker processes rebuild them), feeds it the records with
``quick_result`` once per trial, and reads the claim ``(epsilon, delta)``
from the built object. python-dp's guarantee is for adding or removing one
user's record, here one record in ``[lower_bound, upper_bound]``; it covers
replacing a record too when the bounds have one sign (then a replacement
moves a bounded sum by at most ``max(|lower|, |upper|)``, the add/remove
sensitivity); otherwise the replace-one claim is listed as not applicable.

python-dp draws its noise from a secure generator it seeds itself: these
audits are not reproducible from the seed.

References
----------
Wilson, Zhang, Lam, Desfontaines, Simmons-Marengo, Gipson, "Differentially
Private SQL with Bounded User Contribution", PoPETs 2020 (the library).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.descriptions import FixedGuarantee, InapplicableGuarantee
from dpaudit.mechanisms.adapters.base import LibraryMechanism, check_version, require

__all__ = ["PyDPMechanism", "SUPPORTED_VERSIONS", "from_pydp"]

#: The python-dp releases this adapter reads correctly: the floor is the lowest tested (pyproject.toml,
#: docs/versions.md; 1.1.5 the newest); no earlier release installs on Python 3.11.
SUPPORTED_VERSIONS = ">=1.1.4"


@dataclasses.dataclass(frozen=True)
class PyDPMechanism(LibraryMechanism):
    """A python-dp algorithm on the records (one ``quick_result`` per trial)."""

    algorithm: Any = None
    options: tuple[tuple[str, Any], ...] = ()

    name = "python-dp"
    summary = "a python-dp algorithm on the records, claim (epsilon, delta) read from the object"
    library = "pydp"
    seeded = False

    def build(self) -> Any:
        """A fresh algorithm object."""
        return self.algorithm(**dict(self.options))

    def object_params(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm.__name__, **{k: v for k, v in self.options}, "seeded": False}

    def _query_covered(self) -> str | None:
        return None

    def relations(self) -> list[str]:
        low, high = self.domain
        return ["add-remove", "replace-one"] if low * high >= 0 else ["add-remove"]

    def call_argument(self, data) -> np.ndarray:
        return np.asarray(data.records, dtype=np.float64).reshape(-1)

    def draw_block(self, values: np.ndarray, size: int, seed: int) -> np.ndarray:
        records = values.tolist()  # python-dp seeds itself: the block's seed only orders the work
        algorithm = self.build()
        out = np.empty((size, 1))
        for trial in range(size):  # python-dp releases one value per call
            out[trial, 0] = algorithm.quick_result(records)
        return out

    def library_guarantees(self) -> list:
        built = self.build()
        epsilon, delta = float(built.epsilon), float(built.delta)
        citation = (f"python-dp {self.algorithm.__name__}(epsilon={epsilon:g}, delta={delta:g}, bounds "
                    f"{list(self.domain)}): the library's guarantee for adding or removing one record")
        claims = [FixedGuarantee("python-dp-claim", citation, relation, epsilon, delta)
                  for relation in self.relations()]
        if "replace-one" not in self.relations():
            claims.append(InapplicableGuarantee("python-dp-claim", citation, "replace-one",
                                         "bounds of both signs: a replacement can move the result by "
                                         "upper - lower, above the add/remove sensitivity"))
        return claims


def from_pydp(algorithm: type, *, workers: int = 1, **options: Any) -> PyDPMechanism:
    """Wrap a python-dp algorithm class and its keyword arguments as a dpaudit mechanism.

    Parameters
    ----------
    algorithm : type
        A class of ``pydp.algorithms.laplacian`` with ``lower_bound`` and
        ``upper_bound`` (BoundedSum, BoundedMean, ...).
    workers : int
        Worker processes for blocks of trials (default 1: this process).
    **options
        Its keyword arguments (``epsilon``, ``delta``, ``lower_bound``,
        ``upper_bound``, ``dtype``).

    Returns
    -------
    PyDPMechanism
        Audit it with ``dpaudit.audit(mech, dataset_pair=mech.neighbours())``.
    """
    require("pydp")
    check_version("pydp", SUPPORTED_VERSIONS, "from_pydp")
    if not isinstance(algorithm, type) or not hasattr(algorithm, "quick_result"):
        raise ParameterError(f"algorithm must be a python-dp algorithm class, got algorithm={algorithm!r}")
    if "lower_bound" not in options or "upper_bound" not in options:
        raise ParameterError(f"{algorithm.__name__} needs lower_bound and upper_bound (the record domain), "
                             f"got options={sorted(options)}")
    low, high = float(options["lower_bound"]), float(options["upper_bound"])
    mech = PyDPMechanism(sensitivity=max(abs(low), abs(high)) or 1.0, record_domain=(low, high),
                         label=algorithm.__name__, algorithm=algorithm, workers=workers,
                         options=tuple(sorted(options.items())))
    mech.build()  # refuse bad options now, with python-dp's own message
    return mech
