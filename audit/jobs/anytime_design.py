"""The anytime-valid design as an object: :class:`Anytime` (docs/theory.md 13).

``dpaudit.audit(mechanism, design=dpaudit.Anytime(budget=...), claimed_epsilon=...)``, ``assert_private(...,
design=dpaudit.Anytime())``, the pytest plugin and configs (``[audit] design = "anytime"``) run it; it
satisfies the ``AuditDesign`` protocol of :mod:`dpaudit.auditing.checks.designs` (``run(target, options)``)
and builds an :class:`~dpaudit.auditing.jobs.anytime.AnytimeJob`, which the runner runs chunk by chunk.

References
----------
docs/theory.md 13; audit/statistics/betting.py; audit/jobs/anytime.py.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from dpaudit.auditing.jobs.anytime import ANYTIME_DEFAULTS, AnytimeJob
from dpaudit.auditing.jobs.job import AuditJob, make_job
from dpaudit.auditing.jobs.job_designs import AuditOptions, AuditTarget
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import run_audits
from dpaudit.auditing.statistics.budget import check_budget
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS, check_setting
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.config import AuditConfig

__all__ = ["Anytime"]


@dataclasses.dataclass(frozen=True)
class Anytime:
    """Watch the mechanism in growing chunks and keep a bound valid at every number of trials.

    Each chunk is bet on with tests and bets fixed from the earlier chunks; the certified bound holds at
    the audit's confidence simultaneously at every trial (a confidence sequence), so the audit stops at the
    first trial it exceeds the claim (``claimed_epsilon``, else the mechanism's smallest applicable claim),
    at the budget, or when the claim is out of reach in the trials left (docs/theory.md 13).

    Parameters
    ----------
    budget : int
        The most trials per dataset (default :data:`AUDIT_DEFAULTS` ``trials``). A larger budget later
        continues the same stored chunks.
    first : int
        Trials per dataset of the first chunk, which only places the first test (default 100; at least
        40 for a portfolio of scores).
    chunk_size : int
        The largest chunk: chunks double from ``first`` up to it (default ``AUDIT_DEFAULTS["chunk_size"]``).
    futility : bool
        Stop when even optimistic rates could not certify the claim in the budget left (default True).
    """

    budget: int = AUDIT_DEFAULTS["trials"]
    first: int = ANYTIME_DEFAULTS["first"]
    chunk_size: int = AUDIT_DEFAULTS["chunk_size"]
    futility: bool = True

    def __post_init__(self) -> None:
        check_int("budget", self.budget, minimum=20)
        check_int("first", self.first, minimum=10)
        check_setting("chunk_size", self.chunk_size)
        if self.first > self.budget:
            raise ParameterError(f"first must be at most budget={self.budget}, got first={self.first}")
        if not isinstance(self.futility, bool):
            raise ParameterError(f"futility must be True or False, got futility={self.futility!r}")

    def _job(self, base: AuditJob) -> AnytimeJob:
        if base.estimators:
            raise ParameterError("the anytime design takes no estimators: it certifies its confidence sequence "
                                 "only (other estimators are fixed-sample)")
        return AnytimeJob(base, first=self.first, futility=self.futility)

    def job(self, target: AuditTarget, options: AuditOptions) -> AnytimeJob:
        """The :class:`AnytimeJob` of ``target`` (the budget as ``trials``, the largest chunk as ``chunk_size``)."""
        settings = options.settings(trials=self.budget, chunk_size=self.chunk_size).to_dict()
        return self._job(make_job(target.mechanism, pair=target.pair, dataset_pair=target.dataset_pair,
                                  canary=target.canary, index=target.index, score=target.score, title=options.title,
                                  estimators=target.estimators, claimed_epsilon=options.claimed_epsilon, **settings))

    def run(self, target: AuditTarget, options: AuditOptions) -> AuditResult:
        """Audit ``target`` until a stop (``audit.jobs.anytime.run_anytime``)."""
        return run_audits([self.job(target, options)], options.run_options())[0]

    def config_job(self, config: AuditConfig, *, sequential: bool = False) -> AnytimeJob:
        """The job of a config with ``[audit] design = "anytime"`` (``sequential`` changes nothing: the design
        looks after every trial by construction)."""
        try:
            pairs = tuple(config.canary.build(config.mechanism, t) for t in config.canary.indices(config.mechanism))
        except ParameterError as exc:
            raise ParameterError(f"{config.source}: [canary] {exc}") from None
        description = {key: config.resolved[key] for key in ("mechanism", "canary", "attack")}
        settings = config.options.settings(trials=self.budget, chunk_size=self.chunk_size)
        return self._job(AuditJob(config.mechanism, pairs, config.score, settings, config.title, description,
                                  config.source))

    def check_config(self, config: AuditConfig, *, workers: int = 1, max_memory: int | None = None,
                     store: str | None = None) -> Any:
        """Refuse, naming the config, an audit whose budget of raw outputs cannot fit the machine."""
        try:
            return check_budget(config.mechanism, config.canary.count(config.mechanism),
                                config.options.settings(trials=self.budget, chunk_size=self.chunk_size),
                                workers=workers, max_memory=max_memory, store=store, fitted=True)
        except ParameterError as exc:
            raise ParameterError(f"{config.source}: {exc}") from None
