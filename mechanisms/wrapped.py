"""Wrap a plain Python function as a mechanism, so users can audit their own code."""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["BatchedCallableMechanism", "CallableMechanism", "check_signature", "from_batched_callable", "from_callable",
           "numbers_of"]


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

    #: How ``fn`` is called, as messages show it (the arguments :meth:`_sample` passes).
    call: ClassVar[str] = "fn(records, rng) with the records array and a numpy.random.Generator"

    def validate(self) -> None:
        if not callable(self.fn):
            raise ParameterError(f"fn must be callable, got fn={self.fn!r}")
        check_signature(self.fn, self.call)
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
        first: tuple[int, ...] | None = None  # the shape of this chunk's first output: every call returns it
        for trial in range(trials):
            value = numbers_of(self.fn(data.records, rng), f"{self.dim} numbers per call (output_dim={self.dim})",
                               trial + 1)
            if value.size != self.dim:
                raise ParameterError(f"fn must return {self.dim} numbers per call, got shape {value.shape}"
                                     f"{_call(trial + 1)} (output_dim={self.dim})")
            if first is None:
                first = value.shape
            elif value.shape != first:
                raise ParameterError(f"fn must return the same shape at every call, got {first} at the first call "
                                     f"and {value.shape} at call {trial + 1}")
            rows[trial] = value if value.ndim == 1 else value.ravel()
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

    Raises
    ------
    ParameterError
        Here, when ``fn`` cannot be called as ``fn(records, rng)``; at the first call that returns one, for
        an output that is not numbers (strings, None, complex numbers, other objects), not ``output_dim``
        numbers, or of another shape than the chunk's first call returned. An audit refuses NaN at the first
        chunk that holds one (``audit.jobs.runner``), naming the trial and the seed that draws it again.
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

    call = "fn(records, rng, trials) with the records array, a numpy.random.Generator and the number of trials"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        rows = numbers_of(self.fn(data.records, rng, trials), f"an array of shape (trials, {self.dim})", None)
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

    Raises
    ------
    ParameterError
        Here, when ``fn`` cannot be called as ``fn(records, rng, trials)``; at a call, for an output that is
        not numbers or not of shape ``(trials, output_dim)``.
    """
    return BatchedCallableMechanism(fn, output_dim, _label(fn, name), record_domain, seeded)


def check_signature(fn: Callable[..., Any], call: str) -> None:
    """Refuse ``fn`` when it cannot be called as ``call`` says, naming ``fn``, before it is ever called.

    Parameters
    ----------
    fn : callable
        The user's function.
    call : str
        How it is called: ``"fn(a, b) with ..."``; the arguments in the parentheses are bound to ``fn``'s
        signature.

    Raises
    ------
    ParameterError
        When the arguments do not bind (too many or too few positional arguments, a required keyword-only
        argument). A callable whose signature Python cannot read (some builtins) passes: its first call tells.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): the first call will tell
        return
    arguments = call[call.index("(") + 1:call.index(")")].split(", ")
    try:
        signature.bind(*arguments)
    except TypeError as exc:
        raise ParameterError(f"fn must be callable as {call}, got {_label(fn, None)}{signature} ({exc})") from None


def numbers_of(value: Any, expected: str, call: int | None) -> np.ndarray:
    """One call's output as a float64 array, or a one-line ParameterError naming ``fn``.

    Numbers are ints, floats and bools, in an array, a list, a scalar or a (CPU or accelerator) torch tensor;
    strings, None, complex numbers and other objects are refused. Numeric values convert exactly as
    ``np.asarray(value, dtype=np.float64)`` converts them.

    Parameters
    ----------
    value : object
        What ``fn`` returned.
    expected : str
        What it should have returned, as the message says it.
    call : int, optional
        Which call of the chunk returned it (1-based), for the message; ``None`` when a chunk is one call.
    """
    # the plain kinds first: the check of a tensor's class costs a user function's one-trial call much more
    if not isinstance(value, _PLAIN) and isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        value = (value.double() if value.dtype == torch.bfloat16 else value).numpy()  # NumPy has no bfloat16
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise ParameterError(f"fn must return {expected}, got a {type(value).__name__} NumPy cannot read as an "
                             f"array{_call(call)} ({str(exc).split('.')[0]})") from None
    if array.dtype.kind == "O" and all(isinstance(v, numbers.Real) for v in array.flat):
        array = array.astype(np.float64)  # Python numbers of mixed kinds (ints beyond int64, Fractions, Decimals)
    if array.dtype.kind not in "biuf":
        raise ParameterError(f"fn must return {expected}, got {_shown(value, array)}{_call(call)}")
    return array.astype(np.float64, copy=False)


#: What a user function most often returns: none of them is a tensor.
_PLAIN = (list, tuple, np.ndarray, float, int, np.generic)


def _call(number: int | None) -> str:
    """`` at call N`` for the message of the ``number``-th call of a chunk (nothing for ``None``)."""
    return "" if number is None else " at its first call" if number == 1 else f" at call {number}"


def _shown(value: Any, array: np.ndarray) -> str:
    """What a refused output is, in a few words."""
    if value is None:
        return "None"
    if isinstance(value, (str, bytes)):
        text = repr(value)
        return f"the {type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
    kind = {"c": "complex numbers", "U": "strings", "S": "bytes", "M": "datetimes", "m": "timedeltas"}
    if array.dtype.kind in kind:
        return f"{kind[array.dtype.kind]} (a {type(value).__name__} of dtype {array.dtype})"
    if array.dtype.kind == "O" and array.ndim:
        odd = next(v for v in array.flat if not isinstance(v, numbers.Real))
        return f"a {type(value).__name__} holding {type(odd).__name__} objects"
    return f"a {type(value).__name__}"


def _label(fn: Callable, name: str | None) -> str:
    """The label reports use: ``name``, else the function's qualified name."""
    return name or getattr(fn, "__qualname__", getattr(fn, "__name__", "callable"))
