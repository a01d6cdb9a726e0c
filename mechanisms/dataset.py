"""Datasets: records in a fixed, public order, plus optional injected gradients.

A dataset is a 2-D array with one row per record (the layout is documented by
each loss or mechanism). A gradient-space ("Dirac") canary bypasses the data
encoding and contributes a chosen gradient at a position; such positions are
held in :attr:`Dataset.injected` (1-based, as in the papers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from dpaudit.mechanisms.errors import ParameterError

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
    """

    records: np.ndarray
    injected: Mapping[int, np.ndarray] = dataclasses.field(default_factory=dict)

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

    def replace_record(self, position: int, record: Any) -> "Dataset":
        """A copy with the record at 1-based ``position`` replaced."""
        records = self.records.copy()
        records[position - 1] = np.asarray(record, dtype=np.float64)
        return Dataset(records, dict(self.injected))

    def inject(self, position: int, gradient: Any) -> "Dataset":
        """A copy whose record at ``position`` contributes ``gradient`` directly."""
        injected = dict(self.injected)
        injected[position] = np.asarray(gradient, dtype=np.float64)
        return Dataset(self.records.copy(), injected)

    def remove(self, position: int) -> "Dataset":
        """A copy without the record at ``position`` (add/remove neighbour)."""
        records = np.delete(self.records, position - 1, axis=0)
        injected = {(k if k < position else k - 1): v
                    for k, v in self.injected.items() if k != position}
        return Dataset(records, injected)


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
