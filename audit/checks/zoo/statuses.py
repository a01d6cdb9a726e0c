"""The statuses of the zoos' audits, and what each means (the legend under ``dpaudit zoo``'s tables).

Every zoo (the broken mechanisms, the black-box suite, the DP-SGD and DP-MF
training zoos) names a case's outcome by one of these constants, and the
command line explains the ones its table shows from :data:`MEANINGS`, so a
status and its legend cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BEYOND_REACH", "CAUGHT", "FAILURES", "FALSE_ALARM", "MEANINGS", "MISSED", "PASSED", "SKIPPED",
           "WITHIN_CLAIM", "status_legend"]

CAUGHT = "caught"
MISSED = "missed"
WITHIN_CLAIM = "within-claim"
BEYOND_REACH = "beyond-reach"
PASSED = "passed"
FALSE_ALARM = "false-alarm"
SKIPPED = "skipped"

#: Each status, in the legend's order, and what it means.
MEANINGS: dict[str, str] = {
    CAUGHT: "a bug beyond its claim, flagged",
    MISSED: "a bug beyond its claim, not flagged (a failure)",
    WITHIN_CLAIM: "a bug whose true epsilon stays within its claim (no sound audit can flag it on this instance)",
    BEYOND_REACH: "a bug beyond its claim whose ceiling, the most these trials can certify, lies at or below the "
                  "claim (not a failure)",
    PASSED: "a correct version, not flagged",
    FALSE_ALARM: "a correct version flagged (a failure)",
    SKIPPED: "not audited: its optional library is not installed",
}

#: The statuses that make ``dpaudit zoo`` exit 1.
FAILURES = (MISSED, FALSE_ALARM)


def status_legend(statuses: Iterable[str]) -> str:
    """One legend line for the statuses a table shows (in :data:`MEANINGS`' order; ``""`` for none).

    Parameters
    ----------
    statuses : iterable of str
        The status of each row.

    Returns
    -------
    str
        ``"status: caught = ...; passed = ...\\n"``.
    """
    shown = set(statuses)
    unknown = shown - set(MEANINGS)
    if unknown:
        raise ValueError(f"internal: status {sorted(unknown)[0]!r} has no meaning in MEANINGS")  # pragma: no cover
    parts = [f"{status} = {meaning}" for status, meaning in MEANINGS.items() if status in shown]
    return f"status: {'; '.join(parts)}\n" if parts else ""
