"""The anytime-valid design: trials in growing chunks, each chunk bet on with tests fixed from the earlier ones.

An :class:`AnytimeJob` wraps the :class:`~dpaudit.auditing.jobs.job.AuditJob` that says what is audited (the
mechanism, its canary pairs, the scores, delta, confidence, seed; ``trials`` is the budget per side and
``chunk_size`` the largest chunk). :func:`run_anytime` draws chunk 0 (``first`` trials per side), then chunks
of ``first``, ``2 first``, ``4 first`` ... trials up to ``chunk_size``. Before chunk ``j`` is looked at, the score
is fitted (a portfolio chooses) on the raw outputs of chunks ``0 .. j-1`` while they double, and the tests
and bets of every cell of :class:`~dpaudit.auditing.statistics.betting.BettingProcess` are placed on their
scores; chunk ``j`` is then bet on. The design stops at the first trial the bound exceeds the claim (the
caller's ``claimed_epsilon``, else the mechanism's smallest applicable claim for the pair's relation), at the
budget, or when even optimistic rates could not reach the claim in the trials left (futility).

Chunks are stored under keys ``(index, side, "any", j)`` as raw outputs, so a killed run resumes from the
store and recomputes the same process (same seeds, same fits, same bets). The id hashes what is drawn
without the budget: a larger budget continues the same chunks; changed code starts a fresh process
(the fingerprint is in the id).

References
----------
docs/theory.md 13; audit/statistics/betting.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.attacks.score_protocol import score_arithmetic
from dpaudit.attacks.scores import ScoreFunction
from dpaudit.auditing.jobs.anytime_result import anytime_result
from dpaudit.auditing.jobs.assemble import claim_entries, claimed_entry
from dpaudit.auditing.jobs.backend import execution_backend
from dpaudit.auditing.jobs.fingerprint import code_version
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.store import Store, new_owner
from dpaudit.auditing.statistics.betting import BettingProcess, epsilon_grid
from dpaudit.auditing.statistics.portfolio import choose_score
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS
from dpaudit.auditing.statistics.verdict import applicable_bounds
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int

__all__ = ["ANYTIME_DEFAULTS", "AnytimeJob", "REFIT_LIMIT", "chunk_schedule", "run_anytime"]

#: The design's own settings and defaults: trials per side of the first chunk (it only places the first test)
ANYTIME_DEFAULTS = {"first": 100}
#: The score is refitted while the earlier trials per side double, up to this many; then it stays fixed
#: (refits cost a portfolio's fits each; a test placed on more trials gains little)
REFIT_LIMIT = 20_000
_PART = "any"


def chunk_schedule(first: int, largest: int, budget: int) -> list[int]:
    """Trials per side of each chunk: ``first``, ``first``, ``2 first``, ... up to ``largest``, adding up to
    ``budget``."""
    first = check_int("first", first, minimum=10)
    largest, budget = max(int(largest), first), int(budget)
    sizes, size = [min(first, budget)], first
    while sum(sizes) < budget:
        sizes.append(min(size, largest, budget - sum(sizes)))
        size = min(2 * size, largest)
    return sizes


@dataclasses.dataclass(frozen=True, eq=False)
class AnytimeJob:
    """An anytime-valid audit ready to run (``design == "anytime"``).

    Parameters
    ----------
    job : AuditJob
        What is audited and at which delta, confidence and seed; ``settings.trials`` is the budget per side and
        ``settings.chunk_size`` the largest chunk.
    first : int
        Trials per side of the first chunk (at least 10; a portfolio of scores needs at least 40).
    futility : bool
        Stop when even optimistic rates could not certify the claim in the budget left (default True); False
        watches the whole budget unless a violation is certified.
    """

    job: AuditJob
    first: int = ANYTIME_DEFAULTS["first"]
    futility: bool = True
    design: str = dataclasses.field(default="anytime", init=False)

    def __post_init__(self) -> None:
        check_int("first", self.first, minimum=10)
        if self.first > self.job.settings.trials:
            raise ParameterError(f"first must be at most the budget trials={self.job.settings.trials}, "
                                 f"got first={self.first}")
        if self.job.fitted and len(self.job.scores) > 1 and self.first < 40:
            raise ParameterError(f"a portfolio of scores chooses on the first chunk and needs first >= 40, "
                                 f"got first={self.first}")

    @property
    def title(self) -> str:
        return self.job.title

    @property
    def settings(self) -> Any:
        return self.job.settings

    @property
    def draws_id(self) -> str:
        """What is drawn, without the budget (a larger budget continues the same chunks)."""
        drawn = self.job.with_trials(AUDIT_DEFAULTS["trials"]).draws_id
        return hashlib.sha256(f"{drawn}/anytime/{self.first}".encode()).hexdigest()[:16]

    @property
    def audit_id(self) -> str:
        """The result's id: the draws and the budget."""
        stops = "" if self.futility else "/no-futility"
        return hashlib.sha256(f"{self.draws_id}/{self.job.settings.trials}{stops}".encode()).hexdigest()[:16]


def target_epsilon(job: AuditJob, pair: Any) -> float | None:
    """The claim the design stops at: the caller's ``claimed_epsilon``, else the smallest applicable upper-bound
    claim for the pair's relation (None: none applies, and the design runs its budget)."""
    if job.claimed_epsilon is not None:
        return float(job.claimed_epsilon)
    bounds = applicable_bounds(claim_entries(job.mechanism, pair.index, job.settings.delta, pair), str(pair.relation))
    return min((c.epsilon for c in bounds), default=None)


@dataclasses.dataclass
class _Position:
    """One canary position's stream: raw outputs while the score may be refitted, scores, and its process."""

    pair: Any
    process: BettingProcess
    target: float | None
    raw: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=lambda: {"a": [], "b": []})
    scores: dict[str, list[np.ndarray]] = dataclasses.field(default_factory=lambda: {"a": [], "b": []})
    scorer: ScoreFunction | None = None
    fitted_on: int = 0
    chosen: str = ""
    fits: int = 0
    stopped: str = ""

    def seen(self) -> int:
        """Trials per side whose raw outputs are kept (all seen, while the score may be refitted)."""
        return sum(chunk.shape[0] for chunk in self.raw["a"])


def _fit(job: AuditJob, position: _Position) -> None:
    """Fit (or choose) the score on every raw output seen, and rescore them."""
    settings = job.settings
    raw_a, raw_b = (np.concatenate(position.raw[s]) for s in ("a", "b"))
    if job.fitted:
        score, position.scorer, _ = choose_score(job.scores, position.pair, raw_a, raw_b, seed=settings.seed,
                                                 delta=settings.delta, confidence=settings.confidence)
    else:
        score = job.scores[0]
        with score_arithmetic():
            position.scorer = score.fit(position.pair, None, None, settings.seed)
    position.chosen = score.name
    position.fitted_on = raw_a.shape[0]
    position.fits += 1
    position.scores = {"a": [_scored(position, raw_a)], "b": [_scored(position, raw_b)]}


def _scored(position: _Position, outputs: np.ndarray) -> np.ndarray:
    """The chosen score of ``outputs``; a ParameterError naming the score where one is not a finite number (NumPy's
    warnings of the score's arithmetic are not shown: the refusal says it)."""
    with score_arithmetic():
        values = np.asarray(position.scorer(outputs), float)
    if not np.all(np.isfinite(values)):
        bad = int(np.count_nonzero(~np.isfinite(values)))
        raise ParameterError(f"score {position.chosen!r} gave {bad} value(s) that are not finite numbers on "
                             f"{values.shape[0]} outputs of the anytime audit: use another score")
    return values


def _due(job: AuditJob, position: _Position) -> bool:
    """Whether the score is (re)fitted before the next chunk: first time, and while the trials seen double."""
    if position.scorer is None:
        return True
    seen = position.seen()
    return job.fitted and position.fitted_on < REFIT_LIMIT and seen >= 2 * position.fitted_on


def _step(job: AnytimeJob, position: _Position, number: int, chunk_a: np.ndarray, chunk_b: np.ndarray,
          remaining: int) -> None:
    """Bet on chunk ``number`` of one position (chunk 0 only places the first test), then judge the stop."""
    if number == 0:
        position.process.trials += chunk_a.shape[0]
    else:
        if _due(job.job, position):
            _fit(job.job, position)
        prev = {s: np.concatenate(position.scores[s]) for s in ("a", "b")}
        bets = position.process.bets(prev["a"], prev["b"])
        new_a, new_b = (_scored(position, c) for c in (chunk_a, chunk_b))
        position.process.update(bets, new_a, new_b)
        position.scores["a"].append(new_a)
        position.scores["b"].append(new_b)
    if job.job.fitted and (position.scorer is None or position.fitted_on < REFIT_LIMIT) or number == 0:
        position.raw["a"].append(chunk_a)
        position.raw["b"].append(chunk_b)
    else:
        position.raw = {"a": [], "b": []}  # the score stays fixed: raw outputs are no longer needed
    if position.target is None:
        return
    if position.process.exceeded_at(position.target) is not None:
        position.stopped = "violation"
    elif job.futility and number > 0 and remaining > 0:
        prev = {s: np.concatenate(position.scores[s]) for s in ("a", "b")}
        if position.process.futile(prev["a"], prev["b"], position.target, remaining):
            position.stopped = "futility"


def run_anytime(job: AnytimeJob, store: Store, options: Any, execute: Callable[..., Any],
                task: Callable[..., Any]) -> Any:
    """Run ``job`` chunk by chunk (reusing stored chunks) and return its ``AuditResult``.

    ``execute`` and ``task`` are the runner's chunk executor and task type (``audit.jobs.runner``), so chunks
    are sampled, leased and stored exactly as for the other designs.
    """
    # tqdm loads for a run, as in the runner
    from tqdm import tqdm

    started = time.perf_counter()
    base, settings = job.job, job.job.settings
    sizes = chunk_schedule(job.first, settings.chunk_size, settings.trials)
    alpha = (1 - settings.confidence) / len(base.pairs)
    positions: dict[int, _Position] = {}
    for pair in base.pairs:
        target = target_epsilon(base, pair)
        positions[pair.index or 0] = _Position(
            pair, BettingProcess(settings.delta, alpha, epsilon_grid([target] if target else [])), target)
    draws = job.draws_id
    store.register_audit(draws, base.title, {"design": "anytime", **dict(base.description)}, code_version())
    owner, computed, drawn = new_owner(), 0, 0
    try:
        with execution_backend(options) as n_jobs, tqdm(total=sum(sizes), desc="anytime", unit="trial",
                                                       file=sys.stderr, disable=not options.progress) as bar:
            for number, size in enumerate(sizes):
                open_positions = [i for i, p in positions.items() if not p.stopped]
                if not open_positions:
                    break
                done = store.finished_chunks(draws)
                tasks = [task(0, positions[i].pair, (i, side, _PART, number), size, settings.seed, None)
                         for i in open_positions for side in ("a", "b") if (i, side, _PART, number) not in done]
                computed += sum(execute(tasks, store, n_jobs, _Silent(), "anytime", {0: draws}, owner).values())
                drawn += size
                for i in open_positions:
                    chunk_a, chunk_b = (store.get_chunk(draws, (i, side, _PART, number)) for side in ("a", "b"))
                    _step(job, positions[i], number, chunk_a, chunk_b, settings.trials - drawn)
                bar.update(size)
                bounds = ", ".join(f"{p.process.lower_bound:.3g}" for p in positions.values())
                bar.set_postfix_str(f"epsilon >= {bounds}")
                if any(p.stopped == "violation" for p in positions.values()):
                    break
    finally:
        store.release(owner)
    claims = {}
    for i, position in positions.items():
        entries = claim_entries(base.mechanism, position.pair.index, settings.delta, position.pair)
        if base.claimed_epsilon is not None:
            entries.append(claimed_entry(base.claimed_epsilon, position.pair, settings.delta))
        claims[i] = entries
    chunks = 2 * len(positions) * sum(1 for total in np.cumsum(sizes) if total <= drawn)
    timings = {"seconds": time.perf_counter() - started, "chunk_seconds": store.chunk_seconds(draws),
               "chunks_computed": computed, "chunks_reused": max(chunks - computed, 0)}
    result = anytime_result(job, positions, claims, sizes=sizes, drawn=drawn, timings=timings,
                            store=str(options.store))
    store.put_result(job.audit_id, result.to_dict())
    return result


class _Silent:
    """A progress bar that shows nothing (the design's own bar counts trials, not chunks)."""

    n = 0
    total = 0

    def update(self, *args: Any) -> None:
        pass

    def set_postfix_str(self, *args: Any) -> None:
        pass
