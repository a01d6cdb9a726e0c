"""What one audit is: the mechanism, its canary pairs, the score and the settings.

An :class:`AuditJob` is what the runner executes, whether it came from a
TOML config (``AuditConfig.job``) or from Python (``dpaudit.audit``,
``assert_private``, the zoo). Its id hashes the description, the exact
datasets of every pair, and the fingerprint of the code (``fingerprint``), so a
changed mechanism or dataset never reuses stored chunks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair, CanarySpec
from dpaudit.attacks.scores import AUTO, Score, registered_scores, resolve_scores, score_needs_calibration
from dpaudit.auditing.jobs.fingerprint import code_fingerprint, object_fingerprint
from dpaudit.auditing.jobs.parts import calibration_trials
from dpaudit.auditing.statistics.budget import check_budget
from dpaudit.auditing.statistics.certify import Estimator, check_estimators
from dpaudit.auditing.statistics.portfolio import PORTFOLIO_CALIBRATION
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS, AuditSettings, check_setting
from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.base import Mechanism, check_mechanism
from dpaudit.mechanisms.dataset import as_dataset

__all__ = ["AuditJob", "dataset_pair_relation", "describe_target", "make_job", "pair_digest"]


def pair_digest(pair: CanaryPair) -> bytes:
    """Everything of a pair that decides what is sampled."""
    digest = hashlib.sha256()
    for dataset in (pair.dataset_a, pair.dataset_b):
        digest.update(np.ascontiguousarray(dataset.records, dtype=np.float64).tobytes())
        digest.update(str(dataset.records.shape).encode())
        for position in sorted(dataset.injected):
            digest.update(f"{position}:".encode())
            digest.update(np.ascontiguousarray(dataset.injected[position], dtype=np.float64).tobytes())
        for step in sorted(dataset.scheduled):  # nothing is added for unscheduled canaries: their ids stay
            digest.update(f"step {step}:".encode())
            digest.update(np.ascontiguousarray(dataset.scheduled[step], dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(pair.direction, dtype=np.float64).tobytes())
    kind = type(pair.mechanism)
    digest.update(json.dumps([pair.index, str(pair.relation), pair.kind, pair.mechanism.name, pair.mechanism.params,
                              f"{kind.__module__}.{kind.__qualname__}"],
                             sort_keys=True, default=str).encode())
    return digest.digest()


@dataclasses.dataclass(frozen=True, eq=False)
class AuditJob:
    """One audit ready to run.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism whose claims the audit is judged against.
    pairs : tuple of CanaryPair
        One neighbouring pair per canary position (at least one).
    score : str, Score or sequence of them
        A registered score's name, a score object (``attacks.scores.Score``), or a list of either (a
        portfolio: one is chosen on calibration trials). Resolved into :attr:`scores`.
    settings : AuditSettings
    title : str
    description : mapping
        The resolved ``mechanism``, ``canary`` and ``attack`` tables, as the result records them.
    source : str
        Where the job came from (a config path, or ``"<python>"``).
    estimators : tuple of Estimator
        Estimators run after the built-ins (``audit.statistics.certify``).
    sequential : bool
        Look at the data at points planned from the budget and stop at the first certified violation
        (``audit.statistics.sequential``; ``assert_private``, the pytest plugin and ``dpaudit check``).
    claimed_epsilon : float, optional
        A claim given with the audit (``assert_private``'s ``epsilon``): a sequential audit also stops
        when its certified bound exceeds it; results list it as a claim for the pair's relation.
    calibration_chunk : int, optional
        Trials per calibration chunk when not ``settings.chunk_size``: ``assert_private`` cuts its
        certification part finely for its looks but draws its calibration as ``dpaudit.audit`` does by
        default, so the two choose the same score and the same test from the same seed and trials.
    """

    mechanism: Mechanism
    pairs: tuple[CanaryPair, ...]
    score: Any
    settings: AuditSettings
    title: str
    description: Mapping[str, Any]
    source: str = "<python>"
    estimators: tuple[Estimator, ...] = ()
    sequential: bool = False
    claimed_epsilon: float | None = None
    calibration_chunk: int | None = None
    scores: tuple[Score, ...] = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.pairs:
            raise ParameterError("an audit needs at least one canary pair")
        indices = [pair.index for pair in self.pairs]
        if len(set(indices)) != len(indices):
            raise ParameterError(f"canary positions must be distinct, got index={indices}")
        object.__setattr__(self, "scores", resolve_scores(self.score))
        object.__setattr__(self, "estimators", check_estimators(self.estimators))
        if self.calibration_chunk is not None:
            check_setting("chunk_size", self.calibration_chunk)
        self._check_calibration()

    def _check_calibration(self) -> None:
        """Refuse, before any trial, a portfolio whose calibration part is too small to choose on
        (``PORTFOLIO_CALIBRATION`` trials per dataset), naming ``trials`` and the least that works."""
        trials, fraction = self.settings.trials, self.settings.calibration_fraction
        calibration = calibration_trials(trials, fraction)
        if len(self.scores) == 1 or calibration >= PORTFOLIO_CALIBRATION:
            return
        requested = self.description.get("attack", {}).get("score", AUTO)
        shown = f"score={requested!r}" if isinstance(requested, str) else f"{len(self.scores)} scores"
        least = PORTFOLIO_CALIBRATION / fraction
        if least < 2**53:  # the least trials at this fraction, past a rounding of the share
            least = math.ceil(least)
            while calibration_trials(least, fraction) < PORTFOLIO_CALIBRATION:
                least += 1
            remedy = f"use trials >= {least}, a larger calibration_fraction, or one score"
        else:
            remedy = f"use calibration_fraction >= {PORTFOLIO_CALIBRATION / trials:.3g}, or one score"
        raise ParameterError(
            f"trials={trials} sets aside {calibration} calibration trials per dataset (calibration_fraction="
            f"{fraction:g}), and a portfolio of scores ({shown}) needs at least {PORTFOLIO_CALIBRATION}: {remedy}")

    @property
    def calibration_chunk_size(self) -> int:
        """Trials per calibration chunk (:attr:`calibration_chunk`, else the settings' ``chunk_size``)."""
        return self.calibration_chunk or self.settings.chunk_size

    def violated(self, result: Any) -> bool:
        """True when ``result`` certifies a violation: of a mechanism claim, or of :attr:`claimed_epsilon`."""
        return result.verdict == "violation" or (
            self.claimed_epsilon is not None and result.epsilon_lower_bound > self.claimed_epsilon)

    @property
    def score_names(self) -> tuple[str, ...]:
        """The names of :attr:`scores`, in order."""
        return tuple(score.name for score in self.scores)

    @property
    def fitted(self) -> bool:
        """True when calibration must keep raw outputs (a fitted score, or a portfolio to choose from)."""
        return len(self.scores) > 1 or score_needs_calibration(self.scores[0])

    def attack_table(self) -> dict[str, Any]:
        """The ``attack`` table of the result: the description's, with the score names."""
        table = dict(self.description.get("attack", {}))
        names = self.score_names
        table["score"] = names[0] if len(names) == 1 else list(names)
        return table

    def _score_identity(self) -> Any:
        """Names of registered scores; name, class and code fingerprint of any other score object."""
        registry = registered_scores()
        if len(self.scores) == 1 and registry.get(self.scores[0].name) is self.scores[0]:
            return self.scores[0].name  # as before portfolios: a single registered score hashes by its name
        return [score.name if registry.get(score.name) is score else
                [score.name, f"{type(score).__module__}.{type(score).__qualname__}", object_fingerprint(score)]
                for score in self.scores]

    @property
    def code_fingerprint(self) -> str:
        """Fingerprint of the code behind the mechanism (see ``audit.jobs.fingerprint``)."""
        return code_fingerprint(self.mechanism)

    @property
    def audit_id(self) -> str:
        """The id of this audit's result and reports: :attr:`draws_id`, and for a sequential audit a hash of it
        and of its looks. A sequential audit certifies other figures from the same trials (each look pays for
        itself: ``audit.statistics.sequential``), so it is another audit, with its own id and report names;
        it reads and writes the same stored chunks as the audit without looks (:attr:`draws_id`)."""
        if not self.sequential:
            return self.draws_id
        return hashlib.sha256(f"{self.draws_id}/sequential".encode()).hexdigest()[:16]

    @property
    def draws_id(self) -> str:
        """Hash of the description, the settings, every pair's datasets and the code fingerprint: what is drawn,
        and the key of the stored chunks (the id of the audit without looks)."""
        digest = hashlib.sha256()
        drawn = {} if self.calibration_chunk in (None, self.settings.chunk_size) else {
            "calibration_chunk": self.calibration_chunk}  # only where it changes what is drawn: other ids stay
        digest.update(json.dumps({"description": self.description, "settings": self.settings.to_dict(),
                                  "score": self._score_identity(), "code": self.code_fingerprint, **drawn},
                                 sort_keys=True, separators=(",", ":"), default=str).encode())
        for pair in self.pairs:
            digest.update(pair_digest(pair))
        return digest.hexdigest()[:16]

    def with_trials(self, trials: int) -> "AuditJob":
        """The same audit with another number of trials per dataset."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, trials=trials))


def dataset_pair_relation(first: Any, second: Any) -> Relation:
    """The relation a given pair ``(S, S')`` realises: replace-one when both hold as many records, add/remove when
    one holds one record more.

    Raises
    ------
    ParameterError
        When the records have different widths, the datasets are the same, or the sizes differ by more than
        one record (no neighbouring relation relates them).
    """
    shapes = (first.records.shape, second.records.shape)
    if shapes[0][1] != shapes[1][1]:
        raise ParameterError(f"dataset_pair must hold records of one width: S has shape {shapes[0]} and S' has "
                             f"shape {shapes[1]}")
    if _same_dataset(first, second):
        raise ParameterError(f"dataset_pair: S and S' are the same dataset (shape {shapes[0]}), nothing to tell "
                             f"apart; give datasets that differ in one record")
    sizes = (first.n, second.n)
    if sizes[0] == sizes[1]:
        return Relation.REPLACE_ONE
    if abs(sizes[0] - sizes[1]) == 1:
        return Relation.ADD_REMOVE
    raise ParameterError(f"dataset_pair must be neighbouring: as many records in both (replace-one) or one "
                         f"more in one (add/remove), got {sizes[0]} and {sizes[1]} records")


def _same_dataset(first: Any, second: Any) -> bool:
    """True when two datasets hold the same records, injected gradients and scheduled gradients."""
    def same(a: Mapping[int, np.ndarray], b: Mapping[int, np.ndarray]) -> bool:
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

    return (first.records.shape == second.records.shape and np.array_equal(first.records, second.records)
            and same(first.injected, second.injected) and same(first.scheduled, second.scheduled))


def _canary_spec(canary: CanarySpec | Mapping[str, Any] | None, index: Any) -> CanarySpec:
    if canary is None:
        spec = CanarySpec()
    elif isinstance(canary, CanarySpec):
        spec = canary
    elif isinstance(canary, Mapping):
        spec = CanarySpec(**canary)
    else:
        raise ParameterError(f"canary must be a CanarySpec or a mapping of its fields, got canary={canary!r}")
    if index is not None:
        spec = CanarySpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__}, "index": index})
    return spec


def describe_target(table: dict[str, Any], pairs: Sequence[CanaryPair], mechanism: Mechanism) -> dict[str, Any]:
    """Say in the canary table how its target record was chosen and where the trainings started (mechanisms
    that train a model); the keys stay out of other audits' tables, whose ids do not change."""
    if table.get("target") is None:
        table.pop("target", None)
    else:
        table["target"] = list(table["target"]) if isinstance(table["target"], tuple) else table["target"]
    described = sorted({pair.target for pair in pairs if pair.target})
    if described:
        table["target_record"] = described[0] if len(described) == 1 else described
    start = mechanism.start_description
    if start:
        table["start"] = start
    return table


def make_job(mechanism: Mechanism | None = None, *, pair: CanaryPair | None = None,
             dataset_pair: Sequence[Any] | None = None, canary: CanarySpec | Mapping[str, Any] | None = None,
             index: Any = None, score: Any = None, title: str | None = None,
             estimators: Sequence[Any] = (), sequential: bool = False, claimed_epsilon: float | None = None,
             calibration_chunk: int | None = None, **settings: Any) -> AuditJob:
    """The :class:`AuditJob` that :func:`dpaudit.auditing.checks.api.audit` runs (same arguments)."""
    given = [name for name, value in (("pair", pair), ("dataset_pair", dataset_pair), ("canary", canary))
             if value is not None]
    if len(given) > 1:
        raise ParameterError(f"give at most one of pair, dataset_pair and canary, got {', '.join(given)}")
    if mechanism is not None:  # a plain function, a class or a name: refused before anything reads it
        check_mechanism(mechanism)
    unknown = sorted(set(settings) - set(AUDIT_DEFAULTS))
    if unknown:
        raise ParameterError(f"unknown audit setting {unknown[0]!r} (valid: {', '.join(AUDIT_DEFAULTS)})")
    checked = AuditSettings(**settings)  # every setting refused or accepted before anything is built
    scores = resolve_scores(AUTO if score is None else score)
    if pair is not None:
        mechanism = mechanism or pair.mechanism
        pairs, canary_table = (pair,), {"kind": pair.kind, "index": pair.index}
    elif mechanism is None:
        raise ParameterError("audit needs a mechanism (or a canary pair)")
    elif dataset_pair is not None:
        if len(dataset_pair) != 2:
            raise ParameterError(f"dataset_pair must be a pair (S, S'), got {len(dataset_pair)} datasets")
        first, second = (as_dataset(d) for d in dataset_pair)
        # no canary direction is known: a Gaussian likelihood ratio fitted on calibration trials
        pairs = (CanaryPair(mechanism, first, second, np.ones(mechanism.output_dim), None,
                            dataset_pair_relation(first, second), "dataset-pair"),)
        canary_table = {"kind": "dataset-pair"}
    else:
        spec = _canary_spec(canary, index)
        positions = spec.indices(mechanism)
        # sizes refused naming the parameter before any dataset is built (run_audits checks again with its options)
        check_budget(mechanism, len(positions), checked,
                     fitted=len(scores) > 1 or score_needs_calibration(scores[0]))
        pairs = tuple(spec.build(mechanism, position) for position in positions)
        schedule = ("every", "steps", "directions")  # kept only when given: unscheduled audits keep their ids
        canary_table = {key: getattr(spec, key) for key in spec.__dataclass_fields__
                        if key not in schedule or getattr(spec, key) is not None}
        for key in ("steps", "directions"):
            if canary_table.get(key) is not None:
                canary_table[key] = [list(v) if isinstance(v, tuple) else v for v in canary_table[key]]
        canary_table["pair"] = spec.pair_for(mechanism)
        canary_table["direction"] = list(spec.direction) if isinstance(spec.direction, tuple) else spec.direction
        describe_target(canary_table, pairs, mechanism)
    names = [s.name for s in scores]
    shown = AUTO if score is None or score == AUTO else (names[0] if len(names) == 1 else names)
    description = {"mechanism": {"name": mechanism.name, **mechanism.params}, "canary": canary_table,
                   "attack": {"score": shown}}
    return AuditJob(mechanism, pairs, scores, checked,
                    title or f"{mechanism.label} audit", description, estimators=tuple(estimators),
                    sequential=bool(sequential), claimed_epsilon=claimed_epsilon,
                    calibration_chunk=calibration_chunk)
