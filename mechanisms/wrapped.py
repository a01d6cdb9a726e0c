"""Wrap a plain Python function as a mechanism, so users can audit their own code."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["BatchedCallableMechanism", "CallableMechanism", "from_batched_callable", "from_callable"]


@dataclasses.dataclass(frozen=True)
class CallableMechanism(Mechanism):
    """A mechanism given by ``fn(dataset, rng) -> array`` (one trial per call).

    This is the one mechanism that loops over trials in Python: it runs code
    the toolkit did not write. ``rng`` is a ``numpy.random.Generator``
    derived from the seed; ``dataset`` is the records array.
    """

    fn: Callable[[np.ndarray, np.random.Generator], Any]
    dim: int
    label: str = "callable"
    record_domain: tuple[float, float] | None = None  # declared: records outside it are refused
    #: False: ``fn`` draws randomness ``rng`` does not fix (a C++ library seeded by the operating system), so a
    #: rerun with the same seed draws other trials (``AuditHooks.seeded``)
    seeded: bool = True

    name = "callable"
    summary = "a user function fn(dataset, rng) -> array, one trial per call"

    @property
    def declared_record_domain(self) -> tuple[float, float] | None:
        return None if self.record_domain is None else tuple(float(v) for v in self.record_domain)
    tiled = False  # the user function may not be thread-safe: one call, one generator
    canary_kinds = ()  # records of a user function are opaque: audits take a dataset pair
    release_grid = None  # released exactly as the user's code computes it: its float leaks are what we audit

    def validate(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn must be callable, got fn={self.fn!r}")
        check_int("output_dim", self.dim, minimum=1)
        if not isinstance(self.seeded, (bool, np.bool_)):
            raise ParameterError(f"seeded must be True or False, got seeded={self.seeded!r}")
        if self.record_domain is not None:
            low, high = (float(v) for v in self.record_domain)
            if not (np.isfinite(low) and np.isfinite(high) and low < high):
                raise ParameterError(f"record_domain must be two finite numbers low < high, got "
                                     f"record_domain={self.record_domain!r}")

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return 1

    @property
    def n_records(self) -> None:
        return None

    @property
    def params(self) -> dict[str, Any]:
        unseeded = {} if self.seeded else {"seeded": False}  # seeded code keeps its audit ids
        return {"function": self.label, "output_dim": self.dim, **unseeded}

    def check_dataset(self, data: Dataset) -> None:
        if not np.all(np.isfinite(data.records)):
            raise ParameterError("dataset records must be finite, got NaN or inf")
        if self.record_domain is not None and data.records.size:
            low, high = self.record_domain
            if data.records.min() < low or data.records.max() > high:
                raise ParameterError(f"records must lie in the declared record_domain [{low:g}, {high:g}], "
                                     f"got values in [{data.records.min():g}, {data.records.max():g}]")

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        rows = np.empty((trials, self.dim), dtype=np.float64)
        for trial in range(trials):
            value = np.asarray(self.fn(data.records, rng), dtype=np.float64).ravel()
            if value.shape != (self.dim,):
                raise ParameterError(
                    f"fn must return {self.dim} numbers per call, got shape {value.shape}")
            rows[trial] = value
        return torch.from_numpy(rows)


def from_callable(fn: Callable[[np.ndarray, np.random.Generator], Any], output_dim: int,
                  *, name: str | None = None, record_domain: tuple[float, float] | None = None,
                  seeded: bool = True) -> CallableMechanism:
    """Wrap ``fn(dataset, rng) -> array`` of length ``output_dim`` as a mechanism.

    Parameters
    ----------
    fn : callable
        Called once per trial with the records array and a
        ``numpy.random.Generator``; must use only that generator for
        randomness so that seeds reproduce.
    output_dim : int
        Length of ``fn``'s output.
    name : str, optional
        Label used in reports (default: the function's qualified name).
    record_domain : (float, float), optional
        Where records lie: datasets outside it are refused, and
        ``dpaudit.search`` builds its candidate pairs from it.
    seeded : bool
        False when ``fn`` draws randomness that ``rng`` does not fix (a library seeded by the operating
        system): the audit is as valid, but a rerun with the same seed draws other trials, and messages
        and reports say so instead of giving a seed to reproduce with.
    """
    return CallableMechanism(fn, output_dim, _label(fn, name), record_domain, seeded)


@dataclasses.dataclass(frozen=True)
class BatchedCallableMechanism(CallableMechanism):
    """A mechanism given by ``fn(dataset, rng, trials) -> array of shape (trials, dim)``.

    The user's own training loop runs many independent trials per call (for
    example models stacked over a trial axis), so nothing loops over trials
    in Python here. The trials must be independent given ``rng``.
    """

    name = "batched-callable"
    summary = "a user function fn(dataset, rng, trials) -> (trials, dim) array, all trials in one call"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        value = self.fn(data.records, rng, trials)
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
        rows = np.asarray(value, dtype=np.float64)
        if rows.shape != (trials, self.dim):
            raise ParameterError(f"fn must return an array of shape (trials, {self.dim}) = ({trials}, {self.dim}), "
                                 f"got shape {rows.shape}")
        return torch.from_numpy(np.ascontiguousarray(rows))


def from_batched_callable(fn: Callable[[np.ndarray, np.random.Generator, int], Any], output_dim: int,
                          *, name: str | None = None, record_domain: tuple[float, float] | None = None,
                          seeded: bool = True) -> BatchedCallableMechanism:
    """Wrap ``fn(dataset, rng, trials) -> (trials, output_dim)`` array as a mechanism.

    Parameters
    ----------
    fn : callable
        Called once per chunk of trials with the records array, a
        ``numpy.random.Generator`` and the number of trials; returns one row
        per trial (a NumPy array or a torch tensor). It must draw its
        randomness from ``rng`` only (for example ``torch.Generator().manual_seed(
        int(rng.integers(2**63)))``), so that seeds reproduce.
    output_dim : int
        Columns of ``fn``'s output.
    name : str, optional
        Label used in reports (default: the function's qualified name).
    record_domain : (float, float), optional
        As for :func:`from_callable`.
    seeded : bool
        As for :func:`from_callable` (False for a library that draws its own noise).
    """
    return BatchedCallableMechanism(fn, output_dim, _label(fn, name), record_domain, seeded)


def _label(fn: Callable, name: str | None) -> str:
    """The label reports use: ``name``, else the function's qualified name."""
    return name or getattr(fn, "__qualname__", getattr(fn, "__name__", "callable"))
