"""Run audits in seeded chunks on joblib (local) or Dask, storing every finished chunk.

Work is split into units ``(audit, canary index, side, part, chunk)``. Unit
seeds are ``SeedSequence(seed, spawn_key=(index, side, part, chunk))``, so
results depend on the root seed and the chunk size only, never on the
number of workers, the backend or the order in which chunks finish.

Phase 1 samples the calibration chunks (scores, or outputs when the score
is fitted); phase 2 fits the scores; phase 3 samples and scores the
certification chunks; phase 4 certifies and judges. A unit already in the
store is never recomputed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import socket
import sys
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
from joblib import Parallel, delayed

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.scores import ScoreFunction, fit_score, is_fitted
from dpaudit.audit.assemble import assemble
from dpaudit.audit.budget import check_budget
from dpaudit.audit.fingerprint import code_version
from dpaudit.audit.job import AuditJob
from dpaudit.audit.result import AuditResult
from dpaudit.audit.store import ChunkKey, Store, new_owner
from dpaudit.mechanisms.errors import DPAuditError, NotExact, ParameterError

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["RunOptions", "calibration_trials", "check_scheduler", "chunk_sizes", "run_audits", "unit_seed"]
_SIDES = {"a": 0, "b": 1}
_CLUSTER_LOGGERS = ("distributed", "tornado", "bokeh", "asyncio")
_PARTS = {"cal": 0, "cert": 1}


def unit_seed(root: int, index: int, side: str, part: str, chunk: int) -> np.random.SeedSequence:
    """The seed of one chunk: independent of workers, backend and order of completion."""
    return np.random.SeedSequence(root, spawn_key=(index, _SIDES[side], _PARTS[part], chunk))


def chunk_sizes(total: int, size: int) -> list[int]:
    """``total`` trials in chunks of at most ``size``."""
    return [min(size, total - k * size) for k in range(math.ceil(total / size))]


def calibration_trials(trials: int, fraction: float) -> int:
    """Trials per dataset set aside for calibration (scores are fitted and thresholds chosen on them)."""
    if not 0 < fraction < 1:
        raise ParameterError(f"calibration_fraction must be in (0, 1), got calibration_fraction={fraction}")
    count = int(math.ceil(fraction * trials))
    if count < 1 or count >= trials:
        raise ParameterError(f"trials={trials} is too few to set aside a calibration part")
    return count


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


@dataclasses.dataclass
class _Plan:
    job: AuditJob
    audit_id: str
    pairs: dict[int, CanaryPair]
    n_cal: int
    n_cert: int
    scorers: dict[int, ScoreFunction] = dataclasses.field(default_factory=dict)


def _run_unit(number: int, pair: CanaryPair, key: ChunkKey, trials: int, root: int,
              scorer: ScoreFunction | None, single_thread: bool) -> tuple[int, ChunkKey, np.ndarray, float]:
    """Sample one chunk (and score it when a scorer is given); runs in a worker."""
    import torch

    if single_thread:
        from dpaudit.mechanisms import tiles

        torch.set_num_threads(1)
        tiles.set_threads(1)
    start = time.perf_counter()
    dataset = pair.dataset_a if key[1] == "a" else pair.dataset_b
    outputs = pair.mechanism.sample(dataset, trials=trials, seed=unit_seed(root, *key))
    values = outputs if scorer is None else scorer(outputs)
    return number, key, values, time.perf_counter() - start


def _fitted(plan: _Plan) -> bool:
    return is_fitted(plan.job.score)


@contextlib.contextmanager
def _backend(options: RunOptions) -> Iterator[int]:
    """Yield ``n_jobs`` inside the right joblib backend."""
    workers = options.workers
    if workers is not None and workers < 1:
        raise ParameterError(f"workers must be >= 1, got workers={workers}")
    if options.backend == "local":
        yield workers or -1
        return
    if options.backend != "dask":
        raise ParameterError(f"backend must be 'local' or 'dask', got backend={options.backend!r}")
    if not options.scheduler:
        raise ParameterError("backend 'dask' needs --scheduler ADDRESS (e.g. tcp://127.0.0.1:8786)")
    address = check_scheduler(options.scheduler)
    try:
        from dask.distributed import Client
    except ImportError:
        raise DPAuditError("backend 'dask' needs the distributed extra: pip install 'dpaudit[distributed]'") from None
    import joblib

    if not options.verbose:  # distributed sets levels of its own loggers at import: quiet each one
        names = [name for name in logging.root.manager.loggerDict if name.split(".")[0] in _CLUSTER_LOGGERS]
        for name in {*names, *_CLUSTER_LOGGERS}:
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        client = Client(address, timeout=10)
    except (OSError, TimeoutError) as exc:
        raise DPAuditError(f"cannot reach the Dask scheduler at {address} ({type(exc).__name__})") from None
    try:
        with joblib.parallel_config(backend="dask"):
            yield workers or -1
    except DPAuditError:
        raise
    except Exception as exc:  # noqa: BLE001 - a cluster failure mid-run, in one line
        raise DPAuditError(f"the Dask cluster at {address} failed during the run ({type(exc).__name__}); finished "
                           f"chunks are stored: run again to resume") from None
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=5)


def check_scheduler(address: str, timeout: float = 3.0) -> str:
    """``tcp://host:port`` of a reachable scheduler, or a one-line error (checked before Dask starts)."""
    try:
        parsed = urllib.parse.urlsplit(address if "://" in address else f"tcp://{address}")
    except ValueError:
        raise ParameterError(f"scheduler must be an address such as tcp://127.0.0.1:8786, got {address!r}") from None
    if parsed.scheme == "tls":
        raise ParameterError(f"scheduler {address!r}: tls:// needs certificates dpaudit does not take; use a "
                             "tcp:// address (e.g. through an SSH tunnel)")
    if parsed.scheme not in ("tcp", "inproc", "ucx", "ws", "wss") or not parsed.hostname:
        raise ParameterError(f"scheduler must be an address such as tcp://127.0.0.1:8786, got {address!r}")
    try:
        port = parsed.port or 8786
    except ValueError:
        raise ParameterError(f"scheduler {address!r} has an invalid port") from None
    if parsed.scheme == "tcp":
        try:
            socket.create_connection((parsed.hostname, port), timeout=timeout).close()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise DPAuditError(f"cannot reach the Dask scheduler at {parsed.hostname}:{port} ({reason})") from None
    return f"{parsed.scheme}://{parsed.hostname}:{port}"


def _execute(tasks: list[tuple], store: Store, n_jobs: int, bar: "tqdm", label: str,
             audit_of: dict[int, str], owner: str) -> Counter:
    """Run tasks ``(plan_number, pair, key, trials, root, scorer)``; store each chunk as it finishes.

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
        waiting: list[tuple] = []

        def calls(batch=pending, waiting=waiting):
            for number, pair, key, trials, root, scorer in batch:
                if store.claim(audit_of[number], key, owner):
                    yield delayed(_run_unit)(number, pair, key, trials, root, scorer, single_thread)
                else:
                    waiting.append((number, pair, key, trials, root, scorer))

        for number, key, values, seconds in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(calls()):
            store.put_chunk(audit_of[number], key, values, seconds)
            store.renew(owner)
            computed[audit_of[number]] += 1
            bar.update(1)
        finished = {audit: store.finished_chunks(audit) for audit in {audit_of[t[0]] for t in waiting}}
        pending = [task for task in waiting if task[2] not in finished[audit_of[task[0]]]]
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
    workers = 1 if options.backend == "dask" else (options.workers or os.cpu_count() or 1)
    for job in jobs:
        check_budget(job.mechanism, len(job.pairs), job.settings, workers=workers, max_memory=options.max_memory,
                     store=options.store, fitted=is_fitted(job.score))
    with Store(options.store) as store:
        plans = []
        for job in jobs:
            n_cal = calibration_trials(job.settings.trials, job.settings.calibration_fraction)
            audit_id = job.audit_id
            plan = _Plan(job, audit_id, {pair.index or 0: pair for pair in job.pairs}, n_cal,
                         job.settings.trials - n_cal)
            store.register_audit(audit_id, job.title, dict(job.description), code_version())
            plans.append(plan)
        audit_of = {number: plan.audit_id for number, plan in enumerate(plans)}
        reused = {plan.audit_id: store.finished_chunks(plan.audit_id) for plan in plans}
        owner = new_owner()
        from tqdm import tqdm

        total = sum(_pending(plan, part, reused[plan.audit_id]) for plan in plans for part in ("cal", "cert"))
        try:
            with _backend(options) as n_jobs, tqdm(total=total, desc="sampling", unit="chunk", file=sys.stderr,
                                                   disable=not options.progress, smoothing=0.1) as bar:
                computed = _execute(_tasks(plans, "cal", reused), store, n_jobs, bar, "calibration", audit_of, owner)
                for plan in plans:
                    _fit_scores(plan, store)
                computed += _execute(_tasks(plans, "cert", reused), store, n_jobs, bar, "certification", audit_of,
                                     owner)
        finally:
            store.release(owner)
        results = []
        for plan in plans:
            total = len(store.finished_chunks(plan.audit_id))
            result = assemble(plan.job, _scores_of(plan, store),
                              timings={"seconds": time.perf_counter() - started,
                                       "chunk_seconds": store.chunk_seconds(plan.audit_id),
                                       "chunks_computed": computed[plan.audit_id],
                                       "chunks_reused": total - computed[plan.audit_id]},
                              store=str(options.store))
            store.put_result(plan.audit_id, result.to_dict())
            results.append(result)
    return results


def _pending(plan: _Plan, part: str, reused: set) -> int:
    """Chunks of ``part`` not yet in the store (the progress bar's total, known before any scorer is fitted)."""
    total = plan.n_cal if part == "cal" else plan.n_cert
    sizes = chunk_sizes(total, plan.job.settings.chunk_size)
    return sum((index, side, part, chunk) not in reused
               for index in plan.pairs for side in ("a", "b") for chunk in range(len(sizes)))


def _tasks(plans: list[_Plan], part: str, reused: dict[str, set]) -> list[tuple]:
    tasks = []
    for number, plan in enumerate(plans):
        total = plan.n_cal if part == "cal" else plan.n_cert
        for index, pair in plan.pairs.items():
            scorer = None
            if part == "cert":
                scorer = plan.scorers[index]
            elif not _fitted(plan):
                scorer = fit_score(plan.job.score, pair)
            for side in ("a", "b"):
                for chunk, trials in enumerate(chunk_sizes(total, plan.job.settings.chunk_size)):
                    key = (index, side, part, chunk)
                    if key not in reused[plan.audit_id]:
                        tasks.append((number, pair, key, trials, plan.job.settings.seed, scorer))
    return tasks


def _fit_scores(plan: _Plan, store: Store) -> None:
    for index, pair in plan.pairs.items():
        if _fitted(plan):
            cal_a = store.get_chunks(plan.audit_id, index, "a", "cal")
            cal_b = store.get_chunks(plan.audit_id, index, "b", "cal")
            plan.scorers[index] = fit_score(plan.job.score, pair, cal_a, cal_b, seed=plan.job.settings.seed)
        else:
            plan.scorers[index] = fit_score(plan.job.score, pair)


class _StoreSource:
    """The scores of one canary position, read from the store (``audit.streaming.ScoreSource``)."""

    def __init__(self, plan: _Plan, store: Store, index: int) -> None:
        self.plan, self.store, self.index = plan, store, index

    def calibration(self) -> tuple[np.ndarray, np.ndarray]:
        cal_a = self.store.get_chunks(self.plan.audit_id, self.index, "a", "cal")
        cal_b = self.store.get_chunks(self.plan.audit_id, self.index, "b", "cal")
        if _fitted(self.plan):
            return self.plan.scorers[self.index](cal_a), self.plan.scorers[self.index](cal_b)
        reference = getattr(self.plan.scorers[self.index], "reference", None)
        if reference is not None:  # a score with a known law: thresholds chosen on scores drawn from it
            try:
                return reference(self.plan.n_cert, self.plan.job.settings.seed)
            except NotExact:
                pass
        return cal_a, cal_b

    def chunks(self, side: str) -> Iterator[np.ndarray]:
        return self.store.iter_chunks(self.plan.audit_id, self.index, side, "cert")


def _scores_of(plan: _Plan, store: Store) -> dict[int, _StoreSource]:
    return {index: _StoreSource(plan, store, index) for index in plan.pairs}
