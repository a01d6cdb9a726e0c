"""OpenDP measurements as dpaudit mechanisms, with the claim from the measurement's privacy map.

Two ways in. ``on="query"`` (the default): the measurement randomises the
query's value (an atom domain, or a vector domain of any length); a vector
measurement releases a whole chunk of trials in one call, since the
measurement applied to ``[q, q, ..., q]`` adds independent noise to each
coordinate and each coordinate is one release of ``q`` (the privacy map of
a vector measurement at a distance ``d`` between vectors that differ in one
coordinate is the map of the scalar release). ``on="dataset"``: the
measurement takes the records themselves (e.g. a clamp, a sum and noise)
and is called once per trial; ``d_in`` is then read from its input metric
(symmetric distance: 1 for add/remove, 2 for replace-one; change-one and
Hamming distances: 1 for replace-one). On a sized input domain
(``vector_domain(..., size=n)``, a known-size claim) neighbours hold ``n``
records each: the claim is for replace-one pairs only (the map at
``d_in = 1`` describes no pair of that domain), datasets of another size are
refused, and ``dpaudit.search`` builds datasets of ``n`` records.

The claim is ``measurement.map(d_in)`` in the measurement's own privacy
measure, converted soundly: pure DP ``epsilon`` holds at every delta;
approximate DP ``(epsilon, delta)`` for every larger delta; a privacy
profile (smoothed max divergence) is read at the audit's delta; zCDP
``rho`` is Renyi DP ``rho * alpha`` at every order, converted by
Canonne, Kamath and Steinke (2020), Prop. 12.

OpenDP draws its randomness from the operating system, by design: audits of
OpenDP measurements are not reproducible from the seed (the adapter says so
in its parameters, ``seeded = False``).

A measurement holds C pointers and does not pickle: to audit with worker
processes, build the mechanism with ``from_recipe(factory, *args)``
(:func:`dpaudit.mechanisms.adapters.from_recipe`), ``factory`` a module-level
function that builds the measurement and returns ``from_opendp(...)``; each
worker then builds its own.

References
----------
The OpenDP Library, https://docs.opendp.org (measurements, privacy maps).
Bun & Steinke, "Concentrated Differential Privacy", TCC 2016.
Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, Prop. 12 (zCDP/RDP to approximate DP).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.descriptions import (
    FixedGuarantee,
    InapplicableGuarantee,
    ProfileGuarantee,
    ZcdpGuarantee,
)
from dpaudit.mechanisms.adapters.base import LibraryMechanism, check_version, require

__all__ = ["OpenDPMechanism", "SUPPORTED_VERSIONS", "from_opendp", "measure_guarantee"]

#: The OpenDP releases this adapter reads correctly: the floor is the lowest tested (pyproject.toml,
#: docs/versions.md; 0.16 the newest). Before 0.7 a measurement has no ``input_metric``; 0.7 to 0.12 are
#: untested (their API moved from release to release).
SUPPORTED_VERSIONS = ">=0.13"

_DATASET_DISTANCES = {"SymmetricDistance": {"add-remove": 1, "replace-one": 2},
                      "InsertDeleteDistance": {"add-remove": 1, "replace-one": 2},
                      "ChangeOneDistance": {"replace-one": 1}, "HammingDistance": {"replace-one": 1}}


def measure_guarantee(name: str, citation: str, relation: str, measure: str, value: Any):
    """The guarantee a privacy-map value in OpenDP's ``measure`` states (``accounting.descriptions``)."""
    if measure == "MaxDivergence":
        return FixedGuarantee(name, citation, relation, float(value), 0.0)
    if measure.startswith("Approximate(MaxDivergence)") or measure == "FixedSmoothedMaxDivergence":
        epsilon, delta = value
        return FixedGuarantee(name, citation, relation, float(epsilon), float(delta))
    if measure == "ZeroConcentratedDivergence":
        return ZcdpGuarantee(name, citation, relation, float(value))
    if measure == "SmoothedMaxDivergence":
        def epsilon_of(delta: float) -> float:
            try:
                return float(value.epsilon(delta))
            except Exception:  # noqa: BLE001 - OpenDP refuses deltas its profile does not reach
                return math.inf

        def delta_of(epsilon: float) -> float:
            try:
                return float(value.delta(epsilon))
            except Exception:  # noqa: BLE001 - outside the profile's range: nothing is claimed
                return 1.0

        return ProfileGuarantee(name, citation, relation, epsilon_of, delta_of, key=(id(value),))
    return InapplicableGuarantee(name, citation, relation,
                                 f"privacy measure {measure} has no conversion to (epsilon, delta) here")


@dataclasses.dataclass(frozen=True)
class OpenDPMechanism(LibraryMechanism):
    """An OpenDP measurement on a query (vectorised) or on the dataset (one call per trial)."""

    measurement: Any = None
    on: str = "query"

    name = "opendp"
    summary = "an OpenDP measurement, claim from its privacy map in its own privacy measure"
    library = "opendp"
    seeded = False

    def validate(self) -> None:
        super().validate()
        if self.on not in ("query", "dataset"):
            raise ParameterError(f"on must be 'query' or 'dataset', got on={self.on!r}")
        if not hasattr(self.measurement, "map") or not hasattr(self.measurement, "output_measure"):
            raise ParameterError(f"measurement must be an OpenDP Measurement, got {self.measurement!r}")

    @property
    def vectorised(self) -> bool:
        """True when one call releases many independent draws (a vector domain of any size, on a query)."""
        domain = self.measurement.input_domain
        return self.on == "query" and self.dim == 1 and "VectorDomain" in str(domain) and \
            getattr(domain, "size", None) is None

    @property
    def integer(self) -> bool:
        return "T=i" in str(self.measurement.input_domain) or "T=u" in str(self.measurement.input_domain)

    def object_params(self) -> dict[str, Any]:
        return {"measurement": str(self.measurement.input_domain) + " -> " + str(self.measurement.output_measure),
                "on": self.on, "vectorised": self.vectorised, "seeded": False}

    def _convert(self, values: np.ndarray) -> list:
        if self.integer:
            return [int(v) for v in np.rint(values)]
        return np.asarray(values, dtype=np.float64).tolist()

    def draw(self, values: np.ndarray, trials: int, rng: np.random.Generator) -> np.ndarray:
        if self.vectorised:
            return np.asarray(self.measurement(self._convert(np.repeat(values[:1], trials))),
                              dtype=np.float64).reshape(trials, 1)
        return super().draw(values, trials, rng)

    def draw_block(self, values: np.ndarray, size: int, seed: int) -> np.ndarray:
        raise ParameterError("internal: OpenDP draws are not drawn in seeded blocks")  # pragma: no cover

    def _sample(self, data, trials, rng, dtype):
        if self.on == "query":
            if self.vectorised:
                return super()._sample(data, trials, rng, dtype)
            values = self.query_values(data.records)
            argument = self._convert(values) if "VectorDomain" in str(self.measurement.input_domain) \
                else self._convert(values)[0]
        else:
            argument = self._convert(np.asarray(data.records, dtype=np.float64).reshape(-1))
        # torch loads where the library is called (a worker), not with the adapter
        import torch

        rows = np.empty((trials, self.dim))
        for trial in range(trials):  # one call per release: OpenDP seeds itself, nothing to split
            rows[trial] = np.asarray(self.measurement(argument), dtype=np.float64).reshape(-1)
        return torch.from_numpy(rows)

    def _query_covered(self) -> str | None:
        return None if self.on == "dataset" else super()._query_covered()

    @property
    def dataset_size(self) -> int | None:
        """With ``on="dataset"``, the size of a sized input domain (``vector_domain(..., size=n)``, a known-size
        claim: replace-one neighbours only); else None."""
        size = getattr(self.measurement.input_domain, "size", None) if self.on == "dataset" else None
        return None if size is None else int(size)

    def check_dataset(self, data: Any) -> None:
        super().check_dataset(data)
        size = self.dataset_size
        if size is not None and data.records.shape[0] != size:
            raise ParameterError(f"dataset must hold {size} records, the size of the measurement's input domain "
                                 f"(its claim is for datasets of that size), got {data.records.shape[0]}")

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """The default pair: one record at each end of the record domain, after ``size - 1`` records at its low
        end on a sized domain."""
        first, second = super().neighbours()
        size = self.dataset_size
        if size is None or size == 1:
            return first, second
        pad = np.full((size - 1, 1), self.domain[0])
        return np.vstack([pad, first]), np.vstack([pad, second])

    def relations(self) -> list[str]:
        """The relations the claim covers: those of the input metric with ``on="dataset"`` (replace-one only on a
        sized domain), else the query's (:meth:`LibraryMechanism.relations`)."""
        return list(self.distances()) if self.on == "dataset" else super().relations()

    def distances(self) -> dict[str, Any]:
        """``d_in`` per neighbouring relation. On a sized input domain neighbours have one size: a record
        replaced (symmetric distance 2), never one added, and the map at ``d_in = 1`` is no claim about any pair."""
        if self.on == "query":
            d_in = int(self.sensitivity) if self.integer else float(self.sensitivity)
            return {relation: d_in for relation in super().relations()}
        metric = str(self.measurement.input_metric).split("(")[0]
        if metric not in _DATASET_DISTANCES:
            raise ParameterError(f"on='dataset' needs a dataset metric ({', '.join(_DATASET_DISTANCES)}), "
                                 f"got {self.measurement.input_metric}")
        distances = dict(_DATASET_DISTANCES[metric])
        if self.dataset_size is not None:
            distances.pop("add-remove", None)
        return distances

    def library_guarantees(self) -> list:
        measure = str(self.measurement.output_measure)
        claims = []
        for relation, d_in in self.distances().items():
            citation = f"OpenDP privacy map at d_in={d_in} ({self.measurement.input_metric}), {measure}"
            claims.append(measure_guarantee("opendp-privacy-map", citation, relation, measure,
                                            self.measurement.map(d_in)))
        return claims


def from_opendp(measurement: Any, d_in: float | None = None, *, on: str = "query", query=None,
                record_domain: tuple[float, float] | None = None) -> OpenDPMechanism:
    """Wrap an OpenDP measurement as a dpaudit mechanism.

    Parameters
    ----------
    measurement : opendp.mod.Measurement
        With ``on="query"``: it randomises the query value (atom or vector
        domain); with ``on="dataset"``: it takes the records.
    d_in : float, optional
        The query's sensitivity in the measurement's input metric (``on="query"``,
        default 1); with ``on="dataset"`` the distance comes from the metric.
    query : callable, optional
        ``records -> number`` (default: the sum over ``[0, d_in]``).
    record_domain : (float, float), optional
        Where records lie (default ``(0, d_in)``).

    Returns
    -------
    OpenDPMechanism
    """
    require("opendp")
    check_version("opendp", SUPPORTED_VERSIONS, "from_opendp")
    if on == "dataset" and record_domain is None:
        raise ParameterError("on='dataset' needs record_domain=(low, high), the range the measurement clamps to")
    sensitivity = 1.0 if d_in is None else float(d_in)
    return OpenDPMechanism(query=query, sensitivity=sensitivity, record_domain=record_domain,
                           label=f"{measurement.input_metric} -> {measurement.output_measure}",
                           measurement=measurement, on=on)
