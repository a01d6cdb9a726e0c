"""Gallery section "real libraries": mechanisms of DP libraries audited at their own claims.

Each installed library contributes audits of one mechanism, through its
adapter (:mod:`dpaudit.mechanisms.adapters`), on its default pair (one record
at each end of the record domain): diffprivlib's Laplace, OpenDP's vector
Laplace, python-dp's BoundedSum, and an Opacus ``make_private`` training on
12 records against 11 (add/remove, what its accountant bounds: the noise's
scale moves with the number of records, opacus issues 571 and 819). Libraries that release raw floats are audited twice, by a
score that reads the outputs as numbers (``gaussian``) and by the
floating-point distinguisher (``float-bits``); each audit certifies on its
own at its confidence (two audits, two certificates: they are not combined).
Libraries that are not installed are left out, with a line that says so.

The jobs run in the gallery's worker processes: what a worker is sent must
pickle, so OpenDP's measurement (C pointers) travels as the call that builds
it (:func:`dpaudit.mechanisms.adapters.from_recipe` of :func:`opendp_laplace`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.auditing.checks.api import make_job
from dpaudit.auditing.jobs.job import AuditJob

__all__ = ["HEADING", "TEXT", "LibraryAudit", "library_audits", "library_jobs", "opendp_laplace"]

HEADING = "(g) Real libraries, audited at their own claims"
TEXT = ("Mechanisms of public DP libraries through dpaudit's adapters, each judged against the claim read from "
        "the library object (epsilon, delta and sensitivity; OpenDP's privacy map; Opacus's accountant). The "
        "attack that certified is named in each title.")
#: Opacus trains one model per trial: its audits use this fraction of the section's trials.
OPACUS_SHARE = 20


@dataclasses.dataclass(frozen=True)
class LibraryAudit:
    """One audit of the section: a library, the mechanism built from it, and the score."""

    library: str
    build: Callable[[], Any]
    score: str
    trials_divisor: int = 1


def _diffprivlib():
    # an optional library (dpaudit[libraries]) and its adapter, loaded for its own audit
    from diffprivlib.mechanisms import Laplace

    from dpaudit.mechanisms.adapters import from_diffprivlib

    return from_diffprivlib(Laplace(epsilon=1.0, sensitivity=1.0))


def opendp_laplace(scale: float):
    """OpenDP's vector Laplace at ``scale`` on a query of sensitivity 1 (built again in each worker process)."""
    # an optional library (dpaudit[libraries]) and its adapter, loaded for its own audit
    import opendp.prelude as dp

    from dpaudit.mechanisms.adapters import from_opendp

    dp.enable_features("contrib")
    return from_opendp((dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))
                       >> dp.m.then_laplace(scale=scale), 1.0)


def _opendp():
    # the adapters load with the section's audits
    from dpaudit.mechanisms.adapters import from_recipe

    # an OpenDP measurement holds C pointers and does not pickle: the workers get this call and build their own
    return from_recipe(opendp_laplace, 1.0)


def _pydp():
    # an optional library (dpaudit[libraries]) and its adapter, loaded for its own audit
    from pydp.algorithms.laplacian import BoundedSum

    from dpaudit.mechanisms.adapters import from_pydp

    return from_pydp(BoundedSum, epsilon=1.0, lower_bound=0, upper_bound=1, dtype="float")


def _opacus():
    import opacus  # noqa: F401 - fails here when Opacus is absent

    # an optional library (dpaudit[libraries]) and its adapter, loaded for its own audit
    from dpaudit.auditing.checks.zoo.dpsgd import mean_output, zero_linear
    from dpaudit.mechanisms.adapters import from_opacus

    # opacus issues 571 and 819: 12 records against 11 (batch 4) rescale the noise of all 20 parameters by 4/3
    return from_opacus(zero_linear(20), records=np.zeros((12, 1)), batch_size=4, noise_multiplier=1.0,
                       criterion=mean_output)


AUDITS = (
    LibraryAudit("diffprivlib", _diffprivlib, "gaussian"), LibraryAudit("diffprivlib", _diffprivlib, "float-bits"),
    LibraryAudit("opendp", _opendp, "gaussian"), LibraryAudit("opendp", _opendp, "float-bits"),
    LibraryAudit("python-dp", _pydp, "gaussian"), LibraryAudit("python-dp", _pydp, "float-bits"),
    LibraryAudit("opacus", _opacus, "scale", OPACUS_SHARE),
)


def library_jobs(trials: int | None) -> tuple[list[AuditJob], list[str]]:
    """The section's audit jobs (``trials`` per dataset, default 10^5) and the libraries left out."""
    budget = trials or 100_000
    jobs, missing = [], []
    for entry in AUDITS:
        try:
            mechanism = entry.build()
        except ImportError:
            if entry.library not in missing:
                missing.append(entry.library)
            continue
        title = f"{entry.library}: {mechanism.label}, score {entry.score}"
        jobs.append(make_job(mechanism, dataset_pair=mechanism.neighbours(), score=entry.score, title=title,
                             trials=max(budget // entry.trials_divisor, 100),
                             chunk_size=min(10_000, max(budget // entry.trials_divisor, 100))))
    return jobs, missing


def library_audits(trials: int | None, run: Callable[[list[AuditJob]], list]) -> tuple[list, list[str]]:
    """Run the section's jobs with ``run`` (the gallery's runner); (results, libraries left out)."""
    jobs, missing = library_jobs(trials)
    return (run(jobs) if jobs else []), missing
