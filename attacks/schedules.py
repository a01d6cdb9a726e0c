"""Scheduled gradient canaries: a crafted gradient inserted at chosen steps of training.

The hidden-state adversary of Cebere, Bellet and Papernot (2025) inserts a
gradient of its choosing into the batch sum at steps it chooses, whatever the
sampling of the other records, and sees only the last iterate. ``every = k``
inserts it at steps ``k, 2k, ...``; ``steps = [...]`` at explicit 1-based
steps. The direction is the canary's ``direction`` at every step, or one per
step (``directions``). The pair is ``zero`` by default (the gradient present
at its steps in ``S``, absent in ``S'``: the zero-out relation) or
``opposite`` (``+L u_t`` against ``-L u_t``: replace-one). The exact value of
a linear loss and the claims for the canary's steps are in
``mechanisms.accounting.scheduled`` (docs/theory.md 10).

References
----------
Cebere, Bellet, Papernot, "Tighter privacy auditing of DP-SGD in the hidden
state threat model", ICLR 2025.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from dpaudit.mechanisms.base import Mechanism
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation

__all__ = ["check_schedule_fields", "schedule_of", "scheduled_pair"]

MAX_SCHEDULED = 10**6  #: steps one schedule may list


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_schedule_fields(spec: Any) -> None:
    """Validate ``every``, ``steps`` and ``directions`` of a :class:`~dpaudit.attacks.canaries.CanarySpec`
    (the checks that need no mechanism); normalise ``steps`` and ``directions`` to tuples."""
    if spec.every is not None and spec.steps is not None:
        raise ParameterError(f"canary every and steps are two ways to give a schedule; give one, got "
                             f"every={spec.every!r} and steps={spec.steps!r}")
    if spec.every is not None and (not _is_int(spec.every) or spec.every < 1):
        raise ParameterError(f"canary every must be an integer >= 1, got every={spec.every!r}")
    if spec.steps is not None:
        steps = spec.steps
        if (isinstance(steps, (str, bytes)) or not isinstance(steps, (list, tuple)) or not steps
                or len(steps) > MAX_SCHEDULED):
            raise ParameterError(f"canary steps must be a non-empty list of steps (1-based), got steps={steps!r}")
        for step in steps:
            if not _is_int(step) or step < 1:
                raise ParameterError(f"canary steps must be integers >= 1 (1-based), got step {step!r}")
        if len(set(steps)) != len(steps):
            raise ParameterError(f"canary steps must list each step once, got steps={list(steps)!r}")
        object.__setattr__(spec, "steps", tuple(sorted(int(step) for step in steps)))
    if spec.directions is None:
        return
    if spec.every is None and spec.steps is None:
        raise ParameterError("canary directions give one direction per scheduled step; they need every or steps")
    if spec.direction is not None:
        raise ParameterError("canary direction and directions are two ways to give the directions; give one")
    if not isinstance(spec.directions, (list, tuple)) or not spec.directions:
        raise ParameterError(f"canary directions must be a non-empty list of directions, got {spec.directions!r}")
    rows = []
    for number, row in enumerate(spec.directions, start=1):
        try:
            values = np.atleast_1d(np.asarray(row, dtype=float))
        except (TypeError, ValueError):
            values = np.array([np.nan])
        if values.ndim != 1 or not np.all(np.isfinite(values)) or not np.linalg.norm(values) > 0:
            raise ParameterError(f"canary directions: direction {number} must be a non-zero list of numbers, "
                                 f"got {row!r}")
        rows.append(tuple(values.tolist()))
    object.__setattr__(spec, "directions", tuple(rows))


def schedule_of(spec: Any, mechanism: Mechanism) -> list[int]:
    """The 1-based steps the canary's gradient is inserted at, checked against the run.

    Raises
    ------
    ParameterError
        For a mechanism that takes no scheduled canary, a step beyond the
        run, or ``every`` larger than the run.
    """
    total = mechanism.schedule_steps
    if total is None:
        raise ParameterError(f"canary every/steps apply to dp-sgd and dp-lssgd (a gradient joins a step's batch "
                             f"sum); {mechanism.name} has no such steps: remove them")
    if spec.every is not None:
        if spec.every > total:
            raise ParameterError(f"canary every={spec.every} schedules no step in a run of {total} steps")
        return list(range(spec.every, total + 1, spec.every))
    beyond = [step for step in spec.steps if step > total]
    if beyond:
        raise ParameterError(f"canary steps: step {beyond[0]} is beyond the run, whose steps are 1..{total}")
    return list(spec.steps)


def _directions(spec: Any, mechanism: Mechanism, count: int) -> np.ndarray:
    """Unit directions, one row per scheduled step."""
    dim = mechanism.canary_dim
    if spec.directions is None:
        return np.tile(spec._unit(dim), (count, 1))
    if len(spec.directions) != count:
        raise ParameterError(f"canary directions must give one direction per scheduled step ({count}), "
                             f"got {len(spec.directions)}")
    for number, row in enumerate(spec.directions, start=1):
        if len(row) != dim:
            raise ParameterError(f"canary directions: direction {number} must have {dim} "
                                 f"number{'s' if dim > 1 else ''} (the model dimension), got {len(row)}")
    rows = np.asarray(spec.directions, dtype=float)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def scheduled_pair(spec: Any, mechanism: Mechanism, kind: str, index: int | None) -> tuple:
    """The fields of the neighbouring pair of a scheduled gradient canary (``CanarySpec.build`` for ``every`` /
    ``steps`` makes them a ``CanaryPair``): ``(mechanism, S, S', direction, index, relation, kind)``."""
    if kind != "gradient":
        raise ParameterError(f"canary kind must be 'gradient' for a scheduled canary (it inserts a gradient), got kind={kind!r}")
    if spec.pair not in ("zero", "opposite"):
        raise ParameterError(f"canary pair of a scheduled canary must be 'zero' (its gradient present or absent) or "
                             f"'opposite' (reversed), got pair={spec.pair!r}")
    if spec.direction == "least-varying":
        raise ParameterError("canary direction 'least-varying' is chosen for a record position; a scheduled "
                             "canary takes a list of numbers or directions")
    steps = schedule_of(spec, mechanism)
    units = _directions(spec, mechanism, len(steps))
    scale, sign = mechanism.gradient_canary()
    if not np.isfinite(scale):
        raise ParameterError(f"canary gradient needs a finite Lipschitz constant, got L={scale}")
    background = spec._background(mechanism)
    data_a = background.with_schedule({step: scale * u for step, u in zip(steps, units)})
    data_b = (background.with_schedule({step: -scale * u for step, u in zip(steps, units)})
              if spec.pair == "opposite" else background)
    total = units.sum(axis=0)
    look = total / np.linalg.norm(total) if np.linalg.norm(total) > 1e-12 else units[0]
    relation = Relation.REPLACE_ONE if spec.pair == "opposite" else Relation.ZERO_OUT
    return mechanism, data_a, data_b, mechanism.output_direction(sign * look), index, relation, kind
