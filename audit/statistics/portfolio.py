"""Choose one score of a portfolio on calibration trials only (docs/theory.md, "every attack").

With several candidate scores, the calibration outputs of each side are cut
in two halves: every applicable candidate is fitted on the first half (at
most :data:`SELECTION_FIT` trials of it) and judged on the second by the epsilon bound it certifies there (its own
seeded split of that half chooses the threshold), with the mu bound breaking
ties. The strongest is refitted on all calibration outputs and is the only
score the certification trials ever see. Everything chosen is a function of
calibration trials, which are independent of the certification trials, so
the certified bound holds at its stated confidence whatever was chosen: the
choice costs nothing in the failure probability.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.scores import Score, ScoreFunction, score_applies, score_needs_calibration
from dpaudit.audit.statistics.estimators import epsilon_lower_bound, gdp_lower_bound
from dpaudit.mechanisms.errors import DPAuditError, ParameterError

__all__ = ["Candidate", "SELECTION_FIT", "choose_score"]

#: Candidates are fitted on at most this many calibration trials per side while choosing (the chosen
#: score is refitted on all of them): choosing stays cheap next to sampling, so a leak that a sequential
#: audit certifies at its first look costs little more than the calibration trials.
SELECTION_FIT = 1_000


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One candidate score of a portfolio and its calibration strength (not certified)."""

    name: str
    applicable: bool
    reason: str = ""
    epsilon: float | None = None
    mu: float | None = None
    chosen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _fit(score: Score, pair: CanaryPair, cal_a: np.ndarray, cal_b: np.ndarray, seed: int) -> ScoreFunction:
    if score_needs_calibration(score):
        return score.fit(pair, cal_a, cal_b, seed)
    return score.fit(pair, None, None, seed)


def choose_score(scores: Sequence[Score], pair: CanaryPair, cal_a: np.ndarray, cal_b: np.ndarray, *,
                 seed: int, delta: float, confidence: float) -> tuple[Score, ScoreFunction, tuple[Candidate, ...]]:
    """The chosen score, fitted on all calibration outputs, and every candidate's calibration strength.

    Parameters
    ----------
    scores : sequence of Score
        The portfolio (at least one). A single score is fitted without a choice (no candidates listed).
    pair : CanaryPair
    cal_a, cal_b : numpy.ndarray
        Calibration outputs on ``S`` and ``S'`` (never certification trials).
    seed : int
        Seeds fitting and the threshold split of the strength estimate.
    delta, confidence : float
        Of the strength estimate (a figure for choosing only; it certifies nothing).
    """
    if len(scores) == 1:
        return scores[0], _fit(scores[0], pair, cal_a, cal_b, seed), ()
    half_a, half_b = len(cal_a) // 2, len(cal_b) // 2
    if min(half_a, half_b) < 20:
        raise ParameterError(f"a portfolio of scores needs at least 40 calibration trials per dataset, got "
                             f"{min(len(cal_a), len(cal_b))}: raise trials or calibration_fraction")
    candidates: list[Candidate] = []
    held: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for score in scores:
        reason = score_applies(score, pair)
        if reason:
            candidates.append(Candidate(score.name, False, reason))
            continue
        try:
            fitted = _fit(score, pair, cal_a[:min(half_a, SELECTION_FIT)], cal_b[:min(half_b, SELECTION_FIT)], seed)
            held_a = np.asarray(fitted(cal_a[half_a:]), dtype=float)
            held_b = np.asarray(fitted(cal_b[half_b:]), dtype=float)
            if not (np.all(np.isfinite(held_a)) and np.all(np.isfinite(held_b))):
                raise ParameterError(f"score {score.name!r} gave scores that are not finite numbers")
        except (DPAuditError, ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError) as exc:
            candidates.append(Candidate(score.name, False, str(exc) or type(exc).__name__))
            continue
        eps = epsilon_lower_bound(held_a, held_b, delta=delta, confidence=confidence, calibration_fraction=0.5,
                                  seed=seed).epsilon_lower_bound
        held[score.name] = (held_a, held_b)
        candidates.append(Candidate(score.name, True, "", eps))
    applicable = [c for c in candidates if c.applicable]
    if not applicable:
        raise ParameterError("no score of the portfolio applies: " + "; ".join(
            f"{c.name}: {c.reason}" for c in candidates))
    top = max(c.epsilon for c in applicable)
    # the mu bound breaks ties (computed for the tied candidates only: it is a second look at the same trials)
    mus = {c.name: gdp_lower_bound(*held[c.name], confidence=confidence, calibration_fraction=0.5,
                                   seed=seed).mu_lower_bound for c in applicable if c.epsilon == top}
    name = max(mus, key=lambda n: (mus[n], -[c.name for c in applicable].index(n)))
    chosen = next(score for score in scores if score.name == name)
    candidates = [dataclasses.replace(c, mu=mus.get(c.name)) for c in candidates]
    candidates = [dataclasses.replace(c, chosen=c.name == chosen.name) for c in candidates]
    return chosen, _fit(chosen, pair, cal_a, cal_b, seed), tuple(candidates)
