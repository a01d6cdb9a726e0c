"""Real datasets for model audits: scikit-learn's bundled data or a user's file, as records.

A record is a row ``(features..., label)``. Features are standardised
(zero mean, unit variance per column) and each row is scaled to norm at
most 1, so that gradients have a known scale; labels are integers ``0..k-1``.
Bundled data come from scikit-learn (the optional ``models`` extra), which
ships them inside the package: nothing is downloaded.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from dpaudit.core.errors import ParameterError

__all__ = ["BUNDLED", "load_records"]

#: name -> scikit-learn loader (data shipped inside scikit-learn)
BUNDLED = {"breast_cancer": "load_breast_cancer", "digits": "load_digits", "iris": "load_iris",
           "wine": "load_wine"}


def _bundled(name: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        import sklearn.datasets
    except ImportError:
        raise ParameterError(f"data={name!r} is bundled with scikit-learn: pip install 'dpaudit[models]'") from None
    bunch = getattr(sklearn.datasets, BUNDLED[name])()
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)


def _file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not path.is_file():
        raise ParameterError(f"data must be one of {', '.join(BUNDLED)} or a .npy/.csv file, got data={str(path)!r}")
    try:
        if path.suffix == ".npy":
            table = np.load(path, allow_pickle=False)
        else:
            table = np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=2, dtype=np.float64)
    except (ValueError, OSError, EOFError):
        raise ParameterError(f"data file {path.name!r} is not a numeric table (.npy, or .csv with the label "
                             f"in the last column)") from None
    if table.ndim != 2 or table.shape[1] < 2 or table.dtype.kind not in "iuf":
        raise ParameterError(f"data file {path.name!r} must be a 2-D numeric table with the label last, "
                             f"got shape {table.shape}")
    return table[:, :-1].astype(np.float64), table[:, -1]


def load_records(data: str | np.ndarray, n: int | None) -> np.ndarray:
    """Records ``(n, features + 1)``: standardised features scaled to norm <= 1, then the label.

    ``data`` is a bundled dataset's name, a file, or an array ``(records, features + 1)`` with the
    label last (Python only).
    """
    if isinstance(data, np.ndarray):
        if data.ndim != 2 or data.shape[1] < 2 or data.dtype.kind not in "iuf":
            raise ParameterError(f"data array must be 2-D and numeric with the label last, got shape {data.shape} "
                                 f"and dtype {data.dtype}")
        return _prepare(data[:, :-1].astype(np.float64), data[:, -1], "array", n)
    return _load_named(data, n)


@functools.lru_cache(maxsize=8)
def _load_named(data: str, n: int | None) -> np.ndarray:
    features, labels = _bundled(data) if data in BUNDLED else _file(Path(data))
    return _prepare(features, labels, data, n)


def _prepare(features: np.ndarray, labels: np.ndarray, data: str, n: int | None) -> np.ndarray:
    if not np.all(np.isfinite(features)):
        raise ParameterError(f"data {data!r} holds NaN or infinite features")
    values, labels = np.unique(labels, return_inverse=True)
    if values.size < 2:
        raise ParameterError(f"data {data!r} needs at least two classes, got {values.size}")
    if n is not None:
        if n > features.shape[0]:
            raise ParameterError(f"n must be at most the {features.shape[0]} records of data {data!r}, got n={n}")
        features, labels = features[:n], labels[:n]
        if np.unique(labels).size < 2:
            raise ParameterError(f"n={n}: the first {n} records of data {data!r} hold one class; use more records")
    spread = features.std(axis=0)
    features = (features - features.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    features = features / np.maximum(norms, 1.0)
    records = np.hstack([features, labels[:, None].astype(np.float64)])
    records.setflags(write=False)
    return records
