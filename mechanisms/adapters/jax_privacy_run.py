"""Running a user's jax training for the jax_privacy adapter: jax found and checked, matrices materialised,
trials vmapped over jax keys (``mechanisms.adapters.jax_privacy``).

jax and jax_privacy are imported here, when the adapter is used, never with
``import dpaudit``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.jax_privacy_claims import x64
from dpaudit.mechanisms.adapters.base import library_version, require

__all__ = ["SUPPORTED_VERSIONS", "VmappedTraining", "cleaned", "inverse", "jax_modules", "materialise"]

#: The jax_privacy releases whose API (privatizer, sensitivity functions, accountants) the adapter reads.
SUPPORTED_VERSIONS = ">=2.0,<2.1"


@functools.lru_cache(maxsize=1)
def jax_modules() -> Any:
    """``jax``, once jax and a supported jax_privacy are known to import (kept once found); else a one-line
    ParameterError."""
    jax = require("jax", "jax")
    require("jax_privacy", "jax")
    version = library_version("jax_privacy")
    parts = version.split(".")
    if parts[:2] != ["2", "0"]:
        raise ParameterError(f"from_jax_privacy supports jax_privacy {SUPPORTED_VERSIONS} (the 2.0.x API), "
                             f"got jax_privacy {version}")
    return jax


# -- the matrices the privatizer and the claims were given --------------------------------------------------
def materialise(value: Any, steps: int, given: str) -> tuple[np.ndarray, np.dtype]:
    """A strategy object, a ``StreamingMatrix`` or an array as a float64 ``(steps, steps)`` array, with the
    dtype it was stored in (its round-off decides which entries are zero)."""
    jax = jax_modules()
    # jax_privacy's matrix types, only where this adapter is used (an optional library)
    from jax_privacy.matrix_factorization import banded, buffered_toeplitz, streaming_matrix

    with x64(jax):
        if isinstance(value, banded.ColumnNormalizedBanded):
            if int(value.n) != steps:
                raise ParameterError(f"{given} is a ColumnNormalizedBanded of n={int(value.n)} steps, got "
                                     f"steps={steps}")
            value = value.materialize()
        elif isinstance(value, (streaming_matrix.StreamingMatrix, buffered_toeplitz.BufferedToeplitz)):
            value = value.materialize(steps)
        try:
            array = np.asarray(value)
            matrix = np.asarray(array, dtype=np.float64)
        except (TypeError, ValueError):
            raise ParameterError(f"{given} must be a steps x steps matrix, a jax_privacy StreamingMatrix or "
                                 f"strategy, got {type(value).__name__}") from None
    dtype = array.dtype if array.dtype.kind == "f" else np.dtype(np.float64)
    if matrix.shape != (steps, steps):
        raise ParameterError(f"{given} must be steps x steps = {steps} x {steps}, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(np.triu(matrix, 1) != 0) or np.any(np.diag(matrix) == 0):
        raise ParameterError(f"{given} must be finite and lower-triangular with a non-zero diagonal (a causal, "
                             f"invertible strategy), got another {steps} x {steps} matrix")
    return matrix, dtype


def cleaned(lower: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``lower`` with entries within the round-off of its dtype taken as zero (a float32 inverse materialised
    and inverted back leaves ~1e-8 where the strategy has its zeros)."""
    tolerance = 8 * lower.shape[0] * float(np.finfo(dtype).eps) * float(np.abs(lower).max())
    return np.where(np.abs(lower) <= tolerance, 0.0, lower)


def inverse(matrix: np.ndarray) -> np.ndarray:
    """The inverse of a lower-triangular matrix (``C`` from the privatizer's ``C^{-1}``)."""
    # SciPy's triangular solve, on the path of a claim only
    from scipy.linalg import solve_triangular

    return solve_triangular(matrix, np.eye(matrix.shape[0]), lower=True)




class VmappedTraining:
    """``jax.jit(jax.vmap(train))`` over trial keys, in blocks of ``block`` trials (one shape: jit compiles
    once); a trial's release depends on its key alone."""

    def __init__(self, train: Callable[..., Any], block: int) -> None:
        self.train, self.block = train, int(block)
        self._compiled: Callable[..., Any] | None = None

    @functools.cached_property
    def key_shape(self) -> tuple[int, ...]:
        jax = jax_modules()
        return tuple(jax.random.key_data(jax.random.key(0)).shape)

    def keys(self, data: np.ndarray) -> Any:
        jax = jax_modules()
        return jax.random.wrap_key_data(jax.numpy.asarray(data, dtype=jax.numpy.uint32))

    @staticmethod
    def jax_records(records: np.ndarray) -> Any:
        jax = jax_modules()
        return jax.numpy.asarray(records, dtype=jax.dtypes.canonicalize_dtype(np.float64))

    def batched(self) -> Callable[..., Any]:
        jax = jax_modules()
        # jax's pytree flattening, with the adapter (an optional library)
        from jax.flatten_util import ravel_pytree

        train = self.train
        return jax.vmap(lambda key, records: ravel_pytree(train(key, records))[0], in_axes=(0, None))

    def shape(self, records: np.ndarray) -> tuple[int, str]:
        """``(output size, dtype name)`` of one trial's release, from tracing ``train`` over two keys."""
        jax = jax_modules()
        keys = self.keys(np.zeros((2,) + self.key_shape, dtype=np.uint32))
        try:
            out = jax.eval_shape(self.batched(), keys, self.jax_records(records))
        except Exception as exc:  # noqa: BLE001 - the user's code: any failure is reported in one line
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise ParameterError(f"train(key, records) must run under jax.vmap and return arrays, got "
                                 f"{type(exc).__name__}: {first}") from None
        if len(out.shape) != 2 or out.shape[1] < 1:
            raise ParameterError(f"train must return numbers, got an empty release of shape {out.shape[1:]}")
        return int(out.shape[1]), str(np.dtype(out.dtype))

    def sample(self, records: np.ndarray, trials: int, rng: np.random.Generator, output_dim: int) -> np.ndarray:
        """``trials`` releases, shape ``(trials, output_dim)``, every key drawn from ``rng`` first."""
        if self._compiled is None:
            self._compiled = jax_modules().jit(self.batched())
        key_data = rng.integers(0, 2**32, size=(trials,) + self.key_shape, dtype=np.uint32)
        values_in = self.jax_records(records)
        out = np.empty((trials, output_dim), dtype=np.float64)
        for start in range(0, trials, self.block):
            part = key_data[start:start + self.block]
            size = len(part)
            if size < self.block:  # one shape only: jit compiles once (a compile costs seconds, padding microseconds)
                part = np.concatenate([part, np.zeros((self.block - size,) + self.key_shape, dtype=np.uint32)])
            values = np.asarray(self._compiled(self.keys(part), values_in), dtype=np.float64)
            out[start:start + size] = values[:size]
        return out

    def __getstate__(self) -> dict[str, Any]:
        """Worker processes get the function, not the compiled one."""
        return {"train": self.train, "block": self.block, "_compiled": None}
