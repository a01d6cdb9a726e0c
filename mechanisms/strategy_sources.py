"""Where a dp-mf strategy comes from: a name, a ``.npy`` file, or jax_privacy's optimisers (docs/theory.md 12.1).

``resolve_strategy`` turns a mechanism's ``strategy`` parameter into the
frozen :class:`Strategy` the sampler and the accountants read: the identity,
DP-FTRL's tree, Toeplitz coefficients, the banded square root; a dense
lower-triangular ``C`` read from a ``.npy`` file (read again when the file
changes); or, where jax_privacy is installed, its optimised strategies:
``bandmf`` (``matrix_factorization.toeplitz.optimize_banded_toeplitz(n,
bands)``, the banded Toeplitz strategy of BandMF) and ``blt``
(``buffered_toeplitz.optimize(n=, min_sep=, max_participations=)``, a buffered
Toeplitz strategy for the cyclic schema, materialised as a dense ``C``). An
optimisation takes seconds (``bandmf``) to tens of seconds (``blt``): it is
kept per process, and a mechanism keeps its own when it is sent to workers.

References
----------
Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS 2023 (BandMF);
jax_privacy 2.0's ``matrix_factorization.toeplitz`` and ``buffered_toeplitz``.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.descriptions import Strategy

__all__ = ["OPTIMISED", "STRATEGIES", "check_lower_matrix", "resolve_strategy"]

#: Strategies computed by jax_privacy's optimisers (where it is installed).
OPTIMISED = ("bandmf", "blt")
#: Strategies by name (a path to a ``.npy`` file gives a dense lower-triangular ``C``).
STRATEGIES = ("identity", "tree", "toeplitz", "banded-sqrt") + OPTIMISED


def resolve_strategy(kind: str, steps: int, epoch_steps: int, epochs: int, coefficients: tuple | None,
                     bands: int | None) -> Strategy:
    """The :class:`Strategy` a ``strategy`` parameter names (its other parameters already checked)."""
    if kind.endswith(".npy"):  # read again when the file changes (its time stamp and size)
        try:
            status = Path(kind).stat()
            stamp = (status.st_mtime_ns, status.st_size)
        except OSError:
            stamp = (0, 0)
        return _file_strategy(kind, steps, stamp)
    if kind in OPTIMISED:
        return _optimised(kind, steps, epoch_steps, epochs, bands)
    return _named_strategy(kind, steps, epoch_steps, coefficients, bands)


@functools.lru_cache(maxsize=64)
def _named_strategy(kind: str, steps: int, epoch_steps: int, coefficients: tuple | None,
                    bands: int | None) -> Strategy:
    # the strategies' module loads SciPy's linear algebra: on the first strategy, not with the mechanism
    from dpaudit.mechanisms.accounting.strategies import banded_sqrt_coefficients

    if kind == "identity":
        return Strategy("identity", steps)
    if kind == "tree":
        return Strategy("tree", steps, epoch_steps=epoch_steps)
    if kind == "toeplitz":
        return Strategy("toeplitz", steps, coefficients=tuple(coefficients))
    return Strategy("banded-sqrt", steps, coefficients=banded_sqrt_coefficients(int(bands)))


@functools.lru_cache(maxsize=16)
def _file_strategy(path: str, steps: int, stamp: tuple[int, int]) -> Strategy:
    """A dense lower-triangular ``C`` read from a ``.npy`` file and checked."""
    # the strategies' module loads SciPy's linear algebra: on the first strategy, not with the mechanism
    from dpaudit.mechanisms.accounting.strategies import dense_strategy

    try:
        matrix = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ParameterError(f"strategy must be a readable .npy file of a {steps} x {steps} matrix, got "
                             f"strategy={path!r} ({exc})") from None
    return dense_strategy(check_lower_matrix(matrix, steps, f"strategy={path!r}"), label=Path(path).name)


def check_lower_matrix(matrix, steps: int, given: str) -> np.ndarray:
    """``matrix`` as a float64 ``(steps, steps)`` lower-triangular array with a non-zero diagonal, or an error."""
    values = np.asarray(matrix, dtype=np.float64)
    if values.shape != (steps, steps):
        raise ParameterError(f"the strategy C must be steps x steps = {steps} x {steps}, got shape {values.shape} "
                             f"({given})")
    if not np.all(np.isfinite(values)) or np.any(np.triu(values, 1) != 0) or np.any(np.diag(values) == 0):
        raise ParameterError(f"the strategy C must be finite and lower-triangular with a non-zero diagonal "
                             f"(the noise is C^-1 z), got another matrix ({given})")
    return values


@functools.lru_cache(maxsize=16)
def _optimised(kind: str, steps: int, epoch_steps: int, epochs: int, bands: int | None) -> Strategy:
    """jax_privacy's optimised strategy for ``steps`` steps (BandMF's banded Toeplitz, or a buffered Toeplitz
    for ``epochs`` participations ``epoch_steps`` apart)."""
    try:
        # jax and jax_privacy are optional (pip install -e ".[jax]") and slow to import: for these strategies only
        import jax
        from jax_privacy.matrix_factorization import buffered_toeplitz, toeplitz

        from dpaudit.mechanisms.accounting.jax_privacy_claims import x64
    except ImportError:
        raise ParameterError(f"strategy={kind!r} is computed by jax_privacy, which is not installed "
                             f"(pip install -e \".[jax]\")") from None
    with x64(jax):
        if kind == "bandmf":
            values = np.asarray(toeplitz.optimize_banded_toeplitz(steps, bands=int(bands)), dtype=np.float64)
            return Strategy("toeplitz", steps, coefficients=tuple(float(v) for v in values),
                            label=f"jax_privacy optimize_banded_toeplitz({steps}, bands={bands})")
        blt = buffered_toeplitz.optimize(n=steps, min_sep=epoch_steps, max_participations=epochs)
        matrix = np.asarray(blt.materialize(steps), dtype=np.float64)
    # the strategies' module loads SciPy's linear algebra: with the first strategy, not with the mechanism
    from dpaudit.mechanisms.accounting.strategies import dense_strategy

    return dense_strategy(np.tril(matrix), label=f"jax_privacy buffered_toeplitz.optimize(n={steps}, "
                                                  f"min_sep={epoch_steps}, max_participations={epochs})")
