"""Canaries: build the neighbouring pair ``(S, S')`` and the direction an attack looks in.

Kinds (docs/theory.md section 4):

``input``
    a record: ``+`` in ``S`` and ``-`` in ``S'`` (the extreme records of the
    loss or query), or removed from ``S'`` (``pair="remove"``, add/remove).
    A mechanism that trains a model takes a target record
    (``target``: from the data, given, or crafted; ``mechanism.input_target``)
    and realises every pair with it: removed (add/remove), a null record of
    zero gradient (zero-out), the data's own record (``pair="replace"``) or
    its mislabelled twin (``"opposite"``).
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

A gradient canary may instead be *scheduled* (``every = k`` or ``steps =
[...]``, dp-sgd and dp-lssgd): its gradient ``L u_t`` joins the batch sum
at the chosen steps whatever the sampling of the other records, with one
direction for all steps or one per step (``directions``); docs/theory.md 10.

Scores are oriented so that they are larger under ``S'``: ``direction`` is a
vector in output space with ``E[<out, direction>]`` larger under ``S'``.
Indices are 1-based.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.attacks.schedules import check_schedule_fields, scheduled_pair
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_choice
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["CANARY_KINDS", "DIRECTIONS", "PAIRS", "PAIR_FOR_RELATION", "CanaryPair", "CanarySpec", "default_kind",
           "least_varying_direction"]

CANARY_KINDS = ("input", "gradient", "reset", "boundary")
PAIRS = ("opposite", "zero", "remove", "replace")
#: The canary pair that realises each neighbouring relation (``[canary] pair``, ``canary={"pair": ...}``).
PAIR_FOR_RELATION = {"replace-one": "opposite", "add-remove": "remove", "zero-out": "zero"}
#: Canary directions chosen from the (public) background records before any trial is drawn.
DIRECTIONS = ("least-varying",)


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class CanaryPair:
    """One neighbouring pair, ready to sample."""

    mechanism: Mechanism
    dataset_a: Dataset
    dataset_b: Dataset
    direction: np.ndarray
    index: int | None
    relation: Relation
    kind: str
    #: how the target record of an input canary was chosen ("" when the mechanism chooses none)
    target: str = ""


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (messages stay one short line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _load_background(path: Path, given: str, shape: tuple[int, int], fixed_n: int | None) -> np.ndarray:
    """Records from a ``.npy`` or whitespace-separated text file; errors name the key, never the contents."""
    if not path.is_file():
        raise ParameterError(f"canary background must be 'data', 'zeros', 'random' or a file, "
                             f"got background={_short(given)}")
    rows = shape[0] if fixed_n else 10**7
    if path.stat().st_size > 64 * rows * shape[1] + 2**20:
        raise ParameterError(f"canary background file {_short(str(path))} is too large for {rows} records "
                             f"of {shape[1]} numbers")
    try:
        if path.suffix == ".npy":
            records = np.load(path, allow_pickle=False)
        else:
            records = np.loadtxt(path, ndmin=2, dtype=np.float64)
    except (ValueError, OSError, EOFError):
        kind = "a NumPy .npy file of numbers (pickled objects are refused)" if path.suffix == ".npy" else \
            "a text file of numbers, one record per line"
        raise ParameterError(f"canary background file {_short(str(path))} is not {kind}") from None
    if records.dtype.kind not in "biuf" or records.ndim not in (1, 2):
        raise ParameterError(f"canary background file {_short(str(path))} must hold a 2-D array of numbers, "
                             f"got dtype {records.dtype} and {records.ndim} dimensions")
    records = records.reshape(-1, 1) if records.ndim == 1 else records
    if records.shape[1] != shape[1] or (fixed_n and records.shape[0] != shape[0]):
        raise ParameterError(f"canary background file must have shape {shape}, got {records.shape}")
    if not np.all(np.isfinite(records)):
        raise ParameterError("canary background file must hold finite numbers, got NaN or inf")
    return records.astype(np.float64)


def default_kind(mechanism: Mechanism) -> str:
    """The tightest canary the mechanism knows for itself (the first of ``canary_kinds``)."""
    if not mechanism.canary_kinds:
        raise ParameterError(f"mechanism {mechanism.name!r} defines no canary: its audit needs dataset_pair=(S, S')")
    return mechanism.canary_kinds[0]


@dataclasses.dataclass(frozen=True, slots=True)
class CanarySpec:
    """What canary to plant where.

    Parameters
    ----------
    kind : str
        One of ``CANARY_KINDS`` (``None``: :func:`default_kind`).
    index : int, list of int, or "all"
        Canary position(s), 1-based (default: the mechanism's ``default_index``, the last record unless it
        knows a worse one).
    background : str, optional
        ``None`` or ``"data"``: the mechanism's own dataset (zero records for
        the synthetic mechanisms, the training data of ``model``);
        ``"zeros"``, ``"random"`` (seeded) or a path to a ``.npy`` / text file.
    pair : str, optional
        ``"opposite"``, ``"zero"``, ``"remove"`` (add/remove: sum queries, and models trained on Poisson
        batches) or ``"replace"`` (an input canary of a model replaces the data's record at its position);
        ``None``: the mechanism's default for the kind (``default_pair_for``).
    direction : list of float or "least-varying", optional
        The canary direction ``u`` (normalised; default the first axis), or
        ``"least-varying"``: the direction along which the other records'
        clipped gradients at the start point vary least
        (:func:`least_varying_direction`), chosen from the background
        before any trial is drawn.
    seed : int
        Seed of the random background.
    every : int, optional
        Schedule the canary's gradient at steps ``k, 2k, ...`` (``k >= 1``).
    steps : list of int, optional
        Schedule it at these 1-based steps instead.
    directions : list of lists of float, optional
        One direction per scheduled step (normalised each); default
        ``direction`` at every step.
    target : str, int, list of float or path, optional
        The target record of an input canary, for mechanisms that train a model
        (``mechanism.input_target``): a crafted one by name, a record of the data
        by 1-based index, ``[features..., label]``, or a file of one such row;
        ``None``: the mechanism's default.
    """

    kind: str | None = None
    index: Any = None
    background: str | None = None
    pair: str | None = None
    direction: tuple[float, ...] | None = None
    seed: int = 0
    every: int | None = None
    steps: tuple[int, ...] | None = None
    directions: tuple[tuple[float, ...], ...] | None = None
    target: Any = None

    def __post_init__(self) -> None:
        if self.kind is not None:
            check_choice("canary kind", self.kind, CANARY_KINDS)
        if self.pair is not None:
            check_choice("canary pair", self.pair, PAIRS)
        if isinstance(self.direction, str):
            check_choice("canary direction", self.direction, DIRECTIONS)
        elif self.direction is not None:
            values = np.atleast_1d(np.asarray(self.direction, dtype=float))  # a scalar is a 1-D direction
            if values.ndim != 1 or not np.all(np.isfinite(values)) or not np.linalg.norm(values) > 0:
                raise ParameterError(f"canary direction must be a non-zero list of numbers, got {self.direction!r}")
            object.__setattr__(self, "direction", tuple(values.tolist()))

        check_schedule_fields(self)
        object.__setattr__(self, "target", _check_target_form(self.target))

    @property
    def scheduled(self) -> bool:
        """True when the canary's gradient is inserted at chosen steps (``every`` or ``steps``)."""
        return self.every is not None or self.steps is not None

    # -- positions ---------------------------------------------------------
    def indices(self, mechanism: Mechanism) -> list[int | None]:
        """The canary positions this spec asks for (``[None]`` for mechanisms without positions).

        Raises
        ------
        ParameterError
            For an index on a mechanism whose records have no positions, an
            index out of ``1..n``, or an index listed twice.
        """
        n = mechanism.n_records
        if self.scheduled:
            if self.index is not None:
                raise ParameterError(f"canary index does not apply to a scheduled canary (its gradient joins the "
                                     f"batch sum at its steps, not at a record position), got "
                                     f"index={_short(self.index)}; remove it")
            return [None]
        if n is None or not mechanism.has_positions:
            if self.index is not None:
                raise ParameterError(f"canary index applies to mechanisms whose records have positions; "
                                     f"{mechanism.name} has none, got index={_short(self.index)}; remove it")
            return [None]
        if self.index is None:
            return [mechanism.default_index]
        if self.index == "all":
            return list(range(1, n + 1))
        if isinstance(self.index, (list, tuple)):
            if not self.index:
                raise ParameterError("canary index list must not be empty")
            positions = [self._one(i, n) for i in self.index]
            seen: set[int] = set()
            for position in positions:
                if position in seen:
                    raise ParameterError(f"canary index lists position {position} twice; give each position once")
                seen.add(position)
            return positions
        return [self._one(self.index, n)]

    def count(self, mechanism: Mechanism) -> int:
        """How many positions :meth:`indices` would give, without building the list."""
        n = mechanism.n_records
        if self.index == "all" and n is not None and mechanism.has_positions:
            return n
        if isinstance(self.index, (list, tuple)):
            return max(len(self.index), 1)
        return 1

    @staticmethod
    def _one(value: Any, n: int) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= n:
            raise ParameterError(f"canary index must be an integer in 1..{n} or 'all', got index={_short(value)}")
        return int(value)

    # -- the pair ------------------------------------------------------------
    def build(self, mechanism: Mechanism, index: int | None) -> CanaryPair:
        """The neighbouring pair with the canary at ``index``."""
        if self.pair is None:
            return dataclasses.replace(self, pair=self.pair_for(mechanism)).build(mechanism, index)
        kind = self.kind or default_kind(mechanism)
        if kind not in mechanism.canary_kinds:
            supported = ", ".join(repr(k) for k in mechanism.canary_kinds) or "none"
            raise ParameterError(f"canary kind {kind!r} is not supported by mechanism {mechanism.name!r} "
                                 f"(supported: {supported})")
        if self.pair == "remove" and mechanism.n_records is not None \
                and mechanism.pair_relation("remove") is None:
            raise ParameterError(
                f"canary pair 'remove' changes the number of records, which {mechanism.name} fixes at "
                f"n={mechanism.n_records}; use pair='zero' or 'opposite'")
        if self.target is not None and (kind != "input" or not mechanism.chooses_targets):
            raise ParameterError(f"canary target chooses the record of an input canary of a mechanism that trains "
                                 f"a model; kind={kind!r} of {mechanism.name!r} takes none, got "
                                 f"target={_short(self.target)}; remove it")
        if self.pair == "replace" and (kind != "input" or not mechanism.chooses_targets):
            raise ParameterError(f"canary pair 'replace' puts a target record in place of the data's record; it "
                                 f"needs kind='input' on a mechanism that trains a model, got kind={kind!r} of "
                                 f"{mechanism.name!r}")
        if kind == "boundary":
            mechanism = mechanism.with_boundary_start()
        if self.scheduled:
            return CanaryPair(*scheduled_pair(self, mechanism, kind, index))
        background = self._background(mechanism)
        position = 1 if index is None else index
        if self.direction == "least-varying":
            u = least_varying_direction(mechanism, background, position)
        else:
            u = self._unit(mechanism.canary_dim)
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
        if self.background in (None, "data"):
            return mechanism.default_dataset()
        if self.background == "zeros":
            return Dataset(np.zeros(shape))
        if self.background == "random":
            return Dataset(mechanism.random_background(np.random.default_rng(self.seed), shape))
        return Dataset(_load_background(Path(self.background), self.background, shape, mechanism.n_records))

    def pair_for(self, mechanism: Mechanism) -> str:
        """The pair asked for, or the mechanism's default for the canary's kind (``opposite`` unless it says
        otherwise; ``zero`` for a scheduled canary: its gradient present at its steps or absent)."""
        if self.pair or self.scheduled:
            return self.pair or "zero"
        return mechanism.default_pair_for(self.kind or (mechanism.canary_kinds[0] if mechanism.canary_kinds
                                                        else "input"))

    def _relation(self, mechanism: Mechanism) -> Relation:
        relation = mechanism.pair_relation(self.pair_for(mechanism))  # e.g. shuffled batches: zero-out only
        if relation is not None:
            return relation
        if mechanism.zero_record_is_absent and self.pair in ("zero", "remove"):
            return Relation.ADD_REMOVE
        return Relation.REPLACE_ONE

    def _gradient_pair(self, mechanism, background, position, u, kind, index) -> CanaryPair:
        scale, sign = mechanism.gradient_canary()
        if not np.isfinite(scale):
            raise ParameterError(f"a gradient canary needs a finite Lipschitz constant, got L={scale}")
        data_a = background.inject(position, scale * u)
        data_b = background.inject(position, (-scale if self.pair == "opposite" else 0.0) * u)
        return CanaryPair(mechanism, data_a, data_b, mechanism.output_direction(sign * u), index,
                          self._relation(mechanism), kind)

    def _input_pair(self, mechanism, background, position, u, kind, index) -> CanaryPair:
        if kind == "input" and mechanism.chooses_targets:
            return self._target_pair(mechanism, background, position, u, index)
        record_a, record_b, direction = mechanism.canary_records(u, reset=kind == "reset")
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
        # a zero record may still have a gradient (a model's bias): the mechanism says whether it is absent
        relation = self._relation(mechanism) if mechanism.zero_input_is_absent \
            else Relation.REPLACE_ONE
        return CanaryPair(mechanism, data_a, data_b, mechanism.output_direction(np.asarray(direction, dtype=float)),
                          index, relation, kind)


    def _target_pair(self, mechanism, background, position, u, index) -> CanaryPair:
        """A target record (``mechanism.input_target``) in ``S``; in ``S'`` removed, a null record of zero gradient
        (``zero``: zero-out, add/remove where a zero gradient is an absence), the data's own record
        (``replace``) or the target's twin (``opposite``); the direction from their gradients at the start."""
        record, twin, described = mechanism.input_target(self.target, background, position, u)
        data_a = background.replace_record(position, record)
        other = None
        if self.pair == "remove":
            data_b = background.remove(position)
        elif self.pair == "zero":
            data_b = data_a.inject(position, np.zeros(mechanism.canary_dim))
        elif self.pair == "replace":
            data_b, other = background, np.array(background.records[position - 1])
        else:
            data_b, other = background.replace_record(position, twin), twin
        relation = self._relation(mechanism) if self.pair in ("remove", "zero") else Relation.REPLACE_ONE
        direction = mechanism.output_direction(np.asarray(mechanism.input_direction(record, other), dtype=float))
        return CanaryPair(mechanism, data_a, data_b, direction, index, relation, "input", described)


def _check_target_form(target: Any) -> Any:
    """A canary target's form, checked before any mechanism reads it: ``None``, a name or path, a record index
    (1-based), or a list of numbers (as a tuple); ``mechanism.input_target`` checks the rest."""
    if target is None or isinstance(target, str):
        return target
    if isinstance(target, (int, np.integer)) and not isinstance(target, bool) and target >= 1:
        return int(target)
    if isinstance(target, (list, tuple, np.ndarray)):
        values = np.asarray(target, dtype=object).ravel()
        if values.size >= 2 and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
                                    for v in values) and np.all(np.isfinite(values.astype(float))):
            return tuple(float(v) for v in values)
    raise ParameterError(f"canary target must be a name, a record index (1-based), a list [features..., label] of "
                         f"finite numbers or a file, got target={_short(target)}")


def least_varying_direction(mechanism: Mechanism, background: Dataset, position: int) -> np.ndarray:
    """The unit ``u`` minimising ``sum_i <g_i, u>^2`` over the other records' clipped gradients ``g_i``.

    Under Poisson sampling a step's batch sum moves along ``u`` with
    variance ``q (1 - q) sum_i <g_i, u>^2``: along this ``u`` the other
    records add the least noise to what the canary moves (docs/theory.md
    5.1). The gradients are taken at the public start point and depend on
    the background records only, never on trials, so the choice costs the
    certification nothing. The eigenvector of the smallest eigenvalue of
    ``sum_i g_i g_i^T``, its sign fixed so its largest entry is positive.
    """
    gradients = mechanism.clipped_record_gradients(background)
    others = np.delete(gradients, position - 1, axis=0) if 1 <= position <= len(gradients) else gradients
    _, vectors = np.linalg.eigh(others.T @ others)
    u = vectors[:, 0]
    return u if u[np.argmax(np.abs(u))] > 0 else -u
