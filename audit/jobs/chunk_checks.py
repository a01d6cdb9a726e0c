"""Checks on an audit's chunks and jobs that refuse, before certification, work that could not be judged.

:func:`check_chunk` refuses a chunk holding NaN outputs or scores that are not finite, naming the trial and the
seed that draws it again (``audit.jobs.runner`` calls it in the worker that samples). :func:`check_judgeable_at_zero`
refuses a config's audit at ``delta = 0`` that no claim could judge (``dpaudit run`` and ``check``).
"""

from __future__ import annotations

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.auditing.jobs.assemble import claim_entries
from dpaudit.auditing.jobs.job import AuditJob
from dpaudit.auditing.jobs.store import ChunkKey
from dpaudit.auditing.statistics.verdict import compare
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.entry import NEEDS_POSITIVE_DELTA

__all__ = ["check_chunk", "check_judgeable_at_zero"]


def check_chunk(pair: CanaryPair, key: ChunkKey, trials: int, root: int, outputs: np.ndarray,
                scores: np.ndarray | None, spawn_key: tuple[int, ...]) -> None:
    """Refuse a chunk whose outputs hold NaN, or whose scores are not finite, naming the mechanism, the trial's
    position in the chunk and the chunk's seed (what certification would refuse after every trial was drawn).

    Infinite outputs pass where the score maps them to finite values (``float-bits`` reads their bits);
    a NaN is no release of any mechanism. ``spawn_key`` is the chunk's seed key (``audit.jobs.runner.unit_seed``),
    shown so the trial can be drawn again.

    Raises
    ------
    ParameterError
        At the first chunk that holds one.
    """
    rows = np.asarray(outputs).reshape(trials, -1)
    # the maximum is NaN exactly when a value is: one pass, no array of flags the size of a model's outputs
    nan = rows.dtype.kind == "f" and bool(np.isnan(rows.max()))
    bad = None if scores is None else ~np.isfinite(np.asarray(scores, dtype=np.float64).reshape(trials, -1)).all(1)
    if not nan and (bad is None or not bad.any()):
        return
    mechanism = pair.mechanism
    index, side, part, chunk = key
    if nan:
        row = int(np.flatnonzero(np.isnan(rows).any(axis=1))[0])
        what = "released NaN"
    else:
        row = int(np.flatnonzero(bad)[0])
        released = "inf" if np.isinf(rows[row]).any() else "finite outputs"
        what = f"released {released} that score {np.asarray(scores).reshape(trials, -1)[row][0]} (certification " \
               f"needs finite scores)"
    kind = {"cal": "calibration", "cert": "certification", "any": "anytime",
            "round": "rounded-release"}.get(part, part)
    where = f"trial {row + 1} of {trials} of the {kind} chunk {chunk} of dataset {side}"
    if mechanism.seeded:
        again = (f"draw it again with mechanism.sample(dataset_{side}, trials={trials}, "
                 f"seed=numpy.random.SeedSequence({root}, spawn_key={spawn_key}))[{row}]")
    else:
        again = "its randomness is not seeded: a rerun draws other trials"
    raise ParameterError(f"mechanism {mechanism.label!r} {what} in {where} ({again}); refused before any "
                         f"certification")


def check_judgeable_at_zero(job: AuditJob | object, source: str) -> None:
    """Refuse, before any trial, a many-runs audit at ``delta = 0`` that no claim could judge: every claim of the
    mechanism for the canary's relation needs delta > 0 (``NEEDS_POSITIVE_DELTA``) and none is given with the
    audit. Such an audit would end inconclusive after all its trials (``dpaudit run`` and ``check`` only).

    Parameters
    ----------
    job : AuditJob
        The audit a config builds (another design's job is left alone).
    source : str
        The config file, named in the message.

    Raises
    ------
    ParameterError
        One line naming ``[audit] delta`` and the claims that need delta > 0.
    """
    if not isinstance(job, AuditJob) or getattr(job, "design", "many-runs") != "many-runs" \
            or job.settings.delta != 0 or job.claimed_epsilon is not None:
        return
    for pair in job.pairs:
        claims = claim_entries(job.mechanism, pair.index, 0.0, pair)
        if compare(0.0, claims, pair.relation).tightest is not None:
            continue
        at_zero = list(dict.fromkeys(c.name for c in claims
                                     if c.reason == NEEDS_POSITIVE_DELTA and str(c.relation) == str(pair.relation)))
        if at_zero:
            raise ParameterError(
                f"{source}: [audit] delta = 0: every claim of {job.mechanism.label} for the {pair.relation} relation "
                f"needs delta > 0 ({', '.join(at_zero)}), so none could judge the audit; set delta > 0 (e.g. 1e-5)")
