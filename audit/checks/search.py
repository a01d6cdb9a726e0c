"""Neighbour search: find the neighbouring pair on which a user function leaks most, then certify it once.

A user who wraps a function of a dataset with ``from_callable`` rarely knows
its worst neighbouring pair. :func:`search` builds candidate pairs from the
declared record domain ``[low, high]`` (docs/guide.md, "Neighbour search"):

* special values: both ends of the domain, 0 and the midpoint, the clipping
  thresholds the user names, powers of two inside the domain (float
  exponent boundaries), and the float just below each of these;
* replace-one pairs: one record changed between two special values, on a
  background of none, three records at each end or threshold, and the
  user's own records if given;
* add/remove pairs: a background against the same background plus one
  record (the empty dataset against one record where ``min_records`` is 0),
  and one record against the same record twice (duplicated records);
* position and size effects: on non-constant backgrounds drawn from the
  domain (its ends alternating, a ramp from end to end, two seeded uniform
  draws, and the user's records), a record added at each position, each
  record removed, and each record replaced by an end of the domain. Code
  whose output depends on where a record sits (the last record, the one
  before it) differs only there: on constant backgrounds every position
  looks the same.

No dataset of fewer than ``min_records`` records is built (default 1: user
code is never called on an empty dataset unless asked for).

The candidates are *screened* in rounds (successive halving): every one on
``screen_trials`` trials per side, the :data:`FIRST_CUT` strongest again on
more fresh trials, and the :data:`FINALISTS` strongest of those on a number
that grows with the audit's budget (``trials // 8``); each round fits every
screening score on half of its trials and measures its strength (a
Clopper-Pearson-penalised plug-in epsilon, never certified) on the other
half. The strongest pair of the last round is then audited on fresh trials,
from a seed the screening never used, by the same runner and with the same
default portfolio of scores as :func:`dpaudit.audit`. Only that one audit
certifies anything, so the search costs nothing in the failure probability:
the choice of the pair is a function of screening data, independent of the
certifying trials (docs/theory.md 3.8).

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

from dpaudit.auditing.checks.vector_pairs import SCREEN_SCORES as VECTOR_SCORES
from dpaudit.auditing.checks.vector_pairs import screen_pair, screen_vector_pairs
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.base import Mechanism, check_mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["Candidate", "SearchResult", "candidate_pairs", "screen_rounds", "search", "special_values"]

#: Scores tried on each candidate when none is named: the vector screen's (projection, gaussian, the mean
#: difference, the histogram of output rows, discrete: sentinel codes read as codes) and float-bits where the
#: outputs carry bits below a grid (it declines outputs on a coarse grid)
SCREEN_SCORES = (*VECTOR_SCORES, "float-bits")
#: ... and in the first round, where every candidate is screened, all but ``discrete``: its fit (a logistic
#: regression on encoded outputs, about 0.2 s on 500 trials per side) took 34 of the 53 s of a search of
#: DP-Auditorium's SVT3 (175 candidates); the histogram of output rows reads few-valued outputs there
FIRST_ROUND_SCORES = tuple(name for name in SCREEN_SCORES if name != "discrete")
#: Candidates kept after the first round, and after the second (successive halving). With the whole first
#: round's ranking on 10^3 trials per side, a one-step gradient descent (10^5 trials, docs/theory.md 3.8)
#: certified its pair of half the sensitivity on three seeds of four
FIRST_CUT, FINALISTS = 16, 4
#: The last round's trials per side, as a share of the audit's trials (at least ``screen_trials``)
FINAL_SHARE = 1 / 8
#: Seeded uniform draws from the record domain used as backgrounds (besides the ends and a ramp)
DRAWN_BACKGROUNDS = 2


class EmptyDataset(Dataset):
    """A dataset of no records: one side of the pair "empty dataset against one record" (``min_records=0``).

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

    def datasets(self) -> tuple[Dataset, Dataset]:
        return self.first, self.second

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "relation": self.relation, "S": self.first.records.ravel().tolist(),
                "S_prime": self.second.records.ravel().tolist()}


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What the search screened, what it chose, and the certifying audit of the choice.

    ``rounds`` lists each screening round: its trials per side and how many candidates it screened.
    """

    candidates: tuple[dict[str, Any], ...]
    chosen: dict[str, Any]
    result: AuditResult
    claimed_epsilon: float | None
    screen_trials: int
    rounds: tuple[dict[str, int], ...] = ()

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
                "rounds": list(self.rounds), "chosen": self.chosen, "candidates": list(self.candidates),
                "result": self.result.to_dict()}


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


def _backgrounds(low: float, high: float, size: int, seed: np.random.SeedSequence) -> list[tuple[str, np.ndarray]]:
    """Non-constant backgrounds from ``[low, high]``: the ends alternating (both ways round, ``size`` records),
    a ramp from end to end and back (``size + 1``), and :data:`DRAWN_BACKGROUNDS` seeded uniform draws
    (``size + 1``)."""
    alternate = np.where(np.arange(size) % 2 == 0, low, high)
    ramp = np.linspace(low, high, size + 1)
    drawn = np.random.default_rng(seed).uniform(low, high, (DRAWN_BACKGROUNDS, size + 1))
    rows = [("ends", alternate), ("ends reversed", alternate[::-1].copy()), ("ramp", ramp),
            ("ramp reversed", ramp[::-1].copy())]
    rows += [(f"drawn {k + 1}", row) for k, row in enumerate(drawn)]
    return [(label, row.reshape(-1, 1)) for label, row in rows]


def _positions(label: str, rows: np.ndarray, inserts: Sequence[float], ends: Sequence[float]) -> list[Candidate]:
    """Add each of ``inserts`` at each position of ``rows``, remove each record, replace each by each of ``ends``."""
    out = []
    shown = label if label == "given" else f"{label} {[float(f'{v:.3g}') for v in rows.ravel()]!r}"
    for position in range(len(rows) + 1):
        for value in inserts:
            grown = np.insert(rows, position, value, axis=0)
            out.append(Candidate(f"{shown} | insert {value!r} at {position}", "add-remove", Dataset(rows),
                                 Dataset(grown)))
    for position in range(len(rows)):
        out.append(Candidate(f"{shown} | remove at {position}", "add-remove", Dataset(np.delete(rows, position, 0)),
                             Dataset(rows)))
        for value in ends:
            if rows[position, 0] != value:
                changed = rows.copy()
                changed[position, 0] = value
                out.append(Candidate(f"{shown} | record {position} -> {value!r}", "replace-one", Dataset(rows),
                                     Dataset(changed)))
    return out


def candidate_pairs(low: float, high: float, *, thresholds: Sequence[float] = (),
                    background: np.ndarray | None = None, min_records: int = 1,
                    seed: int | np.random.SeedSequence = 0) -> list[Candidate]:
    """Every candidate neighbouring pair for records in ``[low, high]`` (see the module docstring).

    No dataset holds fewer than ``min_records`` records; ``seed`` draws the uniform backgrounds.
    """
    min_records = check_int("min_records", min_records, minimum=0)
    values = special_values(low, high, thresholds)
    anchors = sorted({low, high, *[float(t) for t in thresholds]})
    constant = max(3, min_records)
    # the smallest background every pair of special values is tried on: none, or min_records - 1 records at low
    small = max(0, min_records - 1)
    backgrounds: list[tuple[str, np.ndarray]] = [("empty" if small == 0 else f"{small}x{low:g}",
                                                  np.full((small, 1), low))]
    backgrounds += [(f"{constant}x{a:g}", np.full((constant, 1), a)) for a in anchors]
    given = None if background is None else np.asarray(background, dtype=np.float64).reshape(-1, 1)
    if given is not None:
        backgrounds.append(("given", given))

    def data(rows: np.ndarray) -> Dataset:
        return Dataset(rows) if len(rows) else EmptyDataset()

    out: list[Candidate] = []
    for label, rows in backgrounds:
        with_pairs = label in (backgrounds[0][0], "given") or len(values) <= 8
        for i, a in enumerate(values):
            one = np.vstack([rows, [[a]]])
            out.append(Candidate(f"{label} | + [{a!r}]", "add-remove", data(rows), data(one)))
            out.append(Candidate(f"{label} + [{a!r}] | twice", "add-remove", data(one),
                                 data(np.vstack([one, [[a]]]))))
            if with_pairs:
                for b in values[i + 1:]:
                    out.append(Candidate(f"{label} + [{a!r}] | [{b!r}]", "replace-one", data(one),
                                         data(np.vstack([rows, [[b]]]))))
    # position and size effects: non-constant backgrounds, a record added at each position, removed, replaced
    inserts = sorted({low, high, (low + high) / 2, *([0.0] if low <= 0 <= high else []),
                      *[float(t) for t in thresholds]})
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence([int(seed), 0xBAC6])
    varied = _backgrounds(low, high, max(2, min_records), root)
    if given is not None and len(given) and np.ptp(given) > 0:
        varied.append(("given", given))
    for label, rows in varied:
        out += _positions(label, rows, inserts, (low, high))
    seen, kept = set(), []
    for candidate in out:  # at least min_records records on each side; each pair of datasets once
        key = (candidate.first.records.tobytes(), candidate.first.n, candidate.second.records.tobytes(),
               candidate.second.n)
        if min(candidate.first.n, candidate.second.n) >= min_records and key not in seen:
            seen.add(key)
            kept.append(candidate)
    return kept


def _round_trials(screen_trials: int, trials: int) -> tuple[int, int, int]:
    """Trials per side of the three screening rounds: ``screen_trials``, the last round's share of the audit's
    ``trials`` (at least ``screen_trials``), and their geometric mean between them."""
    final = max(screen_trials, int(FINAL_SHARE * trials))
    return screen_trials, int(round(math.sqrt(screen_trials * final))), final


def screen_rounds(mechanism: Mechanism, candidates: Sequence[Candidate], *, scores: Sequence[str],
                  round_trials: Sequence[int], keep: Sequence[int], seed: np.random.SeedSequence,
                  first_scores: Sequence[str] | None = None) -> tuple[list[dict[str, Any]], int | None]:
    """Screen ``candidates`` in rounds (successive halving); return the table and the chosen index.

    Round ``r`` screens, on ``round_trials[r]`` fresh trials per side, every candidate (``r = 0``, with
    ``first_scores``, default ``scores``) or the ``keep[r - 1]`` strongest of the round before (with
    ``scores``); the strongest of the last round is chosen (None when the function failed on every
    candidate). Row ``k`` holds candidate ``k``'s first-round ``screen_epsilon`` and ``score`` (or its
    ``error``) and, in ``rounds``, each later round's. Every draw comes from ``seed``'s children (screening
    data only).
    """
    children = seed.spawn(len(round_trials))
    table: list[dict[str, Any]] = []
    strength: dict[int, float] = {}
    for index, (candidate, child) in enumerate(zip(candidates, children[0].spawn(len(candidates)))):
        try:
            value, name = screen_pair(mechanism, *candidate.datasets(), first_scores or scores, round_trials[0],
                                      child, candidate.relation)
        except Exception as exc:  # noqa: BLE001 - user code may fail on some datasets: skip the pair, say why
            table.append({**candidate.to_dict(), "screen_epsilon": None, "score": None,
                          "error": f"{type(exc).__name__}: {exc}"})
            continue
        table.append({**candidate.to_dict(), "screen_epsilon": value, "score": name})
        strength[index] = value
    for trials, count, child in zip(round_trials[1:], keep, children[1:]):
        order = sorted(strength, key=lambda k: -strength[k])[:count]  # stable: ties by candidate order
        if len(order) <= 1:
            break
        strength = {}
        for index, grandchild in zip(order, child.spawn(len(order))):
            candidate = candidates[index]
            try:
                value, name = screen_pair(mechanism, *candidate.datasets(), scores, trials, grandchild,
                                          candidate.relation)
            except Exception as exc:  # noqa: BLE001 - random failures of user code: out of the running
                value, name = -1.0, f"error: {type(exc).__name__}"
            table[index].setdefault("rounds", []).append({"trials": trials, "screen_epsilon": value, "score": name})
            strength[index] = value
    if not strength:
        return table, None
    return table, max(strength, key=lambda k: (strength[k], -k))


def search(mechanism: Mechanism, *, record_domain: tuple[float, float] | None = None,
           epsilon: float | None = None, thresholds: Sequence[float] = (), background: Any = None,
           score: Any = None, trials: int = 100_000, screen_trials: int = 1_000, min_records: int = 1,
           max_candidates: int = 600, delta: float = 1e-5, confidence: float = 0.95, seed: int = 0,
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
        certified bound exceeds it (and the certifying audit judges it as the claim for the chosen pair's
        relation).
    thresholds : sequence of float
        Clipping thresholds or other values where the code changes behaviour.
    background : array_like, optional
        Records of your own to use as one more background.
    score : str, Score or list of them, optional
        Screen with this score (a name) and certify with it (default: screen with every screening score,
        :data:`SCREEN_SCORES`, and certify with the default portfolio, as :func:`dpaudit.audit` does).
    trials : int
        Trials per dataset of the certifying audit; the last screening round draws ``trials // 8``.
    screen_trials : int
        Trials per dataset for each candidate's first screening round (never reused).
    min_records : int
        No dataset holds fewer records (default 1: the function is never called on an empty dataset; 0
        adds the empty dataset against one record).
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
    check_mechanism(mechanism)  # a plain function is refused with how to wrap it, before any screening
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
    trials = check_int("trials", trials, minimum=20)
    max_candidates = check_int("max_candidates", max_candidates, minimum=1)
    screening, certifying = np.random.SeedSequence([seed, 0x5EA2C4]).spawn(2)
    drawing, sampling, rounds_seed = screening.spawn(3)
    candidates = candidate_pairs(low, high, thresholds=thresholds, background=background,
                                 min_records=min_records, seed=drawing)
    if len(candidates) > max_candidates:
        keep = np.random.default_rng(sampling).choice(len(candidates), max_candidates, replace=False)
        candidates = [candidates[i] for i in sorted(keep)]
    named = isinstance(score, str) and score != "auto"
    round_trials = _round_trials(screen_trials, trials)
    table, best = screen_rounds(mechanism, candidates, scores=(score,) if named else SCREEN_SCORES,
                                first_scores=(score,) if named else FIRST_ROUND_SCORES, round_trials=round_trials,
                                keep=(FIRST_CUT, FINALISTS), seed=rounds_seed)
    if best is None:
        raise ParameterError(f"every candidate pair failed; the first: {table[0]['name']}: {table[0]['error']}")
    candidate = candidates[best]
    fresh = int(certifying.generate_state(1)[0])  # a seed the screening never drew from
    # the certifying audit, as dpaudit.audit runs it (in memory, one worker, the default portfolio)
    job = make_job(mechanism, dataset_pair=(candidate.first, candidate.second), score=score, trials=trials,
                   delta=delta, confidence=confidence, seed=fresh, claimed_epsilon=epsilon,
                   title=title or f"{mechanism.label} search: {candidate.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=False))[0]
    row = table[best]
    last = (row.get("rounds") or [row])[-1]
    chosen = {**candidate.to_dict(), "score": result.attack["score"], "screen_score": last["score"],
              "screen_epsilon": last["screen_epsilon"], "seed": fresh}
    screened = [len(candidates), *[sum(1 for r in table if len(r.get("rounds", ())) > k) for k in range(2)]]
    rounds = tuple({"trials": t, "candidates": n} for t, n in zip(round_trials, screened) if n)
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials, rounds)


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
                   confidence=confidence, seed=fresh, claimed_epsilon=epsilon,
                   title=title or f"{mechanism.label} search: {chosen_pair.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=False))[0]
    row = next(r for r in table if r["name"] == chosen_pair.name)
    chosen = {**chosen_pair.to_dict(), "score": result.attack["score"], "screen_epsilon": row["screen_epsilon"],
              "seed": fresh}
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials)
