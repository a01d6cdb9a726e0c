"""The ``[audit]`` keys of the designs in a config, and the design object a config builds from them.

``design = "one-run"`` with ``canaries``, ``runs`` and ``one_run_method``
(defaults in :data:`dpaudit.auditing.jobs.one_run_design.ONE_RUN_DEFAULTS`); the
keys of the design of many trainings (``trials``, ``threshold``, ...),
``[attack]`` and every ``[canary]`` key but ``kind`` are refused, naming
them (docs/guide.md, "One training run or many"). :func:`config_design`
turns the resolved tables into ``OneRun`` or ``ManyRuns``
(:mod:`dpaudit.auditing.jobs.job_designs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpaudit.auditing.jobs.job_designs import MANY_RUNS_SETTINGS, ManyRuns, OneRun, respelled
from dpaudit.auditing.jobs.one_run_design import DESIGNS, ONE_RUN_DEFAULTS
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import suggestion

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.config import AuditConfig

__all__ = ["config_design", "one_run_keys"]


def _fail(source: str, table: str, key: str, message: str) -> ParameterError:
    """The error of one key (``audit.jobs.config`` raises it again as its ``ConfigError``)."""
    return ParameterError(f"{source}: [{table}] {key}: {message}")


def one_run_keys(raw: dict[str, Any], source: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``raw`` without the ``[audit]`` keys of the design (``design``, ``canaries``, ``runs``,
    ``one_run_method``), and the one-run table (``None`` for the design of many trainings)."""
    audit = dict(raw.get("audit", {}))
    design = audit.pop("design", "many-runs")
    given = {key: audit.pop(key) for key in ONE_RUN_DEFAULTS if key in audit}
    if design not in DESIGNS:
        raise _fail(source, "audit", "design", f"must be one of {', '.join(DESIGNS)}, got design={design!r}"
                    f"{suggestion(design, DESIGNS) if isinstance(design, str) else ''}")
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
    extra = [key for key in canary if key != "kind"]
    if extra:
        raise _fail(source, "canary", extra[0], "does not apply to design = 'one-run' (the canaries are drawn "
                                                "from [audit] seed); only kind is taken")
    attack = raw.get("attack", {})
    if attack:
        raise _fail(source, "attack", next(iter(attack)), "does not apply to design = 'one-run' (the score "
                                                          "follows the canary kind)")
    table = {**ONE_RUN_DEFAULTS, **given}
    return {**raw, "audit": audit}, table


def config_design(config: AuditConfig) -> ManyRuns | OneRun:
    """The design object of a resolved config: ``OneRun`` from its one-run table and ``[canary] kind``, else
    ``ManyRuns`` from ``[audit]``; errors name the config and the key."""
    table = config.one_run
    if table is None:
        return ManyRuns(**{key: config.audit[key] for key in MANY_RUNS_SETTINGS})
    kind = {"kind": config.canary.kind} if config.canary.kind else {}  # else the design's default
    try:
        return OneRun(canaries=table["canaries"], runs=table["runs"], method=table["one_run_method"], **kind)
    except ParameterError as exc:
        text = str(respelled(exc, OneRun.SPELLING))
        raise ParameterError(f"{config.source}: [{'canary' if text.startswith('kind') else 'audit'}] {text}") \
            from None
