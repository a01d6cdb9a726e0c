"""One-dimensional instances as affine steps, for the exact accountant (``exact1d``).

A mechanism may give the laws in closed form (``Mechanism.exact_output_laws``:
the last iterate of linear-loss DP-SGD, DP-LSSGD and PNSGD on the whole space,
``last_iterate``). Otherwise ``instance_steps(mechanism, dataset)`` turns a 1-D ``projected-kernel``,
``pnsgd`` or ``multi-epoch-pnsgd`` run on a dataset into the maps
``X <- Pi_K(rho X + offset + N)`` it applies, or raises
:class:`NotExact` with the reason (the exact accountant covers translation,
contraction and reset steps only).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpaudit.core.errors import NotExact
from dpaudit.mechanisms.accounting.exact1d import Law, Step, _run, e_gamma
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws

if TYPE_CHECKING:  # annotations only: accounting imports no mechanism module
    from dpaudit.mechanisms.dataset import Dataset

__all__ = ["NotExact", "exact_laws", "instance_steps", "likelihood_ratio_law", "log_likelihood_ratio", "remember"]

CELLS = 4096


def instance_steps(mech, data: Dataset) -> tuple[list[Step], dict[str, Any]]:
    """The affine steps of ``mech`` on ``data`` and the options of the propagation.

    The mechanism describes its own steps (``Mechanism.exact_steps``);
    :class:`NotExact` says why an instance is not covered.
    """
    return mech.exact_steps(data)


def _instance_key(mech, data_a: Dataset, data_b: Dataset, cells: int) -> tuple:
    """Everything that decides an instance's laws (mechanisms are frozen, hashable dataclasses)."""
    def dataset(data: Dataset) -> tuple:
        injected = tuple((k, np.asarray(v, dtype=float).tobytes()) for k, v in sorted(data.injected.items()))
        scheduled = tuple((k, np.asarray(v, dtype=float).tobytes()) for k, v in sorted(data.scheduled.items()))
        return data.records.shape, np.ascontiguousarray(data.records, dtype=float).tobytes(), injected, scheduled
    try:
        identity = hash(mech) and mech
    except TypeError:  # a mechanism with an unhashable field: its repr stands in
        identity = repr(mech)
    return type(mech), identity, dataset(data_a), dataset(data_b), cells


def remember(cache: dict, key, value, size: int = 16):
    """``cache[key] = value``, the oldest entries dropped beyond ``size``; returns ``value`` (a process-local memo)."""
    cache[key] = value
    while len(cache) > size:  # audits of one instance come in runs: a few entries are enough
        cache.pop(next(iter(cache)))
    return value


_LAWS: dict = {}  # propagated laws by instance, oldest dropped first
_EPSILONS: dict = {}  # exact epsilon by instance and delta


def exact_laws(mech, data_a: Dataset, data_b: Dataset, cells: int = CELLS) -> tuple[Law, Law] | MixtureLaws:
    """The laws of the output under ``S`` and ``S'`` (computed once per instance and remembered).

    The mechanism's own closed form (``Mechanism.exact_output_laws``, e.g.
    the last-iterate mixture of ``last_iterate``) when it has one, else the
    propagation of its affine steps (``exact1d``).
    """
    key = _instance_key(mech, data_a, data_b, cells)
    if key in _LAWS:
        return _LAWS[key]
    hook = getattr(mech, "exact_output_laws", None)
    closed = hook(data_a, data_b) if hook is not None else None  # NotExact, before anything is remembered
    if closed is not None:
        return remember(_LAWS, key, closed)
    steps_a, options = instance_steps(mech, data_a)
    steps_b, _ = instance_steps(mech, data_b)
    return remember(_LAWS, key, _run(steps_a, steps_b, cells=cells, **options))


def exact_delta_curve(mech, data_a: Dataset, data_b: Dataset, epsilons, cells: int = CELLS,
                      laws: tuple[Law, Law] | None = None) -> np.ndarray:
    """``delta(eps)`` of the instance (both directions) on a grid (``laws`` if already computed)."""
    laws = laws or exact_laws(mech, data_a, data_b, cells)
    if isinstance(laws, MixtureLaws):
        return np.array([laws.delta(float(e)) for e in np.atleast_1d(epsilons)])
    p, q = laws
    return np.array([max(e_gamma(p, q, math.exp(e)), e_gamma(q, p, math.exp(e)))
                     for e in np.atleast_1d(epsilons)])


def exact_epsilon(mech, data_a: Dataset, data_b: Dataset, delta: float, cells: int = CELLS,
                  laws: tuple[Law, Law] | None = None) -> float:
    """``eps(delta)`` of the instance: the smallest ``eps`` with ``delta(eps) <= delta``, rounded up.

    A grid of step 0.05 brackets the root and bisection refines it to 1e-12.
    ``delta(eps)`` is continuous and non-increasing but has kinks where an
    atom's term ``P({x}) - e^eps Q({x})`` reaches zero (outputs projected
    onto a bounded ``K``), so interpolating between grid points can fall
    below the root; bisection cannot.
    """
    key = (_instance_key(mech, data_a, data_b, cells), float(delta))
    if key in _EPSILONS:
        return _EPSILONS[key]
    laws = laws or exact_laws(mech, data_a, data_b, cells)
    if isinstance(laws, MixtureLaws):
        return remember(_EPSILONS, key, laws.epsilon(delta))
    return remember(_EPSILONS, key, _bisect_epsilon(mech, data_a, data_b, delta, cells, laws))


def _bisect_epsilon(mech, data_a: Dataset, data_b: Dataset, delta: float, cells: int,
                    laws: tuple[Law, Law]) -> float:
    """Bracket the root on a grid of step 0.05, then bisect to 1e-12 (see :func:`exact_epsilon`)."""
    grid = np.linspace(0.0, 30.0, 601)
    curve = exact_delta_curve(mech, data_a, data_b, grid, cells, laws)
    if curve[0] <= delta:
        return 0.0
    below = np.nonzero(curve <= delta)[0]
    if below.size == 0:
        return math.inf
    low, high = float(grid[below[0] - 1]), float(grid[below[0]])
    while high - low > 1e-12:
        middle = 0.5 * (low + high)
        if exact_delta_curve(mech, data_a, data_b, [middle], cells, laws)[0] <= delta:
            high = middle
        else:
            low = middle
    return high


def _evaluate(law: Law, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Density at ``x`` and atom mass where ``x`` sits on an atom."""
    density = np.interp(x, law.nodes, law.density, left=0.0, right=0.0)
    atom = np.zeros_like(x)
    for position, mass in law.atoms.items():
        atom = np.where(np.isclose(x, position, rtol=0, atol=1e-12), mass, atom)
    return density, atom


def log_likelihood_ratio(mech, outputs: np.ndarray, data_a: Dataset, data_b: Dataset) -> np.ndarray:
    """``log p_B(x) - log p_A(x)`` from the exact laws (atoms compared with atoms)."""
    laws = exact_laws(mech, data_a, data_b)
    if isinstance(laws, MixtureLaws):
        return laws.log_likelihood_ratio(outputs)
    p, q = laws
    x = np.asarray(outputs, dtype=float)[:, 0]
    dens_a, atom_a = _evaluate(p, x)
    dens_b, atom_b = _evaluate(q, x)
    on_atom = (atom_a > 0) | (atom_b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(on_atom, np.log(atom_b) - np.log(atom_a), np.log(dens_b) - np.log(dens_a))
    ratio = np.nan_to_num(ratio, nan=0.0, posinf=700.0, neginf=-700.0)
    values, _, _ = likelihood_ratio_law((p, q))
    return np.clip(ratio, values[0], values[-1])  # interpolation never leaves the law's own range


def likelihood_ratio_law(laws: tuple[Law, Law] | MixtureLaws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The law of the exact log-likelihood-ratio score under ``S`` and ``S'``.

    Returns ``(values, mass_a, mass_b)``: sorted score values and their
    probabilities under each dataset (grid cells and atoms), for the
    statistical ceiling of an optimal threshold audit (docs/theory.md 3.4).
    """
    if isinstance(laws, MixtureLaws):
        return laws.likelihood_ratio_law()
    p, q = laws
    weights = np.full(p.nodes.size, p.nodes[1] - p.nodes[0])
    weights[[0, -1]] /= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.nan_to_num(np.log(q.density) - np.log(p.density), nan=0.0, posinf=700.0, neginf=-700.0)
    mass_a, mass_b = list(p.density * weights), list(q.density * weights)
    values = list(ratio)
    for position in set(p.atoms) | set(q.atoms):
        a, b = p.atoms.get(position, 0.0), q.atoms.get(position, 0.0)
        values.append(math.log(b / a) if a > 0 and b > 0 else (700.0 if b > 0 else -700.0))
        mass_a.append(a)
        mass_b.append(b)
    values, mass_a, mass_b = np.array(values), np.array(mass_a), np.array(mass_b)
    order = np.argsort(values)
    return values[order], mass_a[order] / mass_a.sum(), mass_b[order] / mass_b.sum()
