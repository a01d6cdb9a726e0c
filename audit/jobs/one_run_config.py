"""The ``[audit]`` keys of the one-run design in a config, and the ``OneRunJob`` of such a config.

``design = "one-run"`` with ``canaries``, ``runs`` and ``one_run_method``
(defaults in :data:`dpaudit.auditing.jobs.one_run_design.ONE_RUN_DEFAULTS`); the
keys of the design of many trainings (``trials``, ``threshold``, ...),
``[attack]`` and every ``[canary]`` key but ``kind`` are refused, naming
them (docs/guide.md, "One training run or many").
"""

from __future__ import annotations

from typing import Any

from dpaudit.auditing.jobs.job import AuditSettings
from dpaudit.auditing.jobs.one_run_design import DESIGNS, ONE_RUN_DEFAULTS, OneRunJob
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import suggestion

__all__ = ["one_run_job", "one_run_keys"]


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
    for key in ("trials", "threshold", "chunk_size", "calibration_fraction"):
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


def one_run_job(config: Any, sequential: bool) -> Any:
    """The ``OneRunJob`` of a one-run config; errors name the config and the key."""
    table = config.one_run or {}
    settings = AuditSettings(**config.audit)
    description = {key: config.resolved[key] for key in ("mechanism", "canary")}
    try:
        return OneRunJob(config.mechanism, table["canaries"], settings, config.title, description, config.source,
                         kind=config.canary.kind or "gradient", runs=table["runs"], method=table["one_run_method"],
                         sequential=sequential)
    except ParameterError as exc:
        text = str(exc)
        table_name = "canary" if text.startswith("kind") else "audit"
        raise ParameterError(f"{config.source}: [{table_name}] {text}") from None
