"""Datasets: records in a fixed, public order, plus optional injected gradients.

A dataset is a 2-D array with one row per record (the layout is documented by
each loss or mechanism). A gradient-space ("Dirac") canary bypasses the data
encoding and contributes a chosen gradient at a position; such positions are
held in :attr:`Dataset.injected` (1-based, as in the papers). A scheduled
canary adds a chosen gradient to the batch sum at chosen steps, whatever the
sampling of the records; those are held in :attr:`Dataset.scheduled`
(1-based steps, docs/theory.md 10).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpaudit.core.errors import ParameterError

__all__ = ["Dataset", "as_dataset"]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Dataset:
    """Records plus injected gradients.

    Parameters
    ----------
    records : numpy.ndarray
        Shape ``(n, record_dim)``.
    injected : Mapping[int, numpy.ndarray]
        1-based record position -> gradient vector of length ``dim`` used
        instead of the loss gradient of that record.
    scheduled : Mapping[int, numpy.ndarray]
        1-based step -> gradient vector of length ``dim`` added to that
        step's batch sum whatever the batch holds (a canary inserted by the
        adversary at chosen steps; empty for every other dataset).
    """

    records: np.ndarray
    injected: Mapping[int, np.ndarray] = dataclasses.field(default_factory=dict)
    scheduled: Mapping[int, np.ndarray] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        records = np.asarray(self.records, dtype=np.float64)
        if records.ndim == 1:
            records = records[:, None]
        if records.ndim != 2 or records.shape[0] == 0:
            raise ParameterError(
                f"dataset must be a non-empty 2-D array (records x columns), "
                f"got shape {records.shape}")
        object.__setattr__(self, "records", records)
        injected = {int(k): np.asarray(v, dtype=np.float64).ravel()
                    for k, v in dict(self.injected).items()}
        object.__setattr__(self, "injected", injected)
        scheduled = {int(k): np.asarray(v, dtype=np.float64).ravel()
                     for k, v in dict(self.scheduled).items()}
        object.__setattr__(self, "scheduled", scheduled)

    @property
    def n(self) -> int:
        """Number of records."""
        return self.records.shape[0]

    def check_injected(self, n: int, dim: int) -> None:
        """Raise if an injected gradient has a bad position or length."""
        for position, gradient in self.injected.items():
            if not 1 <= position <= n:
                raise ParameterError(
                    f"injected gradient position must be in 1..{n}, got position={position}")
            if gradient.shape != (dim,) or not np.all(np.isfinite(gradient)):
                raise ParameterError(
                    f"injected gradient at position {position} must be {dim} finite "
                    f"numbers, got shape {gradient.shape}")

    def check_scheduled(self, steps: int | None, dim: int, name: str) -> None:
        """Raise if a scheduled gradient lies beyond the run, has a bad length, or the mechanism has no steps."""
        if not self.scheduled:
            return
        if steps is None:
            raise ParameterError(f"canary steps apply to dp-sgd and dp-lssgd, whose batches are sums of "
                                 f"gradients; {name} has none")
        for step, gradient in self.scheduled.items():
            if not 1 <= step <= steps:
                raise ParameterError(f"canary step {step} is beyond the run: steps are 1..{steps}")
            if gradient.shape != (dim,) or not np.all(np.isfinite(gradient)):
                raise ParameterError(f"canary gradient at step {step} must be {dim} finite numbers, "
                                     f"got shape {gradient.shape}")

    def with_schedule(self, scheduled: Mapping[int, Any]) -> "Dataset":
        """A copy whose batch sums gain ``scheduled[t]`` at each step ``t`` (1-based)."""
        return Dataset(self.records.copy(), dict(self.injected), scheduled)

    def replace_record(self, position: int, record: Any) -> "Dataset":
        """A copy with the record at 1-based ``position`` replaced."""
        records = self.records.copy()
        records[position - 1] = np.asarray(record, dtype=np.float64)
        return Dataset(records, dict(self.injected), dict(self.scheduled))

    def inject(self, position: int, gradient: Any) -> "Dataset":
        """A copy whose record at ``position`` contributes ``gradient`` directly."""
        injected = dict(self.injected)
        injected[position] = np.asarray(gradient, dtype=np.float64)
        return Dataset(self.records.copy(), injected, dict(self.scheduled))

    def remove(self, position: int) -> "Dataset":
        """A copy without the record at ``position`` (add/remove neighbour)."""
        records = np.delete(self.records, position - 1, axis=0)
        injected = {(k if k < position else k - 1): v
                    for k, v in self.injected.items() if k != position}
        return Dataset(records, injected, dict(self.scheduled))


def as_dataset(data: Any) -> Dataset:
    """Accept a :class:`Dataset` or anything ``numpy.asarray`` takes."""
    if isinstance(data, Dataset):
        return data
    try:
        return Dataset(np.asarray(data, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"dataset must be numeric, got {type(data).__name__}") from exc
