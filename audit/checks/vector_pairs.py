"""Neighbouring pairs of a function of a vector of query answers: the standard input patterns, screened.

A function of ``n`` query answers (a dataset of ``n`` records, one number
each: the answers) is neighbouring-private when no answer moves by more than
the sensitivity ``s``. Two relations are in use (docs/theory.md section 8):

* ``component-wise``: every answer may move by up to ``s`` at once (the
  relation of the sparse vector technique and report noisy max);
* ``one-answer``: only one answer moves (histograms, one value of RAPPOR).

From the base vector ``c = (center, ..., center)`` the candidates are the
patterns of StatDP (Ding et al. 2018, section 4.2), as DP-Sniper uses them:
one answer down, one up; and under the component-wise relation also one up
and the rest down, one down and the rest up, half up and half down, all up,
all down, and the "X" pair (first half at ``c``, rest at ``c - s`` against
its mirror). Each audit tests both directions, so swapped pairs add nothing.

Each candidate is screened on its own trials: the outputs are split in
halves, a score is fitted on the first half, and its strength is the
best Clopper-Pearson-penalised log ratio of a threshold test on the second
half (an estimate, never certified; the penalty keeps rare tails that are
pure noise from winning). At small epsilons a screen of a few 10^4 trials
ranks the patterns mostly by luck, so the screen has two rounds (successive
halving): every pattern on ``screen_trials``, then the :data:`FINALISTS`
(four) strongest again on :data:`FINAL_FACTOR` (eight) times as many fresh
trials, where the strongest of that round is chosen. The chosen candidate is then certified on
fresh trials by the caller: the choice is a function of screening data
alone, so it costs nothing in the failure probability (docs/theory.md 3.8).

References
----------
Karnin, Koren, Somekh (2013), "Almost optimal exploration in multi-armed
bandits", ICML (successive halving); docs/theory.md 8.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.discrete import fit_discrete
from dpaudit.attacks.score_protocol import fitted_declined
from dpaudit.attacks.scores import fit_score
from dpaudit.attacks.value_counts import record_groups
from dpaudit.auditing.statistics.confidence import cp_upper
from dpaudit.auditing.statistics.rates import rates_epsilon
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["NaNRelease", "RELATIONS", "VectorCandidate", "pattern_pairs", "screen_epsilon", "screen_pair",
           "screen_vector_pairs"]

RELATIONS = ("component-wise", "one-answer")
#: Scores fitted on each candidate's screening trials ("difference" and "histogram" are the screen's own:
#: the projection on the difference of the two sides' mean outputs, and the smoothed log-ratio of each
#: output row's counts; "discrete" is the audit's score for sentinel and few-valued outputs, skipped where
#: it declines). Without "discrete" the screen read SVT3's sentinels (-1000 beside answers) as magnitudes
#: and chose its one-up-rest-down pair (ceiling 0.109 at 10^6 trials) on one of seeds 0-3; with it, pairs of
#: ceiling 0.198 on all four (docs/theory.md 8). "discrete" keeps one effect per coordinate of a mixed output
#: here (``count_mixed=False``): counted, its few parameters made the one-group patterns look strongest on the
#: screen's 10^4 trials, and numerical SVT chose pairs of ceiling 0.032-0.034 against 0.040 on five of seven
#: seeds (docs/theory.md 7).
SCREEN_SCORES = ("projection", "gaussian", "difference", "histogram", "discrete")
#: Patterns screened again in the second round. With 3 finalists on 4 times the trials, SVT4 (10^6 trials,
#: screening seeds 0-7) lost its strongest pairs (X, half up and half down: ceiling 0.152) to pairs whose
#: ceiling is below its claim on 3 of 8 seeds, and SVT3 to pairs of ceiling 0.114 and 0.045 on 2 of 8: an
#: atom holding 1% of the trials is out of a first round's reach (docs/theory.md 8)
FINALISTS = 4
FINAL_FACTOR = 8  #: the second round's trials per side, in multiples of ``screen_trials``
HISTOGRAM_MAX_OUTCOMES = 4096  # more distinct output rows than this: no histogram screen


@dataclasses.dataclass(frozen=True)
class VectorCandidate:
    """A pair of answer vectors ``(S, S')`` and the pattern it comes from."""

    name: str
    first: np.ndarray
    second: np.ndarray

    def datasets(self) -> tuple[Dataset, Dataset]:
        return Dataset(self.first.reshape(-1, 1)), Dataset(self.second.reshape(-1, 1))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "relation": "vector", "S": self.first.tolist(), "S_prime": self.second.tolist()}


def pattern_pairs(queries: int, *, center: float = 1.0, sensitivity: float = 1.0,
                  relation: str = "component-wise") -> list[VectorCandidate]:
    """The standard input patterns for ``queries`` answers (see the module docstring)."""
    if relation not in RELATIONS:
        raise ParameterError(f"relation must be one of {', '.join(RELATIONS)}, got relation={relation!r}")
    if int(queries) != queries or queries < 1:
        raise ParameterError(f"queries must be an integer >= 1, got queries={queries!r}")
    if not sensitivity > 0:
        raise ParameterError(f"sensitivity must be > 0, got sensitivity={sensitivity!r}")
    n, half = int(queries), int(queries) // 2
    base = np.full(n, float(center))
    first = np.eye(n)[0]
    moves = {"one-down": -first, "one-up": first}
    if relation == "component-wise" and n > 1:
        moves.update({"one-up-rest-down": 2 * first - 1, "one-down-rest-up": 1 - 2 * first,
                      "half-up-half-down": np.where(np.arange(n) < half, 1.0, -1.0),
                      "all-up": np.ones(n), "all-down": -np.ones(n)})
    out = [VectorCandidate(name, base, base + sensitivity * move) for name, move in moves.items()]
    if relation == "component-wise" and n > 1:
        low = np.where(np.arange(n) < half, center, center - sensitivity)
        out.append(VectorCandidate("x-shape", low, low[::-1].copy() if n % 2 == 0 else
                                   np.where(np.arange(n) < half, center - sensitivity, center)))
    return out


def screen_epsilon(scores_a: np.ndarray, scores_b: np.ndarray, *, failure: float = 0.05,
                   thresholds: int = 256) -> float:
    """The best ``log(P_b lower / P_a upper)`` of threshold tests (both directions) on held-out scores.

    Clopper-Pearson bounds at ``failure`` on each rate penalise thresholds seen
    by few trials; a screening statistic only (its value is never certified).
    """
    levels = np.unique(np.quantile(np.concatenate([scores_a, scores_b]), np.linspace(0, 1, thresholds)))
    sorted_a, sorted_b = np.sort(scores_a), np.sort(scores_b)
    n_a, n_b = sorted_a.size, sorted_b.size
    above_a = n_a - np.searchsorted(sorted_a, levels, side="left")
    above_b = n_b - np.searchsorted(sorted_b, levels, side="left")
    # a lower bound on a rate is 1 - the upper bound on its complement: delta 0 in the two-rate bound
    bound, _ = rates_epsilon(cp_upper(above_a, n_a, failure), cp_upper(n_b - above_b, n_b, failure), 0.0)
    return float(max(bound.max(), 0.0))


def _row_groups(rows: np.ndarray) -> tuple[int, np.ndarray]:
    """The number of distinct rows and each row's number among them (in lexicographic order): the inverse
    ``np.unique(rows, axis=0, return_inverse=True)`` gives, by one lexsort of the columns, about ten times
    faster than its sort of the rows as structured records."""
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    starts = np.concatenate([[True], np.any(ordered[1:] != ordered[:-1], axis=1)])
    inverse = np.empty(len(rows), dtype=np.intp)
    inverse[order] = np.cumsum(starts) - 1
    return int(np.count_nonzero(starts)), inverse


def _histogram_scores(fit_a: np.ndarray, fit_b: np.ndarray, test_a: np.ndarray, test_b: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray] | None:
    """Smoothed log-ratio of each output row's counts on the fitting half (None for too many rows)."""
    distinct, inverse = _row_groups(np.vstack([fit_a, fit_b, test_a, test_b]))
    if distinct > HISTOGRAM_MAX_OUTCOMES:
        return None
    sizes = np.cumsum([len(fit_a), len(fit_b), len(test_a)])
    count_a = np.bincount(inverse[:sizes[0]], minlength=distinct)
    count_b = np.bincount(inverse[sizes[0]:sizes[1]], minlength=distinct)
    log_ratio = np.log((count_b + 0.5) / (count_a + 0.5))
    return log_ratio[inverse[sizes[1]:sizes[2]]], log_ratio[inverse[sizes[2]:]]


class NaNRelease(ValueError):
    """A screened pair's outputs hold NaN: no score can screen it (a search over records skips the pair; one over
    query patterns refuses, naming the pattern)."""


def screen_pair(mechanism: Mechanism, first: Dataset, second: Dataset, scores: Sequence[str], trials: int,
                seed: np.random.SeedSequence, relation: str = Relation.REPLACE_ONE) -> tuple[float, str]:
    """The strongest screening score on the pair ``(first, second)``: (screen epsilon, score name).

    ``trials`` outputs per side, drawn from two children of ``seed``; each score is fitted on the first half
    and measured on the second (:func:`screen_epsilon`). A score that declines the outputs (``discrete`` on
    continuous ones, ``float-bits`` on outputs already on a coarse grid: its fit's ``declined``) is
    skipped; ``-1`` when every score declined.
    """
    seed_a, seed_b = seed.spawn(2)
    out_a = np.asarray(mechanism.sample(first, trials=trials, seed=seed_a), dtype=float)
    out_b = np.asarray(mechanism.sample(second, trials=trials, seed=seed_b), dtype=float)
    if np.isnan(out_a.max()) or np.isnan(out_b.max()):  # no score reads a NaN (nor warns about one): no screen
        raise NaNRelease(f"mechanism {mechanism.label!r} released NaN on this pair")
    half = trials // 2
    pair = CanaryPair(mechanism, first, second, np.ones(mechanism.output_dim), None, Relation(relation),
                      "dataset-pair")
    best, chosen = -1.0, scores[0]
    for name in scores:
        if name == "difference":  # a linear discriminant: the direction in which the means move
            direction = out_b[:half].mean(axis=0) - out_a[:half].mean(axis=0)
            held_out = (out_a[half:] @ direction, out_b[half:] @ direction)
        elif name == "histogram":
            held_out = _histogram_scores(out_a[:half], out_b[:half], out_a[half:], out_b[half:])
            if held_out is None:
                continue
        else:
            try:
                if name == "discrete":  # a mixed output's coordinates read one by one (SCREEN_SCORES)
                    score = fit_discrete(out_a[:half], out_b[:half], seed=0, count_mixed=False,
                                         groups=record_groups(pair, out_a.shape[1]))
                else:
                    score = fit_score(name, pair, out_a[:half], out_b[:half], seed=0)
            except ParameterError:  # the score declines these outputs (discrete on continuous ones)
                continue
            if fitted_declined(score):  # float-bits on outputs on a grid: no bit below it to read
                continue
            held_out = (np.asarray(score(out_a[half:])), np.asarray(score(out_b[half:])))
        value = screen_epsilon(*held_out)
        if value > best:
            best, chosen = value, name
    return best, chosen


def _strength(mechanism: Mechanism, candidate: VectorCandidate, scores: Sequence[str], trials: int,
              seed: np.random.SeedSequence) -> tuple[float, str]:
    """The strongest screening score on ``candidate``: (screen epsilon, score name); a pattern whose outputs hold
    NaN is refused, naming it (a NaN is no release of any mechanism)."""
    try:
        return screen_pair(mechanism, *candidate.datasets(), scores, trials, seed)
    except NaNRelease as exc:
        raise ParameterError(f"{exc} (pattern {candidate.name})") from None


def screen_vector_pairs(mechanism: Mechanism, *, queries: int, center: float = 1.0, sensitivity: float = 1.0,
                        relation: str = "component-wise", scores: Sequence[str] = SCREEN_SCORES,
                        screen_trials: int = 20_000, seed: np.random.SeedSequence | int = 0,
                        finalists: int = FINALISTS, final_factor: int = FINAL_FACTOR, progress: bool = False
                        ) -> tuple[list[dict[str, Any]], VectorCandidate]:
    """Screen every pattern pair of ``mechanism``; return the table and the chosen pair.

    Every pattern is screened on ``screen_trials`` per side; the ``finalists`` strongest (none when
    0, or when there are no more patterns than that) again on ``final_factor * screen_trials``
    fresh trials, and the strongest of that round is chosen (its row has ``final_epsilon``).
    ``seed`` drives the screening only; certify the chosen pair from a seed it never drew from. With
    ``progress``, a bar per round on standard error.
    """
    if isinstance(final_factor, bool) or not isinstance(final_factor, int) or final_factor < 1:
        raise ParameterError(f"final_factor must be an integer >= 1, got final_factor={final_factor!r}")
    candidates = pattern_pairs(queries, center=center, sensitivity=sensitivity, relation=relation)
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence([int(seed), 0x7EC5])
    first_round, second_round = root.spawn(2)
    table = []
    for candidate, child in tqdm(zip(candidates, first_round.spawn(len(candidates))), total=len(candidates),
                                 desc="screening patterns", unit="pair", file=sys.stderr, disable=not progress,
                                 dynamic_ncols=True, leave=False):
        strength, score = _strength(mechanism, candidate, scores, screen_trials, child)
        table.append({**candidate.to_dict(), "screen_epsilon": strength, "score": score})
    order = sorted(range(len(candidates)), key=lambda i: -table[i]["screen_epsilon"])  # stable: ties by order
    if not 0 < finalists < len(candidates):
        return table, candidates[order[0]]
    best = None
    for index, child in tqdm(zip(order[:finalists], second_round.spawn(finalists)), total=finalists,
                             desc=f"screening the {finalists} strongest", unit="pair", file=sys.stderr,
                             disable=not progress, dynamic_ncols=True, leave=False):
        strength, score = _strength(mechanism, candidates[index], scores, final_factor * screen_trials, child)
        table[index].update(final_epsilon=strength, final_score=score)
        if best is None or strength > best[0]:
            best = (strength, index)
    return table, candidates[best[1]]
