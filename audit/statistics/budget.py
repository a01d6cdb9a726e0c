"""Size checks before any work: will an audit fit the machine?

From the mechanism, the number of canary positions and the settings, this
estimates (roughly, erring high) the memory of the main process and of the
workers, the store's growth on disk, the number of chunks and the time, and
refuses with a :class:`~dpaudit.core.errors.ParameterError` that names
the parameter responsible and the estimate, before a single array is made.

The memory budget defaults to half of the machine's physical memory
(``--max-memory`` changes it). Estimates are rough: they count the large
arrays (datasets of every canary pair, calibration scores kept for fitting,
chunks in flight, per-tile working arrays), not Python's own overhead.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
from pathlib import Path

from dpaudit.auditing.statistics.settings import AuditSettings
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.base import Mechanism

__all__ = ["Estimate", "MAX_CHUNKS", "MAX_SWEEP", "check_budget", "default_memory_budget", "estimate",
           "parse_size", "format_bytes"]

MAX_CHUNKS = 10**6  #: chunks per audit (each is a task and a store row)
MAX_SWEEP = 1000  #: audits one config may expand to
PROCESS_BYTES = 400 * 2**20  #: a process with torch, NumPy and SciPy imported
STEP_RATE = 2e8  #: trial-steps x dimensions per second and worker, about what pnsgd reaches on one core


@dataclasses.dataclass(frozen=True, slots=True)
class Estimate:
    """Rough resource needs of one audit."""

    memory: int
    worker_memory: int
    main_memory: int
    store_bytes: int
    chunks: int
    seconds: float
    largest: str  # the term that dominates memory: "chunk", "data" or "calibration"


def format_bytes(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(count) < 1024 or unit == "PiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} PiB"  # pragma: no cover


def _format_seconds(seconds: float) -> str:
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def parse_size(text: str) -> int:
    """``"4GiB"``, ``"512M"``, ``"2e9"`` -> bytes (binary units; ``G`` = ``GiB``)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([KMGTP]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ParameterError(f"max-memory must be a size such as 4GiB, 512MiB or 2e9, got {text!r}")
    value = float(match.group(1)) * 1024 ** " KMGTP".index(match.group(2).upper() or " ")
    if not 2**20 <= value < 2**60:
        raise ParameterError(f"max-memory must be between 1 MiB and 1 EiB, got {text!r}")
    return int(value)


def default_memory_budget() -> int:
    """Half of the machine's physical memory."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 4 * 2**30


def _steps(mechanism: Mechanism) -> int:
    return mechanism.iterations


def estimate(mechanism: Mechanism, positions: int, settings: AuditSettings, *, workers: int = 1,
             fitted: bool = False) -> Estimate:
    """Memory, disk, chunks and time of an audit with ``positions`` canary positions."""
    trials = settings.trials
    calibration = math.ceil(settings.calibration_fraction * trials)
    chunk = min(settings.chunk_size, trials)
    chunks = positions * 2 * (math.ceil(calibration / chunk) + math.ceil((trials - calibration) / chunk))
    chunk_bytes = mechanism.working_bytes(chunk)
    data_bytes = (mechanism.n_records or 1) * mechanism.record_dim * 8
    pairs = positions * 2 * data_bytes  # every canary pair's two datasets stay in the main process
    columns = mechanism.output_dim if fitted else 1
    calibration_bytes = positions * 2 * calibration * columns * 8 * 2
    in_flight = 2 * workers * chunk * columns * 8  # finished chunks waiting to be stored
    main = PROCESS_BYTES + pairs + calibration_bytes + in_flight + chunk_bytes * (workers == 1)
    worker = (PROCESS_BYTES + chunk_bytes + 2 * data_bytes) * (workers if workers > 1 else 0)
    terms = {"chunk": chunk_bytes * max(workers, 1), "data": pairs, "calibration": calibration_bytes}
    operations = float(trials) * 2 * positions * _steps(mechanism) * max(mechanism.canary_dim, 1)
    return Estimate(memory=main + worker, worker_memory=worker, main_memory=main,
                    store_bytes=positions * 2 * trials * 8, chunks=chunks,
                    seconds=operations / (STEP_RATE * max(workers, 1)), largest=max(terms, key=terms.get))


def _guessed_seconds(mechanism: Mechanism, positions: int, settings: AuditSettings, *, workers: int = 1) -> str:
    """The constant-rate guess of :func:`estimate`, said to be one: a refusal draws no trial, so nothing is timed
    (the progress bar's ETA of a run, timed on the chunks it draws, is the measure)."""
    guess = estimate(mechanism, positions, settings, workers=workers).seconds
    return (f"roughly {_format_seconds(guess)} on {workers} worker(s) by a constant rate of {STEP_RATE:.0e} "
            f"trial-steps x dimensions a second (a guess, not timed: no trial is drawn before a refusal)")


def check_budget(mechanism: Mechanism, positions: int, settings: AuditSettings, *, workers: int = 1,
                 max_memory: int | None = None, store: str | None = None, fitted: bool = False) -> Estimate:
    """The :func:`estimate`, or a ParameterError naming the parameter when the audit cannot fit.

    Parameters
    ----------
    max_memory : int, optional
        Bytes the audit may use (default :func:`default_memory_budget`).
    store : str, optional
        The store file; its disk must hold the scores.
    """
    budget = default_memory_budget() if max_memory is None else max_memory
    need = estimate(mechanism, positions, settings, workers=workers, fitted=fitted)
    if need.chunks > MAX_CHUNKS:
        took = _guessed_seconds(mechanism, positions, settings, workers=workers)
        where = f"[canary] index: {positions} positions x " if positions > 1 else ""
        raise ParameterError(f"{where}trials={settings.trials} in chunks of chunk_size={settings.chunk_size} "
                             f"makes {need.chunks} chunks (at most {MAX_CHUNKS}); {took}")
    if need.memory > budget:
        took = _guessed_seconds(mechanism, positions, settings, workers=workers)
        where = _culprit(mechanism, positions, settings, need.largest)
        raise ParameterError(f"{where}: the audit needs about {format_bytes(need.memory)} of memory, more than the "
                             f"budget of {format_bytes(budget)} (--max-memory); {took}")
    if store and store != ":memory:":
        directory = Path(store).resolve().parent
        if directory.is_dir():
            free = shutil.disk_usage(directory).free
            if need.store_bytes > free:
                raise ParameterError(f"trials={settings.trials}: the store needs about "
                                     f"{format_bytes(need.store_bytes)} on disk, {format_bytes(free)} are free")
    return need


def _culprit(mechanism: Mechanism, positions: int, settings: AuditSettings, largest: str) -> str:
    """The key to blame: the parameter behind the dominant memory term."""
    if largest == "data":
        if mechanism.record_dim > (mechanism.n_records or 1):  # wide records, not many of them
            size_name, size = mechanism.size_parameter
            return f"[mechanism] {size_name}={size}"
        if positions > 1:
            return f"[canary] index ({positions} positions of n={mechanism.n_records} records)"
        return f"[mechanism] n={mechanism.n_records}"
    if largest == "calibration":
        return f"[audit] trials={settings.trials}"
    size_name, size = mechanism.size_parameter
    if mechanism.output_dim >= 1000 or size >= 1000:
        return f"[mechanism] {size_name}={size}"
    if (mechanism.n_records or 1) >= 10**5:
        return f"[mechanism] n={mechanism.n_records}"
    return f"[audit] chunk_size={settings.chunk_size}"
