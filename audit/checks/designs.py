"""Audit designs as objects: how an audit samples and certifies, apart from what it audits.

``dpaudit.audit(mechanism, design=...)`` takes a design object and calls its ``run``; it never branches on
the design, so a new design is one class that satisfies :class:`AuditDesign` (a method
``run(target, options) -> AuditResult``), with no edit to ``audit``:

- :class:`ManyRuns`: many trainings per dataset of the pair, the default (``trials``, ``chunk_size``,
  ``calibration_fraction``, ``threshold``; ``sequential`` looks as it goes);
- :class:`OneRun`: one training run with ``canaries`` canaries (``runs`` pooled, ``method``, ``kind``);
- :class:`PairSearch`: screen candidate neighbouring pairs of a function, then certify the strongest
  (:func:`dpaudit.search`'s options);
- :class:`Anytime`: a bound valid at every number of trials, stopping at the first certified violation
  (``audit/jobs/anytime_design.py``, docs/theory.md 13).

Each is a frozen dataclass that checks its own settings when made, naming the parameter and the value.
What says *what* is audited (:class:`AuditTarget`) and what every design shares (:class:`AuditOptions`)
are given beside the design; a design refuses, in one line naming it, a target argument it cannot use.

:func:`design_from_keywords` turns the older keywords of ``dpaudit.audit`` (``design="one-run"``,
``canaries=``, ``search=``, ``sequential=``, ``trials=``, ...) into one of these objects.

References
----------
docs/theory.md 3.7 (sequential looks), 3.8 (searching for the pair), 9 (one-run audits);
audit/jobs/job_designs.py (:class:`ManyRuns` and :class:`OneRun`, which configs build too).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from dpaudit.auditing.checks.search import search as search_pairs
from dpaudit.auditing.checks.search_records import parse_domain
from dpaudit.auditing.checks.vector_pairs import RELATIONS
from dpaudit.auditing.jobs.anytime_design import Anytime
from dpaudit.auditing.jobs.job_designs import (
    COMMON_SETTINGS,
    MANY_RUNS_SETTINGS,
    AuditOptions,
    AuditTarget,
    ManyRuns,
    OneRun,
    canary_kind,
    respelled,
)
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation, check_enum
from dpaudit.core.validation import check_choice, check_int, check_real, suggestion

__all__ = ["Anytime", "AuditDesign", "AuditOptions", "AuditTarget", "ManyRuns", "OneRun", "PairSearch",
           "design_from_keywords"]


@runtime_checkable
class AuditDesign(Protocol):
    """How an audit samples and certifies: an object with ``run(target, options) -> AuditResult``.

    ``target`` says what is audited (:class:`AuditTarget`: mechanism, pair, dataset pair, canary, index,
    score, estimators) and ``options`` what every design shares (:class:`AuditOptions`: delta, confidence,
    seed, ``claimed_epsilon``, title, store, workers, progress). A design checks its own settings when it
    is made and refuses, naming it, a target argument or an option it cannot use.
    """

    def run(self, target: AuditTarget, options: AuditOptions) -> AuditResult:
        """Audit ``target`` under ``options`` and return the result."""
        ...


#: search()'s keyword defaults, read off its signature: each declared once, there
_SEARCH = {name: parameter.default for name, parameter in inspect.signature(search_pairs).parameters.items()
           if parameter.default is not inspect.Parameter.empty}
_VECTOR_ONLY = ("center", "sensitivity")
_RECORDS_ONLY = ("record_domain", "thresholds", "background", "min_records", "max_candidates", "labels", "size",
                 "large_records")


def _changed(options: Any, name: str) -> bool:
    """Whether search option ``name`` differs from search()'s default (an array is never compared)."""
    value, default = getattr(options, name), _SEARCH[name]
    return value is not None if default is None else value != default


@dataclasses.dataclass(frozen=True, eq=False)
class PairSearch:
    """Search for the neighbouring pair on which a function leaks most, then certify it once.

    Candidate pairs are screened in rounds on trials of their own, and the strongest is audited on fresh
    trials by the design of many trainings (``audit/checks/search.py``, docs/theory.md 3.8); the result is
    that audit's (``dpaudit.search`` also returns the screening table). The target gives the mechanism (a
    function of a dataset wrapped with ``dpaudit.from_callable``) and optionally the score; it runs in
    memory in this process.

    Parameters
    ----------
    record_domain : (float, float) or sequence of them, optional
        Where records lie, one ``(low, high)`` per column for records of several (default the mechanism's
        declared domain).
    thresholds : sequence of float
        Values in the domain where the code changes behaviour (records of one number).
    background : array_like, optional
        Records of one's own to use as one more background.
    relation : str, optional
        ``"replace-one"``, ``"add-remove"`` or ``"zero-out"`` (default the relations the mechanism's claim is made
        for); with ``queries``, ``"component-wise"`` (default) or ``"one-answer"``.
    labels : sequence of float, optional
        The values of a label column after the features: candidates flip it.
    size : int, optional
        Every dataset holds this many records (default the mechanism's own, where it takes one size only).
    large_records : int
        Records of the large datasets offered for float sums and means (0: none).
    trials : int
        Trials per dataset of the certifying audit.
    screen_trials : int
        Trials per dataset of each candidate's first screening round.
    min_records, max_candidates : int
        No dataset holds fewer records; at most this many candidates are screened.
    queries : int, optional
        The function takes a vector of this many query answers: screen the standard input patterns about
        ``center`` with moves of ``sensitivity`` under ``relation`` (``record_domain``, ``thresholds``,
        ``background``, ``min_records``, ``max_candidates``, ``labels``, ``size`` and ``large_records`` then do
        not apply; without ``queries``, ``center`` and ``sensitivity`` do not).

    Defaults are :func:`dpaudit.search`'s.
    """

    record_domain: tuple[float, float] | None = _SEARCH["record_domain"]
    thresholds: Sequence[float] = _SEARCH["thresholds"]
    background: Any = _SEARCH["background"]
    trials: int = _SEARCH["trials"]
    screen_trials: int = _SEARCH["screen_trials"]
    min_records: int = _SEARCH["min_records"]
    max_candidates: int = _SEARCH["max_candidates"]
    queries: int | None = _SEARCH["queries"]
    center: float = _SEARCH["center"]
    sensitivity: float = _SEARCH["sensitivity"]
    relation: str | None = _SEARCH["relation"]
    labels: Sequence[float] | None = _SEARCH["labels"]
    size: int | None = _SEARCH["size"]
    large_records: int = _SEARCH["large_records"]

    def __post_init__(self) -> None:
        check_int("trials", self.trials, minimum=20)
        check_int("screen_trials", self.screen_trials, minimum=20)
        check_int("min_records", self.min_records, minimum=0)
        check_int("max_candidates", self.max_candidates, minimum=1)
        check_int("large_records", self.large_records, minimum=0)
        if self.size is not None:
            check_int("size", self.size, minimum=1)
        if isinstance(self.thresholds, str) or not isinstance(self.thresholds, Sequence):
            raise ParameterError(f"thresholds must be a list of numbers, got thresholds={self.thresholds!r}")
        for value in self.thresholds:
            check_real("thresholds", value)
        object.__setattr__(self, "thresholds", tuple(self.thresholds))
        if self.queries is None:
            moved = [name for name in _VECTOR_ONLY if _changed(self, name)]
            if moved:
                raise ParameterError(f"{moved[0]} applies to a search over query answers only (queries=n), got "
                                     f"{moved[0]}={getattr(self, moved[0])!r}")
            if self.relation is not None:
                check_enum("relation", self.relation, Relation)
            self._check_domain()
            return
        check_int("queries", self.queries, minimum=1)
        given = [name for name in _RECORDS_ONLY if _changed(self, name)]
        if given:
            raise ParameterError(f"{given[0]} does not apply to a search over query answers (queries="
                                 f"{self.queries}); remove it")
        check_real("center", self.center)
        check_real("sensitivity", self.sensitivity, positive=True)
        if self.relation is not None:
            check_choice("relation", self.relation, RELATIONS)

    def _check_domain(self) -> None:
        """``record_domain`` two finite numbers low < high (or one such pair per column), ``labels`` distinct
        numbers, and every threshold inside a one-column domain."""
        if self.record_domain is None:
            if self.labels is not None:
                parse_domain((0.0, 1.0), self.labels)
            return
        columns, _ = parse_domain(self.record_domain, self.labels)
        if len(columns) > 1:
            object.__setattr__(self, "record_domain", tuple(columns))
            return
        object.__setattr__(self, "record_domain", tuple(self.record_domain))
        low, high = columns[0]
        for value in self.thresholds:
            if not low <= value <= high:
                raise ParameterError(f"thresholds must lie in the record domain [{low:g}, {high:g}], got {value!r}")

    def run(self, target: AuditTarget, options: AuditOptions) -> AuditResult:
        """Screen, choose and certify (``audit.checks.search.search``); the certifying audit's result."""
        refused = target.given("pair", "dataset_pair", "canary", "index", "estimators") + [
            name for name, other in (("store", options.store != MEMORY), ("workers", options.workers != 1)) if other]
        if refused:
            raise ParameterError(f"search chooses the pair itself and runs in memory; it takes no {', '.join(refused)}")
        if target.mechanism is None:
            raise ParameterError("search needs a mechanism: a function of a dataset wrapped with dpaudit.from_callable")
        found = search_pairs(target.mechanism, score=target.score, title=options.title,
                             epsilon=options.claimed_epsilon, delta=options.delta, confidence=options.confidence,
                             seed=options.seed, **{field.name: getattr(self, field.name)
                                                   for field in dataclasses.fields(self)})
        return found.result


_ONE_RUN_KEYWORDS = ("canaries", "runs", "one_run_method")


def design_from_keywords(design: AuditDesign | str = "many-runs", *, search: Mapping[str, Any] | bool | None = None,
                         sequential: bool = False, canaries: int | None = None, runs: int | None = None,
                         one_run_method: str | None = None, canary: Any = None, **settings: Any) -> AuditDesign:
    """The design object that the design keywords of ``dpaudit.audit`` spell.

    Parameters
    ----------
    design : AuditDesign or {"many-runs", "one-run"}
        A design object (returned as it is; it holds its settings, so no other keyword here may be given),
        or a design's name.
    search : bool or mapping, optional
        ``True``, or a mapping of :class:`PairSearch`'s options: the neighbour search.
    sequential : bool
        ``ManyRuns(sequential=...)``.
    canaries, runs, one_run_method : optional
        ``OneRun(canaries, runs, method)``; with ``design="one-run"`` only.
    canary : CanarySpec or mapping, optional
        Read for its kind under ``design="one-run"`` (``OneRun(kind=...)``); it stays the target's.
    **settings
        The design's own ``[audit]`` settings: ``trials``, ``chunk_size``, ``calibration_fraction``,
        ``threshold`` (many runs), ``trials`` (search). ``delta``, ``confidence`` and ``seed`` belong to every
        design (:class:`AuditOptions`) and are not taken here.

    Returns
    -------
    AuditDesign
    """
    one_run = [name for name, value in zip(_ONE_RUN_KEYWORDS, (canaries, runs, one_run_method)) if value is not None]
    if not isinstance(design, str):
        if not isinstance(design, AuditDesign):
            raise ParameterError(f"design must be 'many-runs', 'one-run' or a design object with run(target, options) "
                                 f"(dpaudit.ManyRuns, OneRun, PairSearch, Anytime), got design={design!r}")
        spelled = [name for name, value in (("search", search), ("sequential", sequential)) if value] + one_run
        if spelled or settings:
            shown = (spelled or sorted(settings))[0]
            raise ParameterError(f"a design object holds its own settings: give {shown} to "
                                 f"{type(design).__name__}(...), not beside it")
        return design
    if search:
        refused = (["design"] if design != "many-runs" else []) + one_run + (["sequential"] if sequential else [])
        if refused:
            raise ParameterError(f"search chooses the pair itself and runs in memory; it takes no {', '.join(refused)}")
        unknown = sorted(set(settings) - {"trials"})
        if unknown:
            raise ParameterError(f"search takes the settings trials, delta, confidence and seed, got {unknown[0]!r}")
        options = dict(search) if isinstance(search, Mapping) else {}
        fields = [field.name for field in dataclasses.fields(PairSearch)]
        for key in options:
            if key not in fields:
                raise ParameterError(f"search has no option {key!r} (valid: {', '.join(fields)}; delta, confidence, "
                                     f"seed, score and title are audit's own){suggestion(key, fields)}")
        if "trials" in options and "trials" in settings:
            raise ParameterError("trials given twice: in search= and as trials=; give it once")
        return PairSearch(**options, **settings)
    if design == "one-run":
        refused = [name for name in MANY_RUNS_SETTINGS if name in settings]
        if refused:
            raise ParameterError(f"design='one-run' takes no {refused[0]} (one training run, canaries instead of "
                                 f"trials)")
        if settings:
            raise ParameterError(f"unknown audit setting {sorted(settings)[0]!r} (valid: {', '.join(COMMON_SETTINGS)})")
        # a one-run audit looks once: sequential changes nothing (as under dpaudit check)
        chosen = {name: value for name, value in (("canaries", canaries), ("runs", runs), ("method", one_run_method),
                                                  ("kind", canary_kind(canary))) if value is not None}
        try:
            return OneRun(**chosen)
        except ParameterError as exc:
            raise respelled(exc, OneRun.SPELLING) from None
    if one_run:
        raise ParameterError(f"canaries, runs and one_run_method apply to design='one-run', got design={design!r}")
    if design != "many-runs":
        raise ParameterError(f"design must be 'many-runs', 'one-run' or a design object (dpaudit.ManyRuns, OneRun, "
                             f"PairSearch, Anytime), got design={design!r}")
    unknown = sorted(set(settings) - set(MANY_RUNS_SETTINGS))
    if unknown:
        raise ParameterError(f"unknown audit setting {unknown[0]!r} (valid: {', '.join(AUDIT_DEFAULTS)})")
    return ManyRuns(**settings, sequential=bool(sequential))
