"""Anytime-valid lower bounds on epsilon by betting (docs/theory.md 13).

For a test (a region ``R`` of scores) and a side, one trial of each dataset
gives two indicators: ``x`` (the numerator side's score falls in ``R``) and
``y`` (the other side's does). If the mechanism is ``(epsilon, delta)``-DP,
``E[x] <= e^epsilon E[y] + delta`` for every region and either side, so with
``a = e^epsilon`` and any bet ``lam`` in ``[0, 1 / (a + delta)]``

    ``1 + lam (x - a y - delta)``

is non-negative with conditional mean at most 1. The product of these
factors over trials, with tests and bets fixed from earlier trials only
(predictable), is a non-negative supermartingale under the null: the
*wealth* of a gambler betting against ``epsilon``. By Ville's inequality it
ever reaches ``1 / alpha`` with probability at most ``alpha``, however long
one watches and whenever one stops.

The epsilon axis is cut into cells ``(t_{k-1}, t_k]`` (:func:`epsilon_grid`).
Each cell has one gambler whose bets satisfy the constraint at the cell's top
``t_k``; a factor is non-increasing in ``a`` for a fixed bet, so the wealth at
the top is the smallest over the cell, and a cell whose top wealth reaches
``1 / alpha`` rejects every epsilon in it. Each epsilon belongs to one cell,
so each is tested by one e-process: no union over cells is paid. The lower
bound at trial ``t`` is the top of the longest run of rejected cells from 0:
it exceeds the true epsilon only if the true epsilon's own e-process crossed,
so the whole sequence of bounds holds at ``1 - alpha`` simultaneously over
``t`` (a confidence sequence). A claim is certified violated at the first
trial the bound exceeds it.

Bets are sized by Kelly's rule on rates estimated pessimistically from the
earlier trials (a lower quantile for the numerator's rate, an upper for the
other's, :data:`PESSIMISM`), so a cell the data do not support bets nothing
and keeps its wealth.

References
----------
docs/theory.md 13; J. Ville, "Etude critique de la notion de collectif" (1939);
I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 86 (2024);
M. González, A. Dulce-Rubio, A. Ramdas and M. Ribero, "Sequentially auditing differential privacy",
NeurIPS 2025 (arXiv:2509.07055).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_probability, check_real

__all__ = ["Bets", "BettingProcess", "PESSIMISM", "epsilon_grid"]

#: Rates that place a test and size its bet are the ``PESSIMISM`` lower (numerator) and upper (other side)
#: Beta quantiles of the earlier counts: a tail seen in a few trials is not bet on as if its ratio were sure
PESSIMISM = 0.1
#: Futility reads rates at the other extreme (the ``1 - OPTIMISM`` quantiles): it stops only when even
#: favourable rates could not reach ``1 / alpha`` in the trials left
OPTIMISM = 0.01
#: The largest bet fraction ``c`` (the bet is ``c / (a + delta)``): a trial of the other side in the region
#: costs at most this share of the wealth
C_MAX = 0.999
#: Halvings of the bisection for Kelly's bet fraction (precision ``2^-24``)
_STEPS = 24
#: Candidate thresholds per tail (quantiles of the pooled earlier scores)
_LEVELS = 96
#: Cells whose bets are searched at once, from the lowest cell not yet rejected
_WINDOW = 96
#: Above 0.5, each cell's top is this many times the one below (rounded to 3 decimals)
GRID_RATIO = 1.01


def epsilon_grid(claims: Sequence[float] = (), top: float = 20.0) -> np.ndarray:
    """Cell tops of the epsilon axis: 0.005 apart to 0.5, then each :data:`GRID_RATIO` times the last (rounded
    to 3 decimals) up to ``top``, ``top`` itself, and each claim.

    A finer grid costs computation only (each epsilon is tested by its own cell's e-process); the bound
    is reported at a cell top, so rounding is towards the safe side. Above 0.5 the cells are 1% wide, so a
    reported bound is within 1% of the top of the last cell the data reject.
    """
    top = check_real("top", top, positive=True)
    steps = int(math.ceil(math.log(max(top, 0.5) / 0.5) / math.log(GRID_RATIO)))
    parts = [np.arange(1, 101) * 0.005, np.round(0.5 * GRID_RATIO ** np.arange(1, steps + 1), 3), [top]]
    extra = [float(c) for c in claims if c is not None and 0 < float(c) <= top]
    grid = np.unique(np.round(np.concatenate(parts + [np.asarray(extra, dtype=float)]), 12))
    return grid[grid <= top + 1e-12]


@dataclasses.dataclass(frozen=True)
class Bets:
    """The tests and bets of one chunk, fixed before it is seen (predictable).

    Attributes
    ----------
    cells : numpy.ndarray
        Cell numbers that bet (others keep their wealth).
    thresholds : numpy.ndarray
        The region's threshold per betting cell.
    upper : numpy.ndarray of bool
        Region ``score >= threshold`` (True) or ``score <= threshold`` (False).
    numerator_a : numpy.ndarray of bool
        Whether side ``a`` (``S``) is the numerator (else ``S'``).
    bets : numpy.ndarray
        The bet ``lam`` per betting cell (at most ``1 / (e^top + delta)``).
    """

    cells: np.ndarray
    thresholds: np.ndarray
    upper: np.ndarray
    numerator_a: np.ndarray
    bets: np.ndarray

    @classmethod
    def none(cls) -> "Bets":
        empty = np.zeros(0)
        return cls(empty.astype(int), empty, empty.astype(bool), empty.astype(bool), empty)


def _beta_quantile(hits: np.ndarray, total: int, level: float, upper: bool) -> np.ndarray:
    """Clopper-Pearson-type quantile of a rate from ``hits`` of ``total`` (lower or upper)."""
    hits = np.asarray(hits, dtype=float)
    if upper:
        out = special.betaincinv(hits + 1, np.maximum(total - hits, 1e-300), 1 - level)
        return np.where(hits >= total, 1.0, out)
    out = special.betaincinv(np.maximum(hits, 1e-300), total - hits + 1, level)
    return np.where(hits <= 0, 0.0, out)


def _pareto(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Indices of the tests no other dominates (another with a numerator rate at least as high and the other
    side's at most as high): Kelly's growth rises with ``p`` and falls with ``q``, so only these can be best."""
    order = np.lexsort((q, -p))  # p descending, ties by q ascending
    running = np.minimum.accumulate(q[order])
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = q[order][1:] < running[:-1]
    return order[keep]


def _growth(p: np.ndarray, q: np.ndarray, a: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Kelly's growth rate and bet fraction ``c`` (the bet is ``c / (a + delta)``), per (test, cell): ``p``,
    ``q`` of shape (M, 1), ``a`` of (1, K).

    The growth ``g(c) = sum_i w_i log(1 + c b_i)`` over the four outcomes ``(x, y)`` is concave in ``c``, so
    its maximiser on ``[0, C_MAX]`` is where the decreasing derivative crosses 0 (bisection, :data:`_STEPS`
    halvings): ``c = 0`` (no bet) when the derivative at 0, ``p - a q - delta`` over ``a + delta``, is not
    positive.
    """
    scale = a + delta
    weights = (p * (1 - q), p * q, (1 - p) * q, (1 - p) * (1 - q))
    slopes = ((1 - delta) / scale, (1 - a - delta) / scale, -np.ones_like(scale), -delta / scale)
    low = np.zeros(np.broadcast_shapes(p.shape, a.shape))
    high = np.full(low.shape, C_MAX)
    for _ in range(_STEPS):
        middle = (low + high) / 2
        slope = sum(w * b / (1 + middle * b) for w, b in zip(weights, slopes))
        rising = slope > 0
        low = np.where(rising, middle, low)
        high = np.where(rising, high, middle)
    c = np.where(sum(w * b for w, b in zip(weights, slopes)) > 0, low, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = sum(w * np.log1p(c * b) for w, b in zip(weights, slopes))
    return np.nan_to_num(g, nan=0.0), c


@dataclasses.dataclass
class BettingProcess:
    """One canary position's confidence sequence for epsilon, by betting (docs/theory.md 13).

    Parameters
    ----------
    delta : float
        Of the audited ``(epsilon, delta)``.
    alpha : float
        Failure probability of the whole sequence (``1 - confidence``, split over positions by the caller).
    tops : numpy.ndarray
        Cell tops (:func:`epsilon_grid`).
    """

    delta: float
    alpha: float
    tops: np.ndarray
    log_wealth: np.ndarray = dataclasses.field(init=False)
    rejected_at: np.ndarray = dataclasses.field(init=False)
    trials: int = dataclasses.field(default=0, init=False)

    def __post_init__(self) -> None:
        self.delta = check_real("delta", self.delta, nonnegative=True)
        if self.delta >= 1:
            raise ParameterError(f"delta must be in [0, 1), got delta={self.delta!r}")
        self.alpha = check_probability("alpha", self.alpha, open_low=True)
        self.tops = np.asarray(self.tops, dtype=float)
        if self.tops.ndim != 1 or self.tops.size == 0 or np.any(np.diff(self.tops) <= 0) or self.tops[0] <= 0:
            raise ParameterError("tops must be increasing positive cell tops (epsilon_grid)")
        self.log_wealth = np.zeros(self.tops.size)
        self.rejected_at = np.full(self.tops.size, -1, dtype=np.int64)  # trial (per side, 1-based) it crossed

    @property
    def threshold(self) -> float:
        """``log(1 / alpha)``: the log wealth at which a cell is rejected."""
        return math.log(1 / self.alpha)

    # -- the bound ---------------------------------------------------------------------------------------

    def lower_bound_at(self, trial: int | None = None) -> float:
        """The certified lower bound after ``trial`` trials per side (default: all seen): the top of the
        longest run of cells from 0 rejected by then (0 when the first is not)."""
        trial = self.trials if trial is None else trial
        done = (self.rejected_at >= 0) & (self.rejected_at <= trial)
        run = int(np.argmin(done)) if not done.all() else done.size
        return float(self.tops[run - 1]) if run else 0.0

    @property
    def lower_bound(self) -> float:
        return self.lower_bound_at()

    def exceeded_at(self, epsilon: float) -> int | None:
        """The first trial per side after which the bound exceeds ``epsilon`` (None: not yet)."""
        below = np.flatnonzero(self.tops <= epsilon + 1e-12)
        upto = (below[-1] + 2) if below.size else 1  # cells up to the first top above epsilon
        if upto > self.tops.size:
            return None
        times = self.rejected_at[:upto]
        return None if np.any(times < 0) else int(times.max())

    def trajectory(self) -> list[tuple[int, float]]:
        """Every step of the bound: ``(trial, bound)`` where it rose."""
        steps, best = [], 0.0
        for trial in sorted({int(t) for t in self.rejected_at if t >= 0}):
            bound = self.lower_bound_at(trial)
            if bound > best:
                steps.append((trial, bound))
                best = bound
        return steps

    # -- betting -----------------------------------------------------------------------------------------

    def _open(self) -> np.ndarray:
        """The cells not yet rejected, from the lowest, at most :data:`_WINDOW` of them."""
        return np.flatnonzero(self.rejected_at < 0)[:_WINDOW]

    def _tests(self, prev_a: np.ndarray, prev_b: np.ndarray, level: float, optimistic: bool
               ) -> tuple[np.ndarray, ...]:
        """Candidate regions of the earlier scores: thresholds, orientation, numerator side, and rates."""
        pooled = np.concatenate([prev_a, prev_b])
        tails = np.geomspace(1.0 / pooled.size, 0.5, _LEVELS)
        cuts = np.unique(np.quantile(pooled, np.concatenate([tails, 1 - tails]), method="nearest"))
        sa, sb = np.sort(prev_a), np.sort(prev_b)
        ge_a = sa.size - np.searchsorted(sa, cuts, side="left")
        ge_b = sb.size - np.searchsorted(sb, cuts, side="left")
        le_a = np.searchsorted(sa, cuts, side="right")
        le_b = np.searchsorted(sb, cuts, side="right")
        thresholds = np.concatenate([cuts] * 4)
        upper = np.concatenate([np.ones(cuts.size, bool)] * 2 + [np.zeros(cuts.size, bool)] * 2)
        numerator_a = np.concatenate([np.ones(cuts.size, bool), np.zeros(cuts.size, bool)] * 2)
        num = np.concatenate([ge_a, ge_b, le_a, le_b])  # the numerator side's earlier hits of each region
        den = np.concatenate([ge_b, ge_a, le_b, le_a])
        size_num = np.where(numerator_a, sa.size, sb.size)
        size_den = np.where(numerator_a, sb.size, sa.size)
        # pessimistic: the numerator's rate low and the other's high; optimistic the other way round
        p = _beta_quantile(num, size_num, level, upper=optimistic)
        q = _beta_quantile(den, size_den, level, upper=not optimistic)
        return thresholds, upper, numerator_a, p, q

    def bets(self, prev_a: np.ndarray, prev_b: np.ndarray) -> Bets:
        """The next chunk's tests and bets, from earlier scores only (predictable)."""
        cells = self._open()
        prev_a, prev_b = np.asarray(prev_a, dtype=float), np.asarray(prev_b, dtype=float)
        if cells.size == 0 or prev_a.size == 0 or prev_b.size == 0:
            return Bets.none()
        thresholds, upper, numerator_a, p, q = self._tests(prev_a, prev_b, PESSIMISM, optimistic=False)
        front = _pareto(p, q)
        thresholds, upper, numerator_a, p, q = (v[front] for v in (thresholds, upper, numerator_a, p, q))
        a = np.exp(self.tops[cells])[None, :]
        growth, fraction = _growth(p[:, None], q[:, None], a, self.delta)
        best = np.argmax(growth, axis=0)
        value = growth[best, np.arange(cells.size)]
        keep = value > 0
        chosen = best[keep]
        bets = fraction[best, np.arange(cells.size)][keep] / (a[0, keep] + self.delta)
        return Bets(cells[keep], thresholds[chosen], upper[chosen], numerator_a[chosen], bets)

    def update(self, bets: Bets, chunk_a: np.ndarray, chunk_b: np.ndarray) -> None:
        """Bet on one chunk of paired trials (``chunk_a[i]`` with ``chunk_b[i]``) with ``bets``."""
        chunk_a, chunk_b = np.asarray(chunk_a, dtype=float), np.asarray(chunk_b, dtype=float)
        if chunk_a.shape != chunk_b.shape or chunk_a.ndim != 1:
            raise ParameterError(f"a chunk's two sides must be equal 1-d score arrays, got shapes "
                                 f"{chunk_a.shape} and {chunk_b.shape}")
        n = chunk_a.size
        if bets.cells.size:
            a = np.exp(self.tops[bets.cells])[:, None]
            thr = bets.thresholds[:, None]
            in_a = np.where(bets.upper[:, None], chunk_a[None] >= thr, chunk_a[None] <= thr)
            in_b = np.where(bets.upper[:, None], chunk_b[None] >= thr, chunk_b[None] <= thr)
            x = np.where(bets.numerator_a[:, None], in_a, in_b)
            y = np.where(bets.numerator_a[:, None], in_b, in_a)
            lam = bets.bets[:, None]
            steps = np.log1p(lam * (x - a * y - self.delta))
            path = self.log_wealth[bets.cells, None] + np.cumsum(steps, axis=1)
            crossed = path >= self.threshold
            first = np.where(crossed.any(axis=1), np.argmax(crossed, axis=1) + 1, -1)
            fresh = (first > 0) & (self.rejected_at[bets.cells] < 0)
            self.rejected_at[bets.cells[fresh]] = self.trials + first[fresh]
            self.log_wealth[bets.cells] = path[:, -1]
        self.trials += n

    def futile(self, prev_a: np.ndarray, prev_b: np.ndarray, claim: float, remaining: int) -> bool:
        """True when no open cell up to ``claim`` could reach ``1 / alpha`` in ``remaining`` more trials per
        side even at optimistic rates of the earlier scores' best test (stopping for futility keeps validity:
        it only ends the watch)."""
        below = np.flatnonzero((self.tops <= claim + 1e-12) & (self.rejected_at < 0))
        upto = np.flatnonzero(self.tops > claim + 1e-12)
        cells = np.concatenate([below, upto[:1]]) if upto.size else below
        if cells.size == 0:
            return False
        _, _, _, p, q = self._tests(np.asarray(prev_a, float), np.asarray(prev_b, float), OPTIMISM, optimistic=True)
        front = _pareto(p, q)
        p, q = p[front], q[front]
        a = np.exp(self.tops[cells])[None, :]
        growth, _ = _growth(p[:, None], q[:, None], a, self.delta)
        best = np.maximum(growth.max(axis=0), 0.0)
        reach = self.log_wealth[cells] + best * remaining
        return bool(np.any(reach < self.threshold))

    def record(self, claim: float | None = None) -> dict[str, Any]:
        """The process's state for a result: bound, trials, wealth of the claim's cell and the bound's."""
        entry: dict[str, Any] = {"epsilon_lower_bound": self.lower_bound, "trials": self.trials,
                                 "alpha": self.alpha, "cells": int(self.tops.size),
                                 "trajectory": [[t, b] for t, b in self.trajectory()]}
        if claim is not None:
            cell = int(np.searchsorted(self.tops, claim - 1e-12))
            cell = min(cell, self.tops.size - 1)
            entry["claim_cell_top"] = float(self.tops[cell])
            entry["claim_log_wealth"] = float(self.log_wealth[cell])
            entry["violated_at"] = self.exceeded_at(claim)
        open_cells = np.flatnonzero(self.rejected_at < 0)
        if open_cells.size:
            entry["next_cell_top"] = float(self.tops[open_cells[0]])
            entry["next_cell_log_wealth"] = float(self.log_wealth[open_cells[0]])
        return entry
