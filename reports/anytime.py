"""What the reports say and draw of an anytime-valid audit (``result.anytime``, docs/theory.md 13).

Every sentence reads the result's own record: the statement and the one-sentence meaning the design wrote,
why and when it stopped, and the wealth of each position's e-process testing the claim. The figure is
the running certified bound against trials per dataset, with the claim it was watched against
(``reports.plots.running_bound``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult

__all__ = ["ANYTIME_CAPTION", "anytime_lines", "anytime_sentences"]

#: The caption of the running bound's figure (``reports.plots.running_bound``)
ANYTIME_CAPTION = ("The certified lower bound against trials per dataset: every point of the line holds at the stated "
                   "confidence together, so where the line crosses the claim is a certified violation whenever one "
                   "looks.")


def _wealth(record: dict[str, Any]) -> str:
    log_wealth = record.get("claim_log_wealth")
    if log_wealth is None:
        return ""
    shown = f"{math.exp(log_wealth):.3g}" if log_wealth < 700 else f"e^{log_wealth:.0f}"
    return (f"the e-process testing epsilon <= {record['claim_cell_top']:.4g} holds wealth {shown} "
            f"(it rejects at 1/alpha = {1 / record['alpha']:.3g})")


def anytime_sentences(result: AuditResult) -> list[str]:
    """The sentences of the anytime section, each from the fields of ``result.anytime`` it speaks of."""
    record = result.anytime
    sentences = [str(record.get("statement", "")), str(record.get("meaning", ""))]
    positions = record.get("positions") or {}
    for key, entry in positions.items():
        wealth = _wealth(entry)
        if wealth:
            sentences.append(f"{wealth[0].upper()}{wealth[1:]}." if len(positions) == 1
                             else f"At canary index {key}, {wealth}.")
    fits = record.get("score_fits") or {}
    scores = record.get("scores") or {}
    for key, name in scores.items():
        where = "" if len(scores) == 1 else f" at canary index {key}"
        sentences.append(f"The score{where} ({name}) and every test were fixed from earlier trials only, before the "
                         f"trials they judged were seen; the score was fitted {fits.get(key, 0)} time(s) as the "
                         f"trials seen doubled.")
    return [s for s in sentences if s]


def anytime_lines(result: AuditResult, md: Callable[[Any], str]) -> list[str]:
    """The Markdown section: the sentences, then the steps of the bound (trial, bound); ``md`` escapes a value
    (the text report's ``md``)."""
    lines = ["## Anytime-valid audit", ""]
    lines += [f"{md(sentence)}\n" for sentence in anytime_sentences(result)]
    for key, entry in (result.anytime.get("positions") or {}).items():
        steps = entry.get("trajectory") or []
        if not steps:
            continue
        shown = steps if len(steps) <= 8 else [steps[i * (len(steps) - 1) // 7] for i in range(8)]
        where = "" if len(result.anytime["positions"]) == 1 else f" (canary index {md(key)})"
        lines += [f"Where the certified bound rose{where} (trials per dataset: bound): "
                  + ", ".join(f"{int(t)}: {b:.3g}" for t, b in shown) + ".", ""]
    return lines
