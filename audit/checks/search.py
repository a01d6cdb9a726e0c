"""Neighbour search: find the neighbouring pair on which a user function leaks most, then certify it once.

A user who wraps a function of a dataset with ``from_callable`` rarely knows
its worst neighbouring pair. :func:`search` builds candidate pairs from the
declared record domain ``[low, high]`` (docs/guide.md, "Neighbour search"):

* special values: both ends of the domain, 0 and the midpoint, the clipping
  thresholds the user names, powers of two inside the domain (float
  exponent boundaries), and the float just below each of these;
* replace-one pairs: one record changed between two special values, on an
  empty background and on the backgrounds below;
* add/remove pairs: a background against the same background plus one
  record (the empty dataset against one record among them), and one record
  against the same record twice (duplicated records);
* backgrounds: none, three records at each end, three at each threshold,
  and the user's own records if given.

Each candidate is *screened* on a small number of trials: each screening
score is fitted on half of them and its strength (a plug-in epsilon, never
certified) measured on the other half. The strongest pair and score are then
audited on fresh trials, from a seed the screening never used, by the same
runner as :func:`dpaudit.audit`. Only that one audit certifies anything, so
the search costs nothing in the failure probability: the choice of the pair
is a function of screening data, independent of the certifying trials
(docs/theory.md 3.8).

For a function of a vector of query answers (``queries=n``: a dataset of
``n`` records, the answers) the candidates are instead the standard input
patterns of StatDP and DP-Sniper (:mod:`dpaudit.auditing.checks.vector_pairs`), and the
chosen pair is certified with the audit's default portfolio unless a score
is named.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.scores import fit_score
from dpaudit.auditing.checks.vector_pairs import SCREEN_SCORES as VECTOR_SCORES
from dpaudit.auditing.checks.vector_pairs import screen_vector_pairs
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.auditing.statistics.rates import rates_epsilon
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["Candidate", "SearchResult", "candidate_pairs", "search", "special_values"]

#: Scores tried on each candidate when none is named.
SCREEN_SCORES = ("projection", "gaussian", "float-bits")


class EmptyDataset(Dataset):
    """A dataset of no records: one side of the pair "empty dataset against one record".

    dpaudit's :class:`Dataset` refuses an empty array (most mechanisms need a
    record); a user function of a dataset is called on an empty array here.
    """

    __slots__ = ()

    def __init__(self, columns: int = 1) -> None:  # noqa: D107 - bypasses the non-empty check on purpose
        object.__setattr__(self, "records", np.zeros((0, columns)))
        object.__setattr__(self, "injected", {})
        object.__setattr__(self, "scheduled", {})


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate pair ``(S, S')`` with how it was built."""

    name: str
    relation: str
    first: Dataset
    second: Dataset

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "relation": self.relation, "S": self.first.records.ravel().tolist(),
                "S_prime": self.second.records.ravel().tolist()}


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What the search screened, what it chose, and the certifying audit of the choice."""

    candidates: tuple[dict[str, Any], ...]
    chosen: dict[str, Any]
    result: AuditResult
    claimed_epsilon: float | None
    screen_trials: int

    @property
    def epsilon_lower_bound(self) -> float:
        return self.result.epsilon_lower_bound

    @property
    def violation(self) -> bool:
        """True when the certified bound exceeds the claim."""
        return self.claimed_epsilon is not None and self.epsilon_lower_bound > self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        return {"claimed_epsilon": self.claimed_epsilon, "violation": self.violation,
                "epsilon_lower_bound": self.epsilon_lower_bound, "screen_trials": self.screen_trials,
                "chosen": self.chosen, "candidates": list(self.candidates), "result": self.result.to_dict()}


def special_values(low: float, high: float, thresholds: Sequence[float] = ()) -> list[float]:
    """Ends, 0, midpoint, thresholds and powers of two in ``[low, high]``, each with the float just below it."""
    base = {low, high, (low + high) / 2, *[float(t) for t in thresholds]}
    if low <= 0 <= high:
        base.add(0.0)
    scale = max(abs(low), abs(high))
    if scale > 0:
        top = math.floor(math.log2(scale))
        for k in range(top, top - 4, -1):  # four exponent boundaries below the domain's scale
            for value in (2.0**k, -(2.0**k)):
                if low <= value <= high:
                    base.add(value)
    values = set(base)
    for value in base:
        below = float(np.nextafter(value, -np.inf))
        if low <= below <= high:
            values.add(below)
    return sorted(values)


def candidate_pairs(low: float, high: float, *, thresholds: Sequence[float] = (),
                    background: np.ndarray | None = None) -> list[Candidate]:
    """Every candidate neighbouring pair for records in ``[low, high]`` (see the module docstring)."""
    values = special_values(low, high, thresholds)
    anchors = sorted({low, high, *[float(t) for t in thresholds]})
    backgrounds: list[tuple[str, np.ndarray]] = [("empty", np.zeros((0, 1)))]
    backgrounds += [(f"3x{a:g}", np.full((3, 1), a)) for a in anchors]
    if background is not None:
        backgrounds.append(("given", np.asarray(background, dtype=np.float64).reshape(-1, 1)))

    def data(rows: np.ndarray) -> Dataset:
        return Dataset(rows) if len(rows) else EmptyDataset()

    out: list[Candidate] = []
    for label, rows in backgrounds:
        with_pairs = label in ("empty", "given") or len(values) <= 8
        for i, a in enumerate(values):
            one = np.vstack([rows, [[a]]])
            out.append(Candidate(f"{label} | + [{a!r}]", "add-remove", data(rows), data(one)))
            out.append(Candidate(f"{label} + [{a!r}] | twice", "add-remove", data(one),
                                 data(np.vstack([one, [[a]]]))))
            if with_pairs:
                for b in values[i + 1:]:
                    out.append(Candidate(f"{label} + [{a!r}] | [{b!r}]", "replace-one", data(one),
                                         data(np.vstack([rows, [[b]]]))))
    return out


def _plugin_epsilon(scores_a: np.ndarray, scores_b: np.ndarray, delta: float) -> float:
    """A plug-in (uncertified) epsilon of threshold tests on held-out scores, both directions."""
    floor = 1.0 / min(scores_a.size, scores_b.size)
    thresholds = np.unique(np.concatenate([scores_a, scores_b]))
    sorted_a, sorted_b = np.sort(scores_a), np.sort(scores_b)
    above_a = 1 - np.searchsorted(sorted_a, thresholds, side="left") / sorted_a.size
    above_b = 1 - np.searchsorted(sorted_b, thresholds, side="left") / sorted_b.size
    return float(max(rates_epsilon(above_a, 1 - above_b, delta, floor=floor)[0].max(), 0.0))


def _strength(mechanism: Mechanism, candidate: Candidate, scores: Sequence[str], trials: int,
              seed: np.random.SeedSequence, delta: float) -> tuple[float, str]:
    """The strongest screening score on ``candidate``: (plug-in epsilon, score name)."""
    seed_a, seed_b = seed.spawn(2)
    out_a = mechanism.sample(candidate.first, trials=trials, seed=seed_a)
    out_b = mechanism.sample(candidate.second, trials=trials, seed=seed_b)
    half = trials // 2
    pair = CanaryPair(mechanism, candidate.first, candidate.second, np.ones(mechanism.output_dim), None,
                      Relation.REPLACE_ONE, "dataset-pair")
    best, chosen = -1.0, scores[0]
    for name in scores:
        score = fit_score(name, pair, out_a[:half], out_b[:half], seed=0)
        value = _plugin_epsilon(np.asarray(score(out_a[half:])), np.asarray(score(out_b[half:])), delta)
        if value > best:
            best, chosen = value, name
    return best, chosen


def search(mechanism: Mechanism, *, record_domain: tuple[float, float] | None = None,
           epsilon: float | None = None, thresholds: Sequence[float] = (), background: Any = None,
           score: str | None = None, trials: int = 100_000, screen_trials: int = 1_000,
           max_candidates: int = 400, delta: float = 1e-5, confidence: float = 0.95, seed: int = 0,
           title: str | None = None, queries: int | None = None, center: float = 1.0,
           sensitivity: float = 1.0, relation: str = "component-wise") -> SearchResult:
    """Screen candidate neighbouring pairs of ``mechanism`` and certify the strongest on fresh trials.

    Parameters
    ----------
    mechanism : Mechanism
        A function of a dataset wrapped with ``dpaudit.from_callable`` or
        ``from_batched_callable`` (records of one number).
    record_domain : (float, float), optional
        Where records lie (default: the mechanism's own ``record_domain``, or a
        library adapter's ``domain``).
    epsilon : float, optional
        The claimed epsilon at ``delta``; the result says whether the
        certified bound exceeds it.
    thresholds : sequence of float
        Clipping thresholds or other values where the code changes behaviour.
    background : array_like, optional
        Records of your own to use as one more background.
    score : str, optional
        Screen and certify with this score only (default: the strongest of
        ``projection``, ``gaussian`` and ``float-bits`` on the screening trials).
    trials : int
        Trials per dataset of the certifying audit.
    screen_trials : int
        Trials per dataset for each candidate's screening (never reused).
    max_candidates : int
        At most this many candidates are screened (a seeded sample when more).
    queries : int, optional
        The function takes a vector of this many query answers: screen the standard input
        patterns about ``(center, ..., center)`` with moves of ``sensitivity`` under ``relation``
        (``"component-wise"`` or ``"one-answer"``) instead of record pairs (``record_domain`` is
        then not needed; ``screen_trials`` should be larger: 20,000 is a good start).

    Returns
    -------
    SearchResult
    """
    if queries is not None:
        return _search_vectors(mechanism, queries=queries, center=center, sensitivity=sensitivity,
                               relation=relation, epsilon=epsilon, score=score, trials=trials,
                               screen_trials=screen_trials, delta=delta, confidence=confidence, seed=seed,
                               title=title)
    domain = record_domain if record_domain is not None else mechanism.declared_record_domain
    if domain is None:
        raise ParameterError("search needs record_domain=(low, high): where the records of your function lie")
    low, high = (check_real("record_domain", float(v)) for v in domain)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ParameterError(f"record_domain must be two finite numbers low < high, got record_domain={domain!r}")
    if mechanism.record_dim != 1 or mechanism.n_records is not None:
        raise ParameterError(f"search needs a function of a dataset of single numbers (from_callable), got "
                             f"mechanism {mechanism.name!r}")
    for value in thresholds:
        if not low <= float(value) <= high:
            raise ParameterError(f"thresholds must lie in the record domain [{low:g}, {high:g}], got {value!r}")
    if epsilon is not None:
        epsilon = check_real("epsilon", epsilon, nonnegative=True)
    screen_trials = check_int("screen_trials", screen_trials, minimum=20)
    max_candidates = check_int("max_candidates", max_candidates, minimum=1)
    candidates = candidate_pairs(low, high, thresholds=thresholds, background=background)
    screening, certifying = np.random.SeedSequence([seed, 0x5EA2C4]).spawn(2)
    if len(candidates) > max_candidates:
        keep = np.random.default_rng(screening.spawn(1)[0]).choice(len(candidates), max_candidates, replace=False)
        candidates = [candidates[i] for i in sorted(keep)]
    scores = (score,) if score is not None else SCREEN_SCORES
    table, best = [], None
    for candidate, child in zip(candidates, screening.spawn(len(candidates))):
        try:
            strength, chosen_score = _strength(mechanism, candidate, scores, screen_trials, child, delta)
        except Exception as exc:  # noqa: BLE001 - user code may fail on some datasets (an empty one): skip the pair
            table.append({**candidate.to_dict(), "screen_epsilon": None, "score": None,
                          "error": f"{type(exc).__name__}: {exc}"})
            continue
        table.append({**candidate.to_dict(), "screen_epsilon": strength, "score": chosen_score})
        if best is None or strength > best[0]:
            best = (strength, chosen_score, candidate)
    if best is None:
        raise ParameterError(f"every candidate pair failed; the first: {table[0]['name']}: {table[0]['error']}")
    _, chosen_score, candidate = best
    fresh = int(certifying.generate_state(1)[0])  # a seed the screening never drew from
    # the certifying audit, as dpaudit.audit runs it (in memory, one worker)
    job = make_job(mechanism, dataset_pair=(candidate.first, candidate.second), score=chosen_score, trials=trials,
                   delta=delta, confidence=confidence, seed=fresh,
                   title=title or f"{mechanism.label} search: {candidate.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=False))[0]
    chosen = {**candidate.to_dict(), "score": chosen_score, "screen_epsilon": best[0], "seed": fresh}
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials)


def _search_vectors(mechanism: Mechanism, *, queries: int, center: float, sensitivity: float, relation: str,
                    epsilon: float | None, score: str | None, trials: int, screen_trials: int, delta: float,
                    confidence: float, seed: int, title: str | None) -> SearchResult:
    """:func:`search` over the standard input patterns of a function of ``queries`` answers."""
    if epsilon is not None:
        epsilon = check_real("epsilon", epsilon, nonnegative=True)
    queries = check_int("queries", queries, minimum=1)
    screen_trials = check_int("screen_trials", screen_trials, minimum=20)
    center = check_real("center", center)
    sensitivity = check_real("sensitivity", sensitivity, positive=True)
    screening, certifying = np.random.SeedSequence([seed, 0x5EA2C4]).spawn(2)
    table, chosen_pair = screen_vector_pairs(
        mechanism, queries=queries, center=center, sensitivity=sensitivity, relation=relation,
        scores=(score,) if score is not None else VECTOR_SCORES, screen_trials=screen_trials, seed=screening)
    fresh = int(certifying.generate_state(1)[0])  # a seed the screening never drew from
    job = make_job(mechanism, dataset_pair=chosen_pair.datasets(), score=score, trials=trials, delta=delta,
                   confidence=confidence, seed=fresh, title=title or f"{mechanism.label} search: {chosen_pair.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=False))[0]
    row = next(r for r in table if r["name"] == chosen_pair.name)
    chosen = {**chosen_pair.to_dict(), "score": result.attack["score"], "screen_epsilon": row["screen_epsilon"],
              "seed": fresh}
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials)
