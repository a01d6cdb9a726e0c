"""The designs a config can name, as objects: :class:`ManyRuns` and :class:`OneRun`.

A design says *how* an audit samples and certifies: many trainings or one, how many trials, whether it
looks at the data as it goes. What is audited (:class:`AuditTarget`: the mechanism, its pair or canary,
the score, the estimators) and what every design shares (:class:`AuditOptions`: delta, confidence, seed,
the claim, title, store, workers, progress) are given beside it. Each design is a small frozen dataclass
that checks its own settings when made and runs itself, ``design.run(target, options) -> AuditResult``
(the protocol ``AuditDesign`` of :mod:`dpaudit.auditing.checks.designs`, which also holds the neighbour
search, ``PairSearch``).

These two live in the jobs room because a config (:mod:`dpaudit.auditing.jobs.config`) builds its design
from its ``[audit]`` table and asks it for the job to run (``config_job``, ``check_config``), and
configs sit below the checks room (tests/package/test_layers.py).

References
----------
docs/theory.md 3.7 (looks of a sequential audit); docs/theory.md 9 (one-run audits);
docs/guide.md, "Audit designs".
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from dpaudit.attacks.canaries import CanaryPair, CanarySpec
from dpaudit.attacks.scores import AUTO, get_score, score_needs_calibration
from dpaudit.auditing.jobs.job import AuditJob, describe_target, make_job
from dpaudit.auditing.jobs.one_run_design import MAX_RUNS, ONE_RUN_DEFAULTS, ONE_RUN_KINDS, OneRunJob, directions_of
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.auditing.statistics.budget import Estimate, check_budget
from dpaudit.auditing.statistics.one_run_fdp import METHODS
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS, AuditSettings, check_setting
from dpaudit.core.errors import ParameterError
from dpaudit.core.progress import enabled as progress_enabled
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms.base import Mechanism, check_mechanism

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.config import AuditConfig

__all__ = ["COMMON_SETTINGS", "MANY_RUNS_SETTINGS", "AuditOptions", "AuditTarget", "ManyRuns", "OneRun",
           "canary_kind", "respelled"]

#: The ``[audit]`` settings every design takes (:class:`AuditOptions`)
COMMON_SETTINGS = ("delta", "confidence", "seed")
#: ... and those of the design of many trainings (:class:`ManyRuns`), in declaration order
MANY_RUNS_SETTINGS = tuple(key for key in AUDIT_DEFAULTS if key not in COMMON_SETTINGS)
_JOB_DEFAULTS = {field.name: field.default for field in dataclasses.fields(OneRunJob)}


def _given(value: Any) -> bool:
    """Whether an argument was given: not None and not an empty sequence (never an array's truth value)."""
    return value is not None and not (isinstance(value, (tuple, list, dict)) and len(value) == 0)


@dataclasses.dataclass(frozen=True, eq=False)
class AuditTarget:
    """What is audited, whatever the design: the mechanism, how its neighbouring pair is chosen, the score.

    Parameters
    ----------
    mechanism : Mechanism, optional
        The mechanism (``dpaudit.make``, a subclass, ``dpaudit.from_callable``); optional with ``pair``.
    pair : CanaryPair, optional
        A ready neighbouring pair.
    dataset_pair : (array_like, array_like), optional
        Neighbouring datasets ``(S, S')``.
    canary : CanarySpec or mapping, optional
        The canary; ``index`` overrides its positions.
    score : str, Score or list of them, optional
    estimators : sequence of Estimator
        Run after the built-ins (``dpaudit.auditing.statistics.certify.Estimator``).
    """

    mechanism: Mechanism | None = None
    pair: CanaryPair | None = None
    dataset_pair: Sequence[Any] | None = None
    canary: CanarySpec | Mapping[str, Any] | None = None
    index: Any = None
    score: Any = None
    estimators: Sequence[Any] = ()

    def given(self, *names: str) -> list[str]:
        """Those of ``names`` whose argument was given, in order (a design refuses the ones it cannot use)."""
        return [name for name in names if _given(getattr(self, name))]


@dataclasses.dataclass(frozen=True)
class AuditOptions:
    """What applies to every design: the certificate's delta, confidence and seed, the claim, and how to run.

    Parameters
    ----------
    delta, confidence, seed
        As the ``[audit]`` settings of the same names (defaults :data:`AUDIT_DEFAULTS`).
    claimed_epsilon : float, optional
        A claim to judge the audit against as well (and, for a sequential audit, to stop at).
    title : str, optional
        The result's title (default: the design's, from the mechanism's label).
    store : str
        ``":memory:"`` or an SQLite file keeping the chunks.
    workers : int
        Worker processes (1: in this process).
    progress : bool, optional
        Show progress bars (None: when standard error is a terminal, or as ``DPAUDIT_PROGRESS`` says;
        ``dpaudit.core.progress``).
    """

    delta: float = AUDIT_DEFAULTS["delta"]
    confidence: float = AUDIT_DEFAULTS["confidence"]
    seed: int = AUDIT_DEFAULTS["seed"]
    claimed_epsilon: float | None = None
    title: str | None = None
    store: str = MEMORY
    workers: int = 1
    progress: bool | None = False

    def __post_init__(self) -> None:
        for key in COMMON_SETTINGS:
            check_setting(key, getattr(self, key))
        object.__setattr__(self, "progress", progress_enabled() if self.progress is None else bool(self.progress))
        if self.claimed_epsilon is not None:
            check_real("claimed_epsilon", self.claimed_epsilon, nonnegative=True)

    def settings(self, **design: Any) -> AuditSettings:
        """The :class:`AuditSettings` of a design's own settings ``design`` with this delta, confidence and seed."""
        return AuditSettings(**design, **{key: getattr(self, key) for key in COMMON_SETTINGS})

    def run_options(self) -> RunOptions:
        """How the runner executes (``audit.jobs.runner``)."""
        return RunOptions(store=str(self.store), workers=self.workers, progress=self.progress)


def respelled(error: ParameterError, names: Mapping[str, str]) -> ParameterError:
    """``error`` with each field named as its caller spells it (``names``: field -> keyword), e.g.
    ``method`` -> ``one_run_method`` for ``dpaudit.audit`` and configs."""
    text = str(error)
    for field, keyword in names.items():
        text = re.sub(rf"\b{field}(?= must|=)", keyword, text)
    return ParameterError(text)


def _table_of(text: str) -> str:
    """The config table of a one-run design's error: ``[canary]`` for ``kind`` and ``directions``, else ``[audit]``."""
    return "canary" if text.startswith(("kind", "directions")) else "audit"


def canary_kind(canary: Any) -> str | None:
    """The kind a canary argument names (a mapping's ``kind``, a ``CanarySpec``'s), or None."""
    if canary is None:
        return None
    return canary.get("kind") if isinstance(canary, Mapping) else getattr(canary, "kind", None)


def _fits(job: AuditJob, chunk: int) -> bool:
    """Whether ``job``'s audit fits the memory budget with chunks of ``chunk`` trials (in memory, one worker)."""
    try:
        check_budget(job.mechanism, len(job.pairs), dataclasses.replace(job.settings, chunk_size=chunk),
                     fitted=job.fitted)
    except ParameterError:
        return False
    return True


@dataclasses.dataclass(frozen=True)
class ManyRuns:
    """Many trainings: ``trials`` runs of the mechanism per dataset of the pair, certified on fresh trials.

    The default design of ``dpaudit.audit``, ``dpaudit run`` and ``assert_private``. A share of the trials
    (``calibration_fraction``) fits the scores and places the tests; the rest certifies (docs/theory.md 3).

    Parameters
    ----------
    trials, chunk_size, calibration_fraction, threshold
        The ``[audit]`` settings of the same names (defaults :data:`AUDIT_DEFAULTS`,
        ``audit/statistics/settings.py``).
    sequential : bool
        Look at the data after 1, 2, 4, ... certification chunks and stop at the first certified violation
        (docs/theory.md 3.7; ``assert_private`` and ``dpaudit check``).
    calibration_chunk : int, optional
        Trials per calibration chunk where the audit fits the memory budget with chunks of that size (else
        ``chunk_size``): ``assert_private`` cuts its certification part finely for its looks but draws its
        calibration as ``dpaudit.audit`` does by default, so that both choose the same score.
    """

    trials: int = AUDIT_DEFAULTS["trials"]
    chunk_size: int = AUDIT_DEFAULTS["chunk_size"]
    calibration_fraction: float = AUDIT_DEFAULTS["calibration_fraction"]
    threshold: str = AUDIT_DEFAULTS["threshold"]
    sequential: bool = False
    calibration_chunk: int | None = None

    def __post_init__(self) -> None:
        for key in MANY_RUNS_SETTINGS:
            check_setting(key, getattr(self, key))
        if not isinstance(self.sequential, bool):
            raise ParameterError(f"sequential must be True or False, got sequential={self.sequential!r}")
        if self.calibration_chunk is not None:
            check_int("calibration_chunk", self.calibration_chunk, minimum=1)

    def settings(self, options: AuditOptions) -> AuditSettings:
        """Every ``[audit]`` setting: this design's and ``options``' delta, confidence and seed."""
        return options.settings(**{key: getattr(self, key) for key in MANY_RUNS_SETTINGS})

    def job(self, target: AuditTarget, options: AuditOptions) -> AuditJob:
        """The :class:`AuditJob` of ``target`` (``audit.jobs.job.make_job``)."""
        job = make_job(target.mechanism, pair=target.pair, dataset_pair=target.dataset_pair, canary=target.canary,
                       index=target.index, score=target.score, title=options.title, estimators=target.estimators,
                       sequential=self.sequential, claimed_epsilon=options.claimed_epsilon,
                       **self.settings(options).to_dict())
        if self.calibration_chunk is not None and _fits(job, self.calibration_chunk):
            job = dataclasses.replace(job, calibration_chunk=self.calibration_chunk)
        return job

    def run(self, target: AuditTarget, options: AuditOptions) -> AuditResult:
        """Audit ``target`` (``audit.jobs.runner.run_audits``)."""
        return run_audits([self.job(target, options)], options.run_options())[0]

    def config_job(self, config: AuditConfig, *, sequential: bool = False) -> AuditJob:
        """The job of a config: one canary pair per position its ``[canary]`` asks for, described by its
        resolved tables (``sequential``: ``dpaudit check``); errors name the config and the table."""
        try:
            pairs = tuple(config.canary.build(config.mechanism, t) for t in config.canary.indices(config.mechanism))
        except ParameterError as exc:
            raise ParameterError(f"{config.source}: [canary] {exc}") from None
        description = {key: config.resolved[key] for key in ("mechanism", "canary", "attack")}
        description["canary"] = describe_target(dict(description["canary"]), pairs, config.mechanism)
        return AuditJob(config.mechanism, pairs, config.score, self.settings(config.options), config.title,
                        description, config.source, sequential=sequential or self.sequential)

    def check_config(self, config: AuditConfig, *, workers: int = 1, max_memory: int | None = None,
                     store: str | None = None) -> Estimate:
        """Refuse, naming the config and the parameter, a config's audit that cannot fit the machine, before any
        dataset is built (``audit.statistics.budget``)."""
        fitted = (isinstance(config.score, list) or config.score == AUTO
                  or score_needs_calibration(get_score(config.score)))
        try:
            return check_budget(config.mechanism, config.canary.count(config.mechanism), self.settings(config.options),
                                workers=workers, max_memory=max_memory, store=store, fitted=fitted)
        except ParameterError as exc:
            raise ParameterError(f"{config.source}: {exc}") from None


@dataclasses.dataclass(frozen=True)
class OneRun:
    """One training run (or a few pooled) with ``canaries`` canaries, each included with probability 1/2.

    Trains mechanism ``model`` once per run and certifies from the canaries' scores (docs/theory.md 9,
    ``audit/jobs/one_run_design.py``). The target gives the mechanism only (and may repeat the kind as
    ``canary={"kind": ...}``); a pair, dataset pair, index, score or estimators are refused.

    Parameters
    ----------
    canaries : int
        Canaries per run (default 1000), at least 2 and at most the mechanism's records.
    runs : int
        Training runs pooled, each with its own canaries (default 1).
    method : {"fdp", "steinke", "tail"}
        The test whose bound the verdict uses, chosen before the run (``one_run_method`` in ``dpaudit.audit``
        and configs).
    kind : {"gradient", "input"}
        Gradient canaries (a parameter direction: white box) or input canaries (records scored by their loss
        under the final model: black box).
    directions : {"dirac", "random"}, optional
        Of gradient canaries: a uniform random unit direction each (``"random"``, the default) or a signed
        coordinate (``"dirac"``; coordinates shared in equal blocks when canaries outnumber parameters); input
        canaries refuse it (``[canary] directions`` in configs; docs/theory.md 9).
    """

    canaries: int = ONE_RUN_DEFAULTS["canaries"]
    runs: int = ONE_RUN_DEFAULTS["runs"]
    method: str = ONE_RUN_DEFAULTS["one_run_method"]
    kind: str = _JOB_DEFAULTS["kind"]
    directions: str | None = None

    #: The keyword of ``dpaudit.audit`` and the ``[audit]`` key of each field named otherwise
    SPELLING: ClassVar[dict[str, str]] = {"method": "one_run_method"}

    def __post_init__(self) -> None:
        check_int("canaries", self.canaries, minimum=2)
        check_int("runs", self.runs, minimum=1, maximum=MAX_RUNS)
        check_choice("method", self.method, METHODS)
        check_choice("kind", self.kind, ONE_RUN_KINDS)
        directions_of(self.kind, self.directions)

    def _check_canary(self, canary: Any) -> None:
        """A canary argument may name this design's kind, nothing else."""
        if canary is None:
            return
        fields = dict(canary) if isinstance(canary, Mapping) else {"kind": canary_kind(canary)}
        if set(fields) - {"kind"}:
            raise ParameterError(f"design='one-run' takes canary kind only, got {sorted(fields)}")
        kind = fields.get("kind")
        if kind is not None and kind != self.kind:
            raise ParameterError(f"canary kind {kind!r} is not the design's OneRun(kind={self.kind!r}); give it "
                                 f"to the design: OneRun(kind={kind!r})")

    def job(self, target: AuditTarget, options: AuditOptions) -> OneRunJob:
        """The :class:`OneRunJob` of ``target``; a target argument this design cannot use is refused."""
        if target.mechanism is None:
            raise ParameterError("a one-run audit needs a mechanism (dpaudit.make('model', ...))")
        mechanism = check_mechanism(target.mechanism)  # a plain function is refused with how to wrap it
        refused = target.given("pair", "dataset_pair", "index", "score", "estimators")
        if refused:
            raise ParameterError(f"design='one-run' takes no {refused[0]} (one training run, canaries instead of "
                                 f"trials)")
        self._check_canary(target.canary)
        description = {"mechanism": {"name": mechanism.name, **mechanism.params}, "canary": {"kind": self.kind}}
        return OneRunJob(mechanism, self.canaries, options.settings(),
                         options.title or f"{mechanism.label} one-run audit", description, kind=self.kind,
                         runs=self.runs, method=self.method, claimed_epsilon=options.claimed_epsilon,
                         directions=self.directions)

    def run(self, target: AuditTarget, options: AuditOptions) -> AuditResult:
        """Train, score the canaries, certify (``audit.jobs.one_run_result``)."""
        return run_audits([self.job(target, options)], options.run_options())[0]

    def config_job(self, config: AuditConfig, *, sequential: bool = False) -> OneRunJob:
        """The job of a one-run config (``sequential`` changes nothing: one run looks once); errors name the
        config and the key."""
        description = {key: config.resolved[key] for key in ("mechanism", "canary")}
        try:
            return OneRunJob(config.mechanism, self.canaries, config.options.settings(), config.title, description,
                             config.source, kind=self.kind, runs=self.runs, method=self.method,
                             sequential=sequential, directions=self.directions)
        except ParameterError as exc:
            text = str(respelled(exc, self.SPELLING))
            raise ParameterError(f"{config.source}: [{_table_of(text)}] {text}") from None

    def check_config(self, config: AuditConfig, *, workers: int = 1, max_memory: int | None = None,
                     store: str | None = None) -> None:
        """Refuse a config whose job cannot run; one training run has nothing to size."""
        self.config_job(config)
