"""The ``[audit]`` keys of the designs in a config, and the design object a config builds from them.

``design = "one-run"`` with ``canaries``, ``runs`` and ``one_run_method``
(defaults in :data:`dpaudit.auditing.jobs.one_run_design.ONE_RUN_DEFAULTS`) and
``[canary] directions`` (``"random"`` or ``"dirac"``, gradient canaries); the
keys of the design of many trainings (``trials``, ``threshold``, ...),
``[attack]`` and every ``[canary]`` key but ``kind`` and ``directions`` are
refused, naming them (docs/guide.md, "One training run or many"). ``design = "anytime"``
takes ``budget``, ``first`` and ``futility`` (docs/theory.md 13) and refuses
``trials``, ``threshold`` and ``calibration_fraction``. :func:`config_design`
turns the resolved tables into ``OneRun``, ``Anytime`` or ``ManyRuns``
(:mod:`dpaudit.auditing.jobs.job_designs`, :mod:`dpaudit.auditing.jobs.anytime_design`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpaudit.auditing.jobs.anytime_design import Anytime
from dpaudit.auditing.jobs.job_designs import MANY_RUNS_SETTINGS, ManyRuns, OneRun, respelled
from dpaudit.auditing.jobs.one_run_design import DESIGNS, ONE_RUN_DEFAULTS
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import suggestion

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.config import AuditConfig

__all__ = ["ANYTIME_KEYS", "config_design", "one_run_keys"]

#: The ``[audit]`` keys of ``design = "anytime"`` (``Anytime``'s fields but ``chunk_size``, an ``[audit]`` setting)
ANYTIME_KEYS = ("budget", "first", "futility")


def _fail(source: str, table: str, key: str, message: str) -> ParameterError:
    """The error of one key (``audit.jobs.config`` raises it again as its ``ConfigError``)."""
    return ParameterError(f"{source}: [{table}] {key}: {message}")


def _anytime_keys(raw: dict[str, Any], audit: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``design = "anytime"``: its keys ``budget``, ``first``, ``futility`` (``chunk_size`` is the largest chunk);
    ``trials``, ``threshold`` and ``calibration_fraction`` are refused, naming the key."""
    for key in ("trials", "threshold", "calibration_fraction"):
        if key in audit:
            hint = "the budget is budget" if key == "trials" else "each chunk's test is placed on the earlier ones"
            raise _fail(source, "audit", key, f"does not apply to design = 'anytime' ({hint}); remove it")
    table = {"design": "anytime", **{key: audit.pop(key) for key in ANYTIME_KEYS if key in audit}}
    return {**raw, "audit": audit}, table


def one_run_keys(raw: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``raw`` without the ``[audit]`` keys of the design (``design``, ``canaries``, ``runs``,
    ``one_run_method``; ``budget``, ``first``, ``futility``), and the design's table (``None`` for the design of
    many trainings; ``{"design": "anytime", ...}`` for the anytime-valid one)."""
    audit = dict(raw.get("audit", {}))
    design = audit.pop("design", "many-runs")
    given = {key: audit.pop(key) for key in ONE_RUN_DEFAULTS if key in audit}
    names = (*DESIGNS, "anytime")
    if design not in names:
        raise _fail(source, "audit", "design", f"must be one of {', '.join(names)}, got design={design!r}"
                    f"{suggestion(design, names) if isinstance(design, str) else ''}")
    elsewhere = [key for key in ANYTIME_KEYS if key in audit]
    if elsewhere and design != "anytime":
        raise _fail(source, "audit", elsewhere[0], "applies to design = 'anytime' only; add it or remove the key")
    named = raw.get("canary", {}).get("directions") if isinstance(raw.get("canary"), dict) else None
    if isinstance(named, str) and design != "one-run":  # a list is a scheduled canary's (attacks.canaries)
        raise _fail(source, "canary", "directions", f"directions={named!r} applies to design = 'one-run' only (a "
                                                    f"scheduled canary's directions are a list of vectors)")
    if design == "anytime":
        if given:
            raise _fail(source, "audit", next(iter(given)), "applies to design = 'one-run' only; remove it")
        return _anytime_keys(raw, audit, source)
    if design == "many-runs":
        if given:
            key = next(iter(given))
            raise _fail(source, "audit", key, "applies to design = 'one-run' only; add it or remove the key")
        return raw, None
    for key in MANY_RUNS_SETTINGS:
        if key in audit:
            raise _fail(source, "audit", key, "does not apply to design = 'one-run' (one training run, "
                                              "canaries instead of trials); remove it")
    canary = raw.get("canary", {})
    canary = dict(canary) if isinstance(canary, dict) else canary  # not a table: refused as [canary] later
    directions = {"directions": canary.pop("directions")} if isinstance(canary, dict) and "directions" in canary \
        else {}
    extra = [key for key in canary if key != "kind"] if isinstance(canary, dict) else []
    if extra:
        raise _fail(source, "canary", extra[0], "does not apply to design = 'one-run' (the canaries are drawn "
                                                "from [audit] seed); only kind and directions are taken")
    attack = raw.get("attack", {})
    if attack:
        raise _fail(source, "attack", next(iter(attack)), "does not apply to design = 'one-run' (the score "
                                                          "follows the canary kind)")
    table = {**ONE_RUN_DEFAULTS, **given, **directions}
    return {**raw, "audit": audit, **({"canary": canary} if "canary" in raw else {})}, table


def config_design(config: AuditConfig) -> ManyRuns | OneRun | Anytime:
    """The design object of a resolved config: ``OneRun`` from its one-run table and ``[canary] kind`` (and
    ``directions``),
    ``Anytime`` from its anytime table, else ``ManyRuns`` from ``[audit]``; errors name the config and the key."""
    table = config.one_run
    anytime = config.resolved.get("anytime")
    if anytime is not None:
        try:
            return Anytime(**{key: anytime[key] for key in ANYTIME_KEYS if key in anytime},
                           chunk_size=config.audit["chunk_size"])
        except ParameterError as exc:
            raise ParameterError(f"{config.source}: [audit] {exc}") from None
    if table is None:
        return ManyRuns(**{key: config.audit[key] for key in MANY_RUNS_SETTINGS})
    kind = {"kind": config.canary.kind} if config.canary.kind else {}  # else the design's default
    try:
        return OneRun(canaries=table["canaries"], runs=table["runs"], method=table["one_run_method"],
                      directions=table.get("directions"), **kind)
    except ParameterError as exc:
        text = str(respelled(exc, OneRun.SPELLING))
        table_name = "canary" if text.startswith(("kind", "directions")) else "audit"
        raise ParameterError(f"{config.source}: [{table_name}] {text}") from None
