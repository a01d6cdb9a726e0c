"""Run audits in seeded chunks on joblib (local) or Dask, storing every finished chunk.

Work is split into units ``(audit, canary index, side, part, chunk)``. Unit
seeds are ``SeedSequence(seed, spawn_key=(index, side, part, chunk))``, so
results depend on the root seed and the chunk size only, never on the
number of workers, the backend or the order in which chunks finish.

Phase 1 samples the calibration chunks (scores, or outputs when the score
is fitted); phase 2 fits the scores, and where a fitted score asks for a
larger calibration share (``calibration_share``: the ``discrete`` score,
which fits many small effects) draws the extra calibration chunks out of the
certification part and fits again; phase 3 samples and scores the
certification chunks; phase 4 certifies and judges. A unit already in the
store is never recomputed.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from joblib import Parallel, delayed

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.score_protocol import score_arithmetic
from dpaudit.attacks.scores import ScoreFunction
from dpaudit.auditing.jobs.anytime import run_anytime
from dpaudit.auditing.jobs.assemble import assemble
from dpaudit.auditing.jobs.backend import check_scheduler, execution_backend
from dpaudit.auditing.jobs.chunk_checks import check_chunk, check_judgeable_at_zero
from dpaudit.auditing.jobs.fingerprint import code_version
from dpaudit.auditing.jobs.float_rounding import attribute_float_rounding
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.one_run_result import run_one_run
from dpaudit.auditing.jobs.parts import calibration_chunks, calibration_trials, chunk_sizes, requested_calibration
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.store import ChunkKey, Store, new_owner
from dpaudit.auditing.jobs.store_source import store_sources
from dpaudit.auditing.statistics.budget import check_budget
from dpaudit.auditing.statistics.portfolio import Candidate, choose_score
from dpaudit.auditing.statistics.sequential import Looks, plan_looks
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms import tiles
from dpaudit.mechanisms.models.progress import training_progress

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["RunOptions", "calibration_trials", "check_scheduler", "chunk_sizes", "run_audits", "run_configs",
           "unit_seed"]
_SIDES = {"a": 0, "b": 1}
# "any": the anytime design's chunks (audit.jobs.anytime); "round": the fresh trials of a float-bits violation's
# rounded audit (audit.jobs.float_rounding)
_PARTS = {"cal": 0, "cert": 1, "any": 2, "round": 3}


def unit_seed(root: int, index: int, side: str, part: str, chunk: int) -> np.random.SeedSequence:
    """The seed of one chunk: independent of workers, backend and order of completion."""
    return np.random.SeedSequence(root, spawn_key=(index, _SIDES[side], _PARTS[part], chunk))


@dataclasses.dataclass(frozen=True, slots=True)
class RunOptions:
    """How to execute: workers, backend, store and progress.

    ``store=":memory:"`` keeps chunks in memory (in-process audits such as
    ``dpaudit.audit`` and ``assert_private``; nothing survives the call).
    """

    store: str = "dpaudit.sqlite"
    workers: int | None = None
    backend: str = "local"
    scheduler: str | None = None
    progress: bool = True
    max_memory: int | None = None
    verbose: bool = False

    @property
    def worker_count(self) -> int:
        """Workers sizing the memory budget: one per Dask run (the cluster sizes itself), else the local pool."""
        return 1 if self.backend == "dask" else (self.workers or os.cpu_count() or 1)

    def check(self) -> None:
        """Refuse bad options before any work: workers, backend, and a Dask scheduler that cannot be reached."""
        if self.workers is not None and self.workers < 1:
            raise ParameterError(f"workers must be >= 1, got workers={self.workers}")
        if self.backend not in ("local", "dask"):
            raise ParameterError(f"backend must be 'local' or 'dask', got backend={self.backend!r}")
        if self.backend == "dask":
            if not self.scheduler:
                raise ParameterError("--backend dask needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
            check_scheduler(self.scheduler)


@dataclasses.dataclass
class _Plan:
    job: AuditJob
    audit_id: str  # the result's id; chunks are stored under ``draws_id`` (shared by ``run`` and ``check``)
    draws_id: str
    pairs: dict[int, CanaryPair]
    n_cal: int
    n_cert: int
    n_cal_first: int = 0  # the calibration part sampled before any score is fitted (``n_cal`` until widened)
    scorers: dict[int, ScoreFunction] = dataclasses.field(default_factory=dict)
    looks: Looks = dataclasses.field(default=None)  # type: ignore[assignment]
    chosen: dict[int, str] = dataclasses.field(default_factory=dict)
    candidates: dict[int, tuple[Candidate, ...]] = dataclasses.field(default_factory=dict)


class _Task(NamedTuple):
    """One chunk to compute: which audit (its number in the run), pair, chunk key, size, root seed, scorer."""

    number: int
    pair: CanaryPair
    key: ChunkKey
    trials: int
    root: int
    scorer: ScoreFunction | None


def _run_unit(number: int, pair: CanaryPair, key: ChunkKey, trials: int, root: int,
              scorer: ScoreFunction | None, single_thread: bool) -> tuple[int, ChunkKey, np.ndarray, float]:
    """Sample one chunk (and score it when a scorer is given); runs in a worker."""
    # torch loads in the worker that samples, not where the runner is imported
    import torch

    if single_thread:
        torch.set_num_threads(1)
        tiles.set_threads(1)
    start = time.perf_counter()
    dataset = pair.dataset_a if key[1] == "a" else pair.dataset_b
    outputs = pair.mechanism.sample(dataset, trials=trials, seed=unit_seed(root, *key))
    with score_arithmetic():  # inf or NaN scores are refused by check_chunk, with the trial's seed
        values = outputs if scorer is None else scorer(outputs)
    check_chunk(pair, key, trials, root, outputs, None if scorer is None else values,
                (key[0], _SIDES[key[1]], _PARTS[key[2]], key[3]))
    return number, key, values, time.perf_counter() - start


def _fitted(plan: _Plan) -> bool:
    return plan.job.fitted


def _execute(tasks: list[_Task], store: Store, n_jobs: int, bar: "tqdm", label: str,
             audit_of: dict[int, str], owner: str) -> Counter:
    """Run tasks; store each chunk as it finishes.

    A task runs only once this run holds its lease (``Store.claim``); chunks
    another live run is computing are waited for, and taken over if their
    lease lapses. Returns the number of chunks this run computed per audit.
    """
    computed: Counter = Counter()
    if not tasks:
        return computed
    single_thread = n_jobs != 1
    pending = list(tasks)
    bar.set_postfix_str(label)
    while pending:
        waiting: list[_Task] = []

        def calls(batch=pending, waiting=waiting):
            for task in batch:
                if store.claim(audit_of[task.number], task.key, owner):
                    yield delayed(_run_unit)(*task, single_thread)
                else:
                    waiting.append(task)

        for number, key, values, seconds in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(calls()):
            store.put_chunk(audit_of[number], key, values, seconds)
            store.renew(owner)
            computed[audit_of[number]] += 1
            bar.update(1)
        finished = {audit: store.finished_chunks(audit) for audit in {audit_of[t.number] for t in waiting}}
        pending = [task for task in waiting if task.key not in finished[audit_of[task.number]]]
        bar.update(len(waiting) - len(pending))  # computed by another run meanwhile
        if pending:
            bar.set_postfix_str(f"{label}: waiting for {len(pending)} chunks another run is computing")
            time.sleep(0.5)
    return computed


def run_audits(jobs: list[AuditJob], options: RunOptions) -> list[AuditResult]:
    """Run every job (sharing the worker pool and the store); return one result each.

    A chunk already in the store (same audit id, so the same config, datasets
    and code) is reused, never recomputed.
    """
    started = time.perf_counter()
    options.check()
    if any(getattr(job, "design", "many-runs") in _OWN_RUNNERS for job in jobs):
        return _with_designs(jobs, options)
    for job in jobs:
        check_budget(job.mechanism, len(job.pairs), job.settings, workers=options.worker_count,
                     max_memory=options.max_memory, store=options.store, fitted=job.fitted)
    with Store(options.store) as store:
        plans = []
        for job in jobs:
            n_cal = calibration_trials(job.settings.trials, job.settings.calibration_fraction)
            n_chunks = len(chunk_sizes(job.settings.trials - n_cal, job.settings.chunk_size))
            looks = plan_looks(n_chunks, job.settings.confidence) if job.sequential \
                else Looks((n_chunks,), job.settings.confidence)
            plan = _Plan(job, job.audit_id, job.draws_id, {pair.index or 0: pair for pair in job.pairs}, n_cal,
                         job.settings.trials - n_cal, looks=looks)
            store.register_audit(plan.draws_id, job.title, dict(job.description), code_version())
            plans.append(plan)
        audit_of = {number: plan.draws_id for number, plan in enumerate(plans)}  # the chunks' key
        reused = {plan.draws_id: store.finished_chunks(plan.draws_id) for plan in plans}
        owner = new_owner()
        # tqdm loads for a run that shows progress
        from tqdm import tqdm

        total = sum(_pending(plan, part, reused[plan.draws_id]) for plan in plans for part in ("cal", "cert"))
        try:
            with execution_backend(options) as n_jobs, tqdm(total=total, desc="sampling", unit="chunk", file=sys.stderr,
                                                   disable=not options.progress, smoothing=0.1) as bar, \
                    training_progress(options.progress):  # models' training bars follow the audit's
                computed = _execute(_tasks(plans, "cal", reused), store, n_jobs, bar, "calibration", audit_of, owner)
                for plan in plans:
                    _fit_scores(plan, store)
                widened = [plan for plan in plans if _widen(plan)]
                if widened:  # a fitted score asked for a larger calibration part: drawn, then every score refitted
                    done = {plan.draws_id: store.finished_chunks(plan.draws_id) for plan in plans}
                    bar.total = bar.n + sum(_pending(plan, part, done[plan.draws_id]) for plan in plans
                                            for part in ("cal", "cert"))
                    computed += _execute(_tasks(widened, "cal", done, numbers=[plans.index(p) for p in widened]),
                                         store, n_jobs, bar, "calibration", audit_of, owner)
                    for plan in widened:
                        _fit_scores(plan, store)
                results: dict[int, AuditResult] = {}
                stage = 0
                while len(results) < len(plans):  # one stage per planned look (one for audits that do not look)
                    limits = {n: plan.looks.chunks[min(stage, plan.looks.count - 1)]
                              for n, plan in enumerate(plans) if n not in results}
                    done = {plan.draws_id: store.finished_chunks(plan.draws_id) for plan in plans}
                    bar.total = bar.n + sum(_pending(plan, part, done[plan.draws_id]) for plan in plans
                                            for part in ("cal", "cert"))
                    computed += _execute(_tasks(plans, "cert", done, limits), store, n_jobs, bar, "certification",
                                         audit_of, owner)
                    for number in limits:
                        plan, look = plans[number], min(stage, plans[number].looks.count - 1)
                        result = _result(plan, store, look, computed, started, options)
                        if look == plan.looks.count - 1 or plan.job.violated(result):
                            results[number] = result
                    stage += 1
                for number, plan in enumerate(plans):  # a float-bits violation: does it survive rounding?
                    results[number] = attribute_float_rounding(
                        plan, store, results[number],
                        lambda index, side, chunk, root=plan.job.settings.seed: unit_seed(root, index, side, "round",
                                                                                          chunk))
        finally:
            store.release(owner)
        for plan, result in zip(plans, (results[n] for n in range(len(plans)))):
            store.put_result(plan.audit_id, result.to_dict())
    return [results[n] for n in range(len(plans))]


#: Designs with a runner of their own: one-run audits (``audit.jobs.one_run_design``) and anytime-valid ones
#: (``audit.jobs.anytime``)
_OWN_RUNNERS = ("one-run", "anytime")


def _with_designs(jobs: list, options: RunOptions) -> list[AuditResult]:
    """Run the audits of :data:`_OWN_RUNNERS` one after the other, the others together; results in order."""
    many = [job for job in jobs if getattr(job, "design", "many-runs") not in _OWN_RUNNERS]
    done = iter(run_audits(many, options) if many else [])
    results = []
    with Store(options.store) as store:
        for job in jobs:
            design = getattr(job, "design", "many-runs")
            if design == "one-run":
                results.append(run_one_run(job, store, store_path=str(options.store)))
            elif design == "anytime":
                results.append(run_anytime(job, store, options, _execute, _Task))
            else:
                results.append(next(done))
    return results


def _result(plan: _Plan, store: Store, look: int, computed: Counter, started: float,
            options: RunOptions) -> AuditResult:
    """Certify ``plan`` on its certification chunks up to ``look`` (every chunk for an audit that does not look)."""
    limit = plan.looks.chunks[look]
    used = plan.n_cal + sum(chunk_sizes(plan.n_cert, plan.job.settings.chunk_size)[:limit])
    total = len(store.finished_chunks(plan.draws_id))
    return assemble(plan.job, store_sources(plan, store, limit), chosen=plan.chosen, candidates=plan.candidates,
                    timings={"seconds": time.perf_counter() - started,
                             "chunk_seconds": store.chunk_seconds(plan.draws_id),
                             "chunks_computed": computed[plan.draws_id],
                             "chunks_reused": total - computed[plan.draws_id]},
                    store=str(options.store), confidence=plan.looks.confidence_at(look), trials=used,
                    sequential={**plan.looks.record(look, used), "same_trials_as": plan.draws_id}
                    if plan.job.sequential else None,
                    calibration=plan.n_cal)


def run_configs(configs: list, options: RunOptions, *, sequential: bool = False) -> list[AuditResult]:
    """Run audits from configs (``audit.jobs.config.AuditConfig``): options and every budget are checked before
    any dataset is built, then :func:`run_audits` runs the jobs. ``dpaudit run`` and ``check`` call this
    (``check`` with ``sequential``: stop at the first certified violation)."""
    options.check()
    for config in configs:
        config.check_budget(workers=options.worker_count, max_memory=options.max_memory, store=options.store)
    jobs = [config.job(sequential=sequential) for config in configs]
    for config, job in zip(configs, jobs):
        check_judgeable_at_zero(job, config.source)
    return run_audits(jobs, options)


def _part_sizes(plan: _Plan, part: str) -> list[int]:
    """The trials of each chunk of ``part`` (``audit.jobs.parts``)."""
    if part == "cert":
        return chunk_sizes(plan.n_cert, plan.job.settings.chunk_size)
    return calibration_chunks(plan.n_cal_first or plan.n_cal, plan.n_cal, plan.job.calibration_chunk_size)


def _widen(plan: _Plan) -> bool:
    """Raise ``plan``'s calibration part to the largest share its fitted scores ask for
    (``attacks.score_protocol.fitted_calibration_share``), taken from the certification part; True when it grew.

    Decided on the first calibration part alone, before any certification trial is drawn, so the
    certification trials stay fresh (docs/theory.md 7)."""
    if not _fitted(plan) or plan.n_cal_first:
        return False
    wanted = requested_calibration(plan.job.settings.trials, plan.n_cal, plan.scorers.values())
    if wanted == plan.n_cal:
        return False
    plan.n_cal_first, plan.n_cal = plan.n_cal, wanted
    plan.n_cert = plan.job.settings.trials - wanted
    n_chunks = len(chunk_sizes(plan.n_cert, plan.job.settings.chunk_size))
    plan.looks = plan_looks(n_chunks, plan.job.settings.confidence) if plan.job.sequential \
        else Looks((n_chunks,), plan.job.settings.confidence)
    return True


def _pending(plan: _Plan, part: str, reused: set) -> int:
    """Chunks of ``part`` not yet in the store (the progress bar's total, known before any scorer is fitted)."""
    sizes = _part_sizes(plan, part)
    return sum((index, side, part, chunk) not in reused
               for index in plan.pairs for side in ("a", "b") for chunk in range(len(sizes)))


def _tasks(plans: list[_Plan], part: str, reused: dict[str, set],
           limits: dict[int, int] | None = None, numbers: list[int] | None = None) -> list[_Task]:
    """The chunks of ``part`` not in ``reused``; with ``limits``, only those audits and chunks below each limit;
    ``numbers`` are the plans' numbers in the run (default their positions in ``plans``)."""
    tasks = []
    for number, plan in zip(numbers or range(len(plans)), plans):
        if limits is not None and number not in limits:
            continue
        for index, pair in plan.pairs.items():
            scorer = None
            if part == "cert":
                scorer = plan.scorers[index]
            elif not _fitted(plan):
                with score_arithmetic():
                    scorer = plan.job.scores[0].fit(pair, None, None, plan.job.settings.seed)
            for side in ("a", "b"):
                for chunk, trials in enumerate(_part_sizes(plan, part)):
                    key = (index, side, part, chunk)
                    if limits is not None and chunk >= limits[number]:
                        break
                    if key not in reused[plan.draws_id]:
                        tasks.append(_Task(number, pair, key, trials, plan.job.settings.seed, scorer))
    return tasks


def _fit_scores(plan: _Plan, store: Store) -> None:
    """Fit the score of every position on its calibration outputs (choosing one of a portfolio there)."""
    settings = plan.job.settings
    for index, pair in plan.pairs.items():
        if _fitted(plan):
            cal_a = store.get_chunks(plan.draws_id, index, "a", "cal")
            cal_b = store.get_chunks(plan.draws_id, index, "b", "cal")
            score, plan.scorers[index], plan.candidates[index] = choose_score(
                plan.job.scores, pair, cal_a, cal_b, seed=settings.seed, delta=settings.delta,
                confidence=settings.confidence, planned=plan.n_cert)
            plan.chosen[index] = score.name
        else:
            with score_arithmetic():
                plan.scorers[index] = plan.job.scores[0].fit(pair, None, None, settings.seed)
            plan.chosen[index] = plan.job.scores[0].name
