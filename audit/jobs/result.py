"""The result of an audit: typed, frozen, and serialised with the JSON keys of docs/design.md.

:class:`AuditResult` is built in one place (``dpaudit.auditing.jobs.assemble``) and
never edited afterwards; :meth:`AuditResult.to_dict` gives the JSON document
and :func:`load_result` reads one back (from a dict, a JSON file or a store),
checking its ``schema_version``. Reports render an :class:`AuditResult`.

Keys other tools rely on (never renamed): ``schema_version``,
``mechanism.name``, ``mechanism.params``, ``claims[].name``,
``claims[].applicable``, ``claims[].epsilon``, ``claims[].delta``,
``claims[].index``, ``empirical.epsilon_lower_bound``,
``empirical.confidence``, ``empirical.delta``, ``empirical.trials``,
``empirical.method``, ``empirical.mu_lower_bound``, ``verdict``,
``per_index[]``, ``timings.seconds``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.core.errors import DPAuditError
from dpaudit.mechanisms.accounting.entry import ClaimEntry
from dpaudit.mechanisms.accounting.entry import as_plain as _plain

__all__ = ["SCHEMA_VERSION", "AuditResult", "ClaimEntry", "Empirical", "EstimateEntry", "IndexResult", "ResultError", "load_result"]

#: Version 2: ``empirical.trials`` is always the number of trials per dataset (an int), and
#: results record the code fingerprint (``code_fingerprint``) that produced them.
#: Version 3: ``claims[].applicable`` is never true of a reference (``kind`` ``"reference"`` or
#: ``"lower-bound"``): the applicable claims are bounds; a reference keeps its ``epsilon``. A sequential
#: audit (``dpaudit check``) has an id of its own (``sequential.same_trials_as`` names the audit of the same
#: trials without looks).
SCHEMA_VERSION = 3


class ResultError(DPAuditError):
    """A document is not a dpaudit result, or one of a schema this version cannot read."""


@dataclasses.dataclass(frozen=True, slots=True)
class EstimateEntry:
    """One estimator's certified statement, as results and reports list it (whichever estimators ran).

    ``quantity`` says what is bounded (``"epsilon >="``), ``value`` the bound, ``record`` the estimator's
    full record (its failure-probability split included).
    """

    name: str
    quantity: str
    value: float
    method: str
    confidence: float
    record: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, name: str, estimate: Any) -> "EstimateEntry":
        """From an estimator's record (``audit.statistics.certify.Estimate``)."""
        return cls(name=name, quantity=str(estimate.quantity), value=float(estimate.value),
                   method=str(estimate.method), confidence=float(estimate.confidence),
                   record=_plain(estimate.to_dict()))

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> "EstimateEntry":
        return cls(**{f.name: entry[f.name] for f in dataclasses.fields(cls) if f.name in entry})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True, slots=True)
class Empirical:
    """What the audit certified (and, labelled, what the GDP model suggests).

    ``trials`` is the number of trials per dataset (calibration included);
    ``epsilon``, ``gdp`` and ``profile`` are the estimators' full records,
    with their failure-probability splits.
    """

    epsilon_lower_bound: float
    mu_lower_bound: float
    confidence: float
    delta: float
    trials: int
    method: str
    model_based_epsilon: float | None
    epsilon: Mapping[str, Any]
    gdp: Mapping[str, Any]
    profile: Mapping[str, Any]
    index: int | None = None
    per_index_confidence: float | None = None
    estimates: tuple[EstimateEntry, ...] = ()

    _OPTIONAL = ("index", "per_index_confidence", "estimates")

    @classmethod
    def from_certification(cls, certification: Any, trials: int) -> "Empirical":
        """From a :class:`~dpaudit.auditing.jobs.streaming.Certification` (every estimator that ran is listed)."""
        eps, gdp = certification.epsilon, certification.gdp
        profile = certification.estimates.get("profile")
        return cls(
            epsilon_lower_bound=eps.epsilon_lower_bound, mu_lower_bound=gdp.mu_lower_bound,
            confidence=eps.confidence, delta=eps.delta, trials=int(trials), method=eps.method,
            model_based_epsilon=gdp.model_based_epsilon, epsilon=eps.to_dict(), gdp=gdp.to_dict(),
            profile=profile.to_dict() if profile is not None else {},
            estimates=tuple(EstimateEntry.of(name, record) for name, record in certification.estimates.items()))

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> "Empirical":
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [name for name in names if name not in entry and name not in cls._OPTIONAL]
        if missing:
            raise ResultError(f"empirical has no {missing[0]!r}")
        fields = {name: entry[name] for name in names if name in entry}
        fields["estimates"] = tuple(EstimateEntry.from_dict(e) for e in entry.get("estimates") or ())
        return cls(**fields)

    def replace(self, **changes: Any) -> "Empirical":
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        entry = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "estimates"}
        entry["estimates"] = [e.to_dict() for e in self.estimates]
        for name in self._OPTIONAL:
            if entry[name] in (None, []):
                del entry[name]
        return entry


@dataclasses.dataclass(frozen=True, slots=True)
class IndexResult:
    """The audit of one canary position."""

    index: int | None
    empirical: Empirical
    claims: tuple[ClaimEntry, ...]
    verdict: str
    verdict_reason: str
    violations: tuple[str, ...]
    tightness: Mapping[str, float | None]
    distributions: Mapping[str, Any]
    ceiling: float | None
    theory_slack: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: how the ceiling's score law was obtained: "" (none, or exact) or how it was simulated
    ceiling_source: str = ""
    #: ``(low, high)``: what an ideal threshold audit certifies at these trials, 95% of the time
    #: (``audit.statistics.ceiling.statistical_ceiling_band``); ``None`` with no ceiling
    ceiling_band: tuple[float, float] | None = None

    @property
    def above_ceiling_band(self) -> bool:
        """True when the certified bound lies above the band's top: notable, said in every report."""
        return (self.ceiling_band is not None
                and self.empirical.epsilon_lower_bound > self.ceiling_band[1])

    @property
    def below_ceiling_band(self) -> bool:
        """True when the certified bound lies below the band's bottom: the test is weaker than the ideal one."""
        return (self.ceiling_band is not None
                and self.empirical.epsilon_lower_bound < self.ceiling_band[0])

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> "IndexResult":
        return cls(index=entry["index"], empirical=Empirical.from_dict(entry["empirical"]),
                   claims=tuple(ClaimEntry.from_dict(c) for c in entry["claims"]), verdict=entry["verdict"],
                   verdict_reason=entry["verdict_reason"], violations=tuple(entry["violations"]),
                   tightness=dict(entry["tightness"]), distributions=entry["distributions"],
                   ceiling=entry.get("ceiling"), theory_slack=dict(entry.get("theory_slack") or {}),
                   ceiling_source=entry.get("ceiling_source", ""),
                   ceiling_band=tuple(entry["ceiling_band"]) if entry.get("ceiling_band") else None)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "empirical": self.empirical.to_dict(),
                "claims": [c.to_dict() for c in self.claims], "verdict": self.verdict,
                "verdict_reason": self.verdict_reason, "violations": list(self.violations),
                "tightness": dict(self.tightness), "distributions": _plain(self.distributions),
                "ceiling": self.ceiling, "ceiling_source": self.ceiling_source,
                "ceiling_band": list(self.ceiling_band) if self.ceiling_band is not None else None,
                "theory_slack": _plain(self.theory_slack)}


@dataclasses.dataclass(frozen=True, slots=True)
class AuditResult:
    """One finished audit: what ran, what was certified, every claim, the verdict.

    The top-level ``empirical`` and ``claims`` are those of the canary
    position with the largest certified bound; ``per_index`` holds every
    position. Use :meth:`to_dict` for the JSON document.
    """

    audit_id: str
    title: str
    mechanism: Mapping[str, Any]
    canary: Mapping[str, Any]
    attack: Mapping[str, Any]
    audit: Mapping[str, Any]
    seed: int
    code_version: str
    code_fingerprint: str
    config_source: str
    empirical: Empirical
    claims: tuple[ClaimEntry, ...]
    per_index: tuple[IndexResult, ...]
    verdict: str
    verdict_reason: str
    violations: tuple[str, ...]
    tightness: Mapping[str, float | None]
    timings: Mapping[str, Any]
    store: str | None = None
    schema_version: int = SCHEMA_VERSION
    theory_slack: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: A sequential audit's looks (``audit.statistics.sequential``): planned looks, the failure probability per look,
    #: where it stopped; empty for an audit that certifies once.
    sequential: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: A one-run audit's design record (``audit.jobs.one_run_result``): canaries, runs, the certified statement and
    #: its assumptions in the words every report prints; empty for an audit of many trainings.
    one_run: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: A library run's conformance (``audit.jobs.conformance``): the relation, the engine's claim, the certified
    #: bound, its accountant's assumptions checked against the code and the ones the evidence points at; empty
    #: for mechanisms that state no assumptions.
    conformance: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: An anytime-valid audit's record (``audit.jobs.anytime_result``): why and when it stopped, each position's
    #: confidence sequence and the wealth of the e-process testing the claim; empty for the other designs.
    anytime: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Where a violation was certified through ``float-bits``: the same mechanism's release rounded to a grid and
    #: its bits below the grid, audited on fresh trials (``audit.jobs.float_rounding``): whether the violation is a
    #: float artefact, a defect of the mechanism itself, or both; empty otherwise.
    float_rounding: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def epsilon_lower_bound(self) -> float:
        """The largest certified epsilon lower bound over the canary positions."""
        return self.empirical.epsilon_lower_bound

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (plain dicts, lists and numbers)."""
        return {
            "schema_version": self.schema_version, "audit_id": self.audit_id, "title": self.title,
            "mechanism": _plain(self.mechanism), "canary": _plain(self.canary), "attack": _plain(self.attack),
            "audit": _plain(self.audit), "seed": self.seed, "code_version": self.code_version,
            "code_fingerprint": self.code_fingerprint, "config_source": self.config_source,
            "empirical": self.empirical.to_dict(), "claims": [c.to_dict() for c in self.claims],
            "per_index": [row.to_dict() for row in self.per_index], "verdict": self.verdict,
            "verdict_reason": self.verdict_reason, "violations": list(self.violations),
            "tightness": dict(self.tightness), "timings": _plain(self.timings), "store": self.store,
            "theory_slack": _plain(self.theory_slack),
            **({"sequential": _plain(self.sequential)} if self.sequential else {}),
            **({"one_run": _plain(self.one_run)} if self.one_run else {}),
            **({"conformance": _plain(self.conformance)} if self.conformance else {}),
            **({"anytime": _plain(self.anytime)} if self.anytime else {}),
            **({"float_rounding": _plain(self.float_rounding)} if self.float_rounding else {}),
        }

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> "AuditResult":
        """Read a JSON document back; :class:`ResultError` when it is not a result of this schema."""
        if not isinstance(document, Mapping) or "schema_version" not in document:
            raise ResultError("not a dpaudit result (no schema_version)")
        version = document["schema_version"]
        if version != SCHEMA_VERSION:
            raise ResultError(f"result schema_version {version!r} is not supported by this dpaudit "
                              f"(reads {SCHEMA_VERSION}); rerun the audit")
        try:
            return cls(
                audit_id=str(document["audit_id"]), title=str(document["title"]),
                mechanism=document["mechanism"], canary=document["canary"], attack=document["attack"],
                audit=document["audit"], seed=document["seed"], code_version=str(document["code_version"]),
                code_fingerprint=str(document["code_fingerprint"]),
                config_source=str(document["config_source"]),
                empirical=Empirical.from_dict(document["empirical"]),
                claims=tuple(ClaimEntry.from_dict(c) for c in document["claims"]),
                per_index=tuple(IndexResult.from_dict(row) for row in document["per_index"]),
                verdict=str(document["verdict"]), verdict_reason=str(document["verdict_reason"]),
                violations=tuple(document["violations"]), tightness=dict(document["tightness"]),
                timings=document["timings"], store=document.get("store"), schema_version=version,
                theory_slack=dict(document.get("theory_slack") or {}),
                sequential=dict(document.get("sequential") or {}),
                one_run=dict(document.get("one_run") or {}),
                conformance=dict(document.get("conformance") or {}),
                anytime=dict(document.get("anytime") or {}),
                float_rounding=dict(document.get("float_rounding") or {}))
        except (KeyError, TypeError) as exc:
            raise ResultError(f"not a complete dpaudit result (missing or malformed {exc})") from None


def load_result(source: "AuditResult | Mapping[str, Any] | str | Path", *, store: str | Path | None = None
                ) -> AuditResult:
    """An :class:`AuditResult` from a result, a JSON document, a JSON file, or an audit id in ``store``.

    Raises
    ------
    ResultError
        For a document that is not a dpaudit result of this schema.
    """
    if isinstance(source, AuditResult):
        return source
    if isinstance(source, Mapping):
        return AuditResult.from_dict(source)
    path = Path(source)
    if path.is_file():
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResultError(f"{path} is not a JSON result ({type(exc).__name__})") from None
        return AuditResult.from_dict(document)
    if store is None:
        raise ResultError(f"no result file {source!s} (give a JSON file, or an audit id with a store)")
    # the store (NumPy, SQLite) loads only to read a result from one: the command line's start-up stays light
    from dpaudit.auditing.jobs.store import Store

    with Store(store) as opened:
        return AuditResult.from_dict(opened.get_result(str(source)))
