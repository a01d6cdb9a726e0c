"""Neighbour search: find the neighbouring pair on which a user function leaks most, then certify it once.

A user who wraps a function of a dataset with ``from_callable`` rarely knows
its worst neighbouring pair. :func:`search` builds candidate pairs from the
declared record domain (docs/guide.md, "Neighbour search"): records of one
number (:mod:`dpaudit.auditing.checks.search_numbers`: special values, replace-one and add/remove pairs on
constant and non-constant backgrounds, positions), records of several
columns with a label (:mod:`dpaudit.auditing.checks.search_records`: label flips, feature extremes), and
large datasets where a float sum rounds by more than one record moves it
(:mod:`dpaudit.auditing.checks.search_large`, Casacuberta et al. 2022). Only pairs of the relations the claim
is made for are built (:mod:`dpaudit.auditing.checks.search_relations`: replace-one for a claim about datasets
of a known size, whose datasets then all hold that many records); a relation
named that the claim is not made for is searched, and the result says the
claim does not apply to it instead of reporting a violation.

The candidates are *screened* in rounds (successive halving): every one on
``screen_trials`` trials per side, the :data:`FIRST_CUT` strongest again on
more fresh trials, and the :data:`FINALISTS` strongest of those on a number
that grows with the audit's budget (``trials // 8``); each round fits every
screening score on half of its trials and measures its strength (a
Clopper-Pearson-penalised plug-in epsilon, never certified) on the other
half. The strongest pair of the last round is then audited on fresh trials,
from a seed the screening never used, by the same runner and with the same
default portfolio of scores as :func:`dpaudit.audit`. Only that one audit
certifies anything, so the search costs nothing in the failure probability,
however many candidates it screens: the choice of the pair is a function of
screening data, independent of the certifying trials (docs/theory.md 3.8).

For a function of a vector of query answers (``queries=n``: a dataset of
``n`` records, the answers) the candidates are instead the standard input
patterns of StatDP and DP-Sniper (:mod:`dpaudit.auditing.checks.vector_pairs`), and the
chosen pair is certified with the audit's default portfolio unless a score
is named.

References
----------
Casacuberta, Shoemate, Vadhan, Wagaman (2022), "Widespread underestimation of sensitivity in differentially
private libraries and how to fix it", ACM CCS 2022; Karnin, Koren, Somekh (2013), successive halving;
docs/theory.md 3.8.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.auditing.checks.search_candidates import Candidate, EmptyDataset
from dpaudit.auditing.checks.search_large import LARGE_RECORDS
from dpaudit.auditing.checks.search_numbers import candidate_pairs, special_values
from dpaudit.auditing.checks.search_records import parse_domain, record_pairs
from dpaudit.auditing.checks.search_relations import claim_relations, known_size, searched_relations
from dpaudit.auditing.checks.vector_pairs import SCREEN_SCORES as VECTOR_SCORES
from dpaudit.auditing.checks.vector_pairs import screen_pair, screen_vector_pairs
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.progress import enabled as progress_enabled
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.base import Mechanism, check_mechanism
from dpaudit.mechanisms.wrapped import CallableMechanism

__all__ = ["Candidate", "EmptyDataset", "SearchResult", "candidate_pairs", "screen_rounds", "search",
           "special_values"]

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


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """What the search screened, what it chose, and the certifying audit of the choice.

    ``rounds`` lists each screening round: its trials per side and how many candidates it screened.
    ``relations`` are the relations searched; ``claim_relations`` those the mechanism's claim is made for
    (None: it states none, and ``epsilon`` is read as a claim for every relation searched).
    """

    candidates: tuple[dict[str, Any], ...]
    chosen: dict[str, Any]
    result: AuditResult
    claimed_epsilon: float | None
    screen_trials: int
    rounds: tuple[dict[str, int], ...] = ()
    relations: tuple[str, ...] = ()
    claim_relations: tuple[str, ...] | None = None

    @property
    def epsilon_lower_bound(self) -> float:
        return self.result.epsilon_lower_bound

    @property
    def claim_applies(self) -> bool:
        """True when the claim is made for the chosen pair's relation (always when the mechanism states none)."""
        return self.claim_relations is None or self.chosen.get("relation") in self.claim_relations

    @property
    def violation(self) -> bool:
        """True when the certified bound exceeds the claim, and the claim is made for the chosen pair's relation."""
        return (self.claim_applies and self.claimed_epsilon is not None
                and self.epsilon_lower_bound > self.claimed_epsilon)

    @property
    def note(self) -> str:
        """Why no violation can be read from this search ("" when the claim applies to the chosen pair)."""
        if self.claim_applies:
            return ""
        return (f"the claim is made for {' and '.join(self.claim_relations or ())} neighbours; it says nothing about "
                f"{self.chosen.get('relation')} pairs, so no violation of it can be certified on them")

    def to_dict(self) -> dict[str, Any]:
        return {"claimed_epsilon": self.claimed_epsilon, "violation": self.violation,
                "epsilon_lower_bound": self.epsilon_lower_bound, "relations": list(self.relations),
                "claim_relations": None if self.claim_relations is None else list(self.claim_relations),
                "claim_applies": self.claim_applies, **({"note": self.note} if self.note else {}),
                "screen_trials": self.screen_trials, "rounds": list(self.rounds), "chosen": self.chosen,
                "candidates": list(self.candidates), "result": self.result.to_dict()}


def _round_trials(screen_trials: int, trials: int) -> tuple[int, int, int]:
    """Trials per side of the three screening rounds: ``screen_trials``, the last round's share of the audit's
    ``trials`` (at least ``screen_trials``), and their geometric mean between them."""
    final = max(screen_trials, int(FINAL_SHARE * trials))
    return screen_trials, int(round(math.sqrt(screen_trials * final))), final


def screen_rounds(mechanism: Mechanism, candidates: Sequence[Candidate], *, scores: Sequence[str],
                  round_trials: Sequence[int], keep: Sequence[int], seed: np.random.SeedSequence,
                  first_scores: Sequence[str] | None = None,
                  progress: bool = False) -> tuple[list[dict[str, Any]], int | None]:
    """Screen ``candidates`` in rounds (successive halving); return the table and the chosen index.

    Round ``r`` screens, on ``round_trials[r]`` fresh trials per side, every candidate (``r = 0``, with
    ``first_scores``, default ``scores``) or the ``keep[r - 1]`` strongest of the round before (with
    ``scores``); the strongest of the last round is chosen (None when the function failed on every
    candidate). Row ``k`` holds candidate ``k``'s first-round ``screen_epsilon`` and ``score`` (or its
    ``error``) and, in ``rounds``, each later round's. Every draw comes from ``seed``'s children (screening
    data only). With ``progress``, a bar per round on standard error.
    """
    children = seed.spawn(len(round_trials))
    table: list[dict[str, Any]] = []
    strength: dict[int, float] = {}
    first = zip(candidates, children[0].spawn(len(candidates)))
    for index, (candidate, child) in enumerate(_bar(first, len(candidates), "screening pairs", progress)):
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
        for index, grandchild in _bar(zip(order, child.spawn(len(order))), len(order),
                                      f"screening the {len(order)} strongest", progress):
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


def _bar(items: Any, total: int, description: str, progress: bool) -> Any:
    """``items`` under a progress bar on standard error (``items`` itself when ``progress`` is off)."""
    return tqdm(items, total=total, desc=description, unit="pair", file=sys.stderr, disable=not progress,
                dynamic_ncols=True, leave=False)


def search(mechanism: Mechanism, *, record_domain: Any = None, epsilon: float | None = None,
           thresholds: Sequence[float] = (), background: Any = None, score: Any = None, trials: int = 100_000,
           screen_trials: int = 1_000, min_records: int = 1, max_candidates: int = 600, delta: float = 1e-5,
           confidence: float = 0.95, seed: int = 0, title: str | None = None, queries: int | None = None,
           center: float = 1.0, sensitivity: float = 1.0, relation: str | None = None,
           labels: Sequence[float] | None = None, size: int | None = None,
           large_records: int = LARGE_RECORDS, progress: bool | None = None) -> SearchResult:
    """Screen candidate neighbouring pairs of ``mechanism`` and certify the strongest on fresh trials.

    Parameters
    ----------
    mechanism : Mechanism
        A function of a dataset wrapped with ``dpaudit.from_callable`` or ``from_batched_callable``, or a
        library adapter (``from_opendp``, ``from_diffprivlib``, ...).
    record_domain : (float, float) or sequence of them, optional
        Where records lie: ``(low, high)`` for records of one number, or one ``(low, high)`` per column for
        records of several (default: the mechanism's own ``record_domain``, or a library adapter's ``domain``).
    epsilon : float, optional
        The claimed epsilon at ``delta``; the result says whether the certified bound exceeds it (and the
        certifying audit judges it as the claim for the chosen pair's relation, when the claim is made for it).
    thresholds : sequence of float
        Clipping thresholds or other values where the code changes behaviour (records of one number).
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
    relation : str, optional
        Records: ``"replace-one"``, ``"add-remove"`` or ``"zero-out"`` (a record against the zero record);
        default the relations the mechanism's claim is made for (replace-one and add/remove for a function
        that states none). A relation the claim is not made for is searched, and the result says the claim
        does not apply (``claim_applies`` False, never a violation). With ``queries``: ``"component-wise"``
        (default) or ``"one-answer"``.
    labels : sequence of float, optional
        The values of a label column after the record's features: candidates flip it.
    size : int, optional
        Every dataset holds this many records (a claim for datasets of a known size: replace-one pairs only);
        default the mechanism's own (an OpenDP measurement on a sized domain).
    large_records : int
        Records of the large datasets offered for float sums and means (:data:`LARGE_RECORDS`, 0: none; records
        of one number; with ``size``, that size).
    progress : bool, optional
        Progress bars on standard error while screening and certifying (default: when standard error is a
        terminal, or as ``DPAUDIT_PROGRESS`` says; ``dpaudit.core.progress``).
    queries : int, optional
        The function takes a vector of this many query answers: screen the standard input
        patterns about ``(center, ..., center)`` with moves of ``sensitivity`` under ``relation``
        instead of record pairs (``record_domain`` is then not needed; ``screen_trials`` should be larger:
        20,000 is a good start).

    Returns
    -------
    SearchResult

    References
    ----------
    docs/guide.md, "Neighbour search"; docs/theory.md 3.8.
    """
    check_mechanism(mechanism)  # a plain function is refused with how to wrap it, before any screening
    progress = progress_enabled() if progress is None else bool(progress)
    if queries is not None:
        given = [name for name, value in (("labels", labels), ("size", size)) if value is not None]
        if given:
            raise ParameterError(f"{given[0]} does not apply to a search over query answers (queries={queries!r})")
        return _search_vectors(mechanism, queries=queries, center=center, sensitivity=sensitivity,
                               relation="component-wise" if relation is None else relation, epsilon=epsilon,
                               score=score, trials=trials, screen_trials=screen_trials, delta=delta,
                               confidence=confidence, seed=seed, title=title, progress=progress)
    domain = record_domain if record_domain is not None else mechanism.declared_record_domain
    if domain is None:
        raise ParameterError("search needs record_domain=(low, high): where the records of your function lie")
    columns, labels = parse_domain(domain, labels)
    if epsilon is not None:
        epsilon = check_real("epsilon", epsilon, nonnegative=True)
    screen_trials = check_int("screen_trials", screen_trials, minimum=20)
    trials = check_int("trials", trials, minimum=20)
    max_candidates = check_int("max_candidates", max_candidates, minimum=1)
    large_records = check_int("large_records", large_records, minimum=0)
    size = _size(mechanism, size)
    claimed = claim_relations(mechanism)
    relations = searched_relations(relation, claimed, size)
    screening, certifying = np.random.SeedSequence([seed, 0x5EA2C4]).spawn(2)
    drawing, sampling, rounds_seed = screening.spawn(3)
    candidates = _candidates(mechanism, columns, labels, thresholds=thresholds, background=background,
                             min_records=min_records, seed=drawing, relations=relations, size=size,
                             large_records=large_records)
    if len(candidates) > max_candidates:
        keep = np.random.default_rng(sampling).choice(len(candidates), max_candidates, replace=False)
        candidates = [candidates[i] for i in sorted(keep)]
    named = isinstance(score, str) and score != "auto"
    round_trials = _round_trials(screen_trials, trials)
    table, best = screen_rounds(mechanism, candidates, scores=(score,) if named else SCREEN_SCORES,
                                first_scores=(score,) if named else FIRST_ROUND_SCORES, round_trials=round_trials,
                                keep=(FIRST_CUT, FINALISTS), seed=rounds_seed, progress=progress)
    if best is None:
        raise ParameterError(f"every candidate pair failed; the first: {table[0]['name']}: {table[0]['error']}")
    candidate = candidates[best]
    applies = claimed is None or candidate.relation in claimed
    fresh = int(certifying.generate_state(1)[0])  # a seed the screening never drew from
    # the certifying audit, as dpaudit.audit runs it (in memory, one worker, the default portfolio), on a pair of
    # the candidate's relation; the caller's epsilon is a claim only where the claim is made for that relation
    pair = CanaryPair(mechanism, candidate.first, candidate.second, np.ones(mechanism.output_dim), None,
                      Relation(candidate.relation), "dataset-pair")
    job = make_job(mechanism, pair=pair, score=score, trials=trials, delta=delta, confidence=confidence, seed=fresh,
                   claimed_epsilon=epsilon if applies else None,
                   title=title or f"{mechanism.label} search: {candidate.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=progress))[0]
    row = table[best]
    last = (row.get("rounds") or [row])[-1]
    chosen = {**candidate.to_dict(), "score": result.attack["score"], "screen_score": last["score"],
              "screen_epsilon": last["screen_epsilon"], "seed": fresh}
    screened = [len(candidates), *[sum(1 for r in table if len(r.get("rounds", ())) > k) for k in range(2)]]
    rounds = tuple({"trials": t, "candidates": n} for t, n in zip(round_trials, screened) if n)
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials, rounds,
                        tuple(str(r) for r in relations), None if claimed is None else tuple(str(r) for r in claimed))


def _size(mechanism: Mechanism, size: int | None) -> int | None:
    """The one dataset size every candidate keeps: ``size`` or the mechanism's (they must agree), or None."""
    own = known_size(mechanism)
    if size is None:
        return own
    size = check_int("size", size, minimum=1)
    if own is not None and size != own:
        raise ParameterError(f"size must be the mechanism's dataset size {own} (its claim is for datasets of {own} "
                             f"records), got size={size}")
    return size


def _candidates(mechanism: Mechanism, columns: list[tuple[float, float]], labels: tuple[float, ...] | None, *,
                thresholds: Sequence[float], background: Any, min_records: int, seed: np.random.SeedSequence,
                relations: tuple[Relation, ...], size: int | None, large_records: int) -> list[Candidate]:
    """The candidate pairs of records of ``columns`` (and ``labels``), after the mechanism is checked to take them."""
    if mechanism.n_records is not None:
        raise ParameterError(f"search needs a function of a dataset of any number of records (from_callable or a "
                             f"library adapter), got mechanism {mechanism.name!r} of {mechanism.n_records} records")
    width = len(columns) + (labels is not None)
    if width != mechanism.record_dim and not isinstance(mechanism, CallableMechanism):  # a callable takes any width
        raise ParameterError(f"search: mechanism {mechanism.name!r} takes records of {mechanism.record_dim} "
                             f"number(s), got record_domain and labels for records of {width}")
    if width > 1:
        if len(thresholds):
            raise ParameterError(f"thresholds apply to records of one number, got thresholds={list(thresholds)!r} "
                                 f"for records of {width} columns")
        found = record_pairs(columns, labels, background=background, min_records=min_records, seed=seed,
                             relations=relations, size=size)
    else:
        low, high = columns[0]
        for value in thresholds:
            if not low <= float(value) <= high:
                raise ParameterError(f"thresholds must lie in the record domain [{low:g}, {high:g}], got {value!r}")
        if Relation.ZERO_OUT in relations and not low <= 0 <= high:
            raise ParameterError(f"relation='zero-out' needs the zero record inside the record domain, got "
                                 f"record_domain=({low:g}, {high:g})")
        found = candidate_pairs(low, high, thresholds=thresholds, background=background, min_records=min_records,
                                seed=seed, relations=relations, size=size, large_records=large_records)
    if not found:
        raise ParameterError(f"no candidate pair of the {' or '.join(map(str, relations))} relation fits "
                             f"(size={size}, min_records={min_records})")
    return found


def _search_vectors(mechanism: Mechanism, *, queries: int, center: float, sensitivity: float, relation: str,
                    epsilon: float | None, score: str | None, trials: int, screen_trials: int, delta: float,
                    confidence: float, seed: int, title: str | None, progress: bool) -> SearchResult:
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
        scores=(score,) if score is not None else VECTOR_SCORES, screen_trials=screen_trials, seed=screening,
        progress=progress)
    fresh = int(certifying.generate_state(1)[0])  # a seed the screening never drew from
    job = make_job(mechanism, dataset_pair=chosen_pair.datasets(), score=score, trials=trials, delta=delta,
                   confidence=confidence, seed=fresh, claimed_epsilon=epsilon,
                   title=title or f"{mechanism.label} search: {chosen_pair.name}")
    result = run_audits([job], RunOptions(store=MEMORY, workers=1, progress=progress))[0]
    row = next(r for r in table if r["name"] == chosen_pair.name)
    chosen = {**chosen_pair.to_dict(), "score": result.attack["score"], "screen_epsilon": row["screen_epsilon"],
              "seed": fresh}
    return SearchResult(tuple(table), chosen, result, epsilon, screen_trials, relations=(relation,))
