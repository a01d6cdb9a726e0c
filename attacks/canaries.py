"""Canaries: build the neighbouring pair ``(S, S')`` and the direction an attack looks in.

Kinds (THEORY.md section 4):

``input``
    a record: ``+`` in ``S`` and ``-`` in ``S'`` (the extreme records of the
    loss or query), or removed from ``S'`` (``pair="remove"``, add/remove).
``gradient``
    a gradient-space ("Dirac") canary: ``+L u`` in ``S`` and ``-L u`` in
    ``S'`` (``pair="opposite"``, the replace-one worst case), or a zero
    gradient in ``S'`` (``pair="zero"``). The white-box worst case.
``reset``
    for ``projected-kernel``: the canary's step is the constant map
    ``w -> c + u`` in ``S`` and ``w -> c - u`` in ``S'``; later steps are
    translations, so the per-index bound of Thm 22/23 is attained exactly.
``boundary``
    a gradient canary on a bounded domain with the start point on the
    boundary of ``K`` (``init="boundary"``).

Scores are oriented so that they are larger under ``S'``: ``direction`` is a
vector in output space with ``E[<out, direction>]`` larger under ``S'``.
Indices are 1-based.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.dpsgd import DPSGD
from dpaudit.mechanisms.kernels import ProjectedKernel
from dpaudit.mechanisms.sgd import PNSGD
from dpaudit.mechanisms.shuffle import ShuffledRR
from dpaudit.mechanisms.errors import ParameterError
from dpaudit.mechanisms.validation import check_choice

__all__ = ["CANARY_KINDS", "PAIRS", "CanaryPair", "CanarySpec", "default_kind"]

CANARY_KINDS = ("input", "gradient", "reset", "boundary")
PAIRS = ("opposite", "zero", "remove")
_GRADIENT_MECHANISMS = (PNSGD, DPSGD, ProjectedKernel)  # subclasses (e.g. zoo variants) included


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class CanaryPair:
    """One neighbouring pair, ready to sample."""

    mechanism: Mechanism
    dataset_a: Dataset
    dataset_b: Dataset
    direction: np.ndarray
    index: int | None
    relation: str
    kind: str


def default_kind(mechanism: Mechanism) -> str:
    """The tightest canary the toolkit knows for this mechanism."""
    if isinstance(mechanism, ProjectedKernel):
        return "reset"
    if isinstance(mechanism, _GRADIENT_MECHANISMS):
        return "gradient"
    return "input"


@dataclasses.dataclass(frozen=True, slots=True)
class CanarySpec:
    """What canary to plant where.

    Parameters
    ----------
    kind : str
        One of ``CANARY_KINDS`` (``None``: :func:`default_kind`).
    index : int, list of int, or "all"
        Canary position(s), 1-based (default: the last record).
    background : str
        ``"zeros"``, ``"random"`` (seeded) or a path to a ``.npy`` / text file.
    pair : str
        ``"opposite"``, ``"zero"`` or ``"remove"`` (add/remove, sum queries only).
    direction : list of float, optional
        The canary direction ``u`` (normalised; default the first axis).
    seed : int
        Seed of the random background.
    """

    kind: str | None = None
    index: Any = None
    background: str = "zeros"
    pair: str = "opposite"
    direction: tuple[float, ...] | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind is not None:
            check_choice("canary kind", self.kind, CANARY_KINDS)
        check_choice("canary pair", self.pair, PAIRS)
        if self.direction is not None:
            values = np.asarray(self.direction, dtype=float)
            if values.ndim != 1 or not np.all(np.isfinite(values)) or not np.linalg.norm(values) > 0:
                raise ParameterError(f"canary direction must be a non-zero list of numbers, got {self.direction!r}")
            object.__setattr__(self, "direction", tuple(values.tolist()))

    # -- positions ---------------------------------------------------------
    def indices(self, mechanism: Mechanism) -> list[int | None]:
        """The canary positions this spec asks for (``[None]`` for unordered mechanisms)."""
        n = mechanism.n_records
        if n is None or isinstance(mechanism, ShuffledRR):
            return [None] if self.index in (None, "all") else [self._one(self.index, 10**9)]
        if self.index is None:
            return [n]
        if self.index == "all":
            return list(range(1, n + 1))
        if isinstance(self.index, (list, tuple)):
            if not self.index:
                raise ParameterError("canary index list must not be empty")
            return [self._one(i, n) for i in self.index]
        return [self._one(self.index, n)]

    @staticmethod
    def _one(value: Any, n: int) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= n:
            raise ParameterError(f"canary index must be an integer in 1..{n} or 'all', got index={value!r}")
        return int(value)

    # -- the pair ------------------------------------------------------------
    def build(self, mechanism: Mechanism, index: int | None) -> CanaryPair:
        """The neighbouring pair with the canary at ``index``."""
        kind = self.kind or default_kind(mechanism)
        if kind == "reset" and not isinstance(mechanism, ProjectedKernel):
            raise ParameterError(f"canary kind 'reset' needs mechanism 'projected-kernel', got {mechanism.name!r}")
        if kind in ("gradient", "boundary") and not isinstance(mechanism, _GRADIENT_MECHANISMS):
            raise ParameterError(
                f"canary kind {kind!r} needs an iterative mechanism (pnsgd, multi-epoch-pnsgd, dp-sgd, "
                f"dp-lssgd, projected-kernel), got {mechanism.name!r}")
        if self.pair == "remove" and mechanism.n_records is not None:
            raise ParameterError(
                f"canary pair 'remove' changes the number of records, which {mechanism.name} fixes at "
                f"n={mechanism.n_records}; use pair='zero' or 'opposite'")
        if kind == "boundary":
            if mechanism.domain == "whole":
                raise ParameterError("canary kind 'boundary' needs a bounded domain, got domain='whole'")
            mechanism = dataclasses.replace(mechanism, init="boundary")
        background = self._background(mechanism)
        position = 1 if index is None else index
        u = self._unit(getattr(mechanism, "dim", mechanism.output_dim))
        if isinstance(mechanism, ShuffledRR):
            return self._shuffle_pair(mechanism, background, position, kind)
        if kind in ("gradient", "boundary"):
            return self._gradient_pair(mechanism, background, position, u, kind, index)
        return self._input_pair(mechanism, background, position, u, kind, index)

    def _unit(self, dim: int) -> np.ndarray:
        if self.direction is None:
            u = np.zeros(dim)
            u[0] = 1.0
            return u
        u = np.asarray(self.direction, dtype=float)
        if u.size != dim:
            raise ParameterError(f"canary direction must have {dim} numbers, got {u.size}")
        return u / np.linalg.norm(u)

    def _background(self, mechanism: Mechanism) -> Dataset:
        n = mechanism.n_records or 1
        shape = (n, mechanism.record_dim)
        if self.background == "zeros":
            return Dataset(np.zeros(shape))
        if self.background == "random":
            rng = np.random.default_rng(self.seed)
            if isinstance(mechanism, ShuffledRR):
                return Dataset(rng.integers(0, 2, shape).astype(float))
            records = rng.standard_normal(shape) / np.sqrt(shape[1])
            return Dataset(records)
        path = Path(self.background)
        if not path.is_file():
            raise ParameterError(
                f"canary background must be 'zeros', 'random' or a file, got background={self.background!r}")
        records = np.load(path) if path.suffix == ".npy" else np.loadtxt(path, ndmin=2)
        data = Dataset(records)
        if data.records.shape[1] != shape[1] or (mechanism.n_records and data.n != n):
            raise ParameterError(f"canary background file must have shape {shape}, got {data.records.shape}")
        return data

    def _relation(self, mechanism: Mechanism) -> str:
        # A zero record is an absent record for sum queries, and for Poisson-sampled
        # DP-SGD, whose sum is divided by the fixed expected batch size.
        absent = mechanism.n_records is None or getattr(mechanism, "sampling", None) == "poisson"
        if absent and self.pair in ("zero", "remove"):
            return "add-remove"
        return "replace-one"

    def _gradient_pair(self, mechanism, background, position, u, kind, index) -> CanaryPair:
        kernel = isinstance(mechanism, ProjectedKernel)
        scale = mechanism.shift if kernel else mechanism.loss_function.lipschitz
        if not np.isfinite(scale):
            raise ParameterError(f"a gradient canary needs a finite Lipschitz constant, got L={scale}")
        data_a = background.inject(position, scale * u)
        data_b = background.inject(position, (-scale if self.pair == "opposite" else 0.0) * u)
        # PNSGD/DP-SGD steps subtract the gradient (larger under S'); kernels add the shift
        direction = -u if kernel else u
        return CanaryPair(mechanism, data_a, data_b, direction, index, self._relation(mechanism), kind)

    def _input_pair(self, mechanism, background, position, u, kind, index) -> CanaryPair:
        record_a, record_b, sign = _extreme_records(mechanism, u, reset=kind == "reset")
        data_a = background.replace_record(position, record_a)
        if self.pair == "remove" and background.n == 1:
            # a sum query of no records equals the sum of one zero record
            data_b = Dataset(np.zeros((1, mechanism.record_dim)))
        elif self.pair == "remove":
            data_b = background.remove(position)
        elif self.pair == "zero":
            data_b = background.replace_record(position, np.zeros(mechanism.record_dim))
        else:
            data_b = background.replace_record(position, record_b)
        return CanaryPair(mechanism, data_a, data_b, sign * _output_axis(mechanism, u), index,
                          self._relation(mechanism), kind)

    def _shuffle_pair(self, mechanism, background, position, kind) -> CanaryPair:
        data_a = background.replace_record(position, [1.0])
        data_b = background.replace_record(position, [0.0])
        # S has one more 1-report in expectation: the count is larger under S
        return CanaryPair(mechanism, data_a, data_b, -np.ones(mechanism.n), None, "replace-one", kind)


def _output_axis(mechanism: Mechanism, u: np.ndarray) -> np.ndarray:
    return u if u.size == mechanism.output_dim else np.resize(u, mechanism.output_dim)


def _extreme_records(mechanism: Mechanism, u: np.ndarray, *, reset: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """Records ``(x, x')`` at the ends of the record space, and the sign of ``direction = sign * u``."""
    name = mechanism.name
    if isinstance(mechanism, ProjectedKernel):
        flag = 1.0 if reset else 0.0
        shift = mechanism.shift * u
        return np.append(shift, flag), np.append(-shift, flag), -1.0
    if name in ("gaussian", "laplace"):  # sum queries
        if name == "laplace":
            u = u / np.abs(u).sum()
        return mechanism.sensitivity * u, -mechanism.sensitivity * u, -1.0
    loss = mechanism.loss_function
    if loss.name == "linear":
        return loss.lipschitz * u, -loss.lipschitz * u, 1.0
    if loss.name == "quadratic":
        radius = loss.domain.diameter(loss.dim) / 2
        return radius * u, -radius * u, -1.0
    if loss.name == "logistic":  # label +1 pulls w along +x
        return np.append(loss.lipschitz * u, 1.0), np.append(loss.lipschitz * u, -1.0), -1.0
    big = 1e6  # huber: a huge label saturates the derivative at -1 (pulls w along +x)
    return np.append(loss.lipschitz * u, big), np.append(loss.lipschitz * u, -big), -1.0
