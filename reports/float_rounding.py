"""What the reports say of a violation certified through ``float-bits``: does it survive rounding?

Every sentence reads the result's own record (``result.float_rounding``,
written by ``audit.jobs.float_rounding``): the outcome of each position (a
float artefact, a defect of the mechanism itself, or both), the rounded
release's certified bound and score, the low-bit test's p-value and level,
the grid, and what the two statements' confidence is. The Markdown report,
the HTML report and the command line's summary print these sentences
(docs/theory.md 3.5.1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult

__all__ = ["OUTCOME_WORDS", "TITLE", "float_rounding_lines", "float_rounding_sentences", "grid_text",
           "outcome_sentence", "summary_line"]

#: Each outcome in the reports' words
OUTCOME_WORDS = {"float artefact": "a float artefact",
                 "mechanism defect": "a defect of the mechanism itself",
                 "both": "both a float leak and a defect of the mechanism itself"}
#: The section's title in the Markdown and HTML reports
TITLE = "Float leak or defect of the mechanism?"


def _fmt(value: Any, spec: str = ".4g") -> str:
    """A number formatted with ``spec``; anything else (an edited file) as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return format(value, spec)
    return "n/a" if value is None else str(value)


def _power(value: Any) -> str:
    """``2^-9`` for a power of two, else the number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        mantissa, exponent = math.frexp(value)
        if mantissa == 0.5:
            return f"2^{exponent - 1}"
    return _fmt(value, "g")


def grid_text(grids: Any) -> str:
    """``a grid of 2^-9`` (one grid, or the same for every coordinate), else the range by coordinate."""
    values = list(grids) if isinstance(grids, (list, tuple)) else [grids]
    if len(set(map(str, values))) == 1:
        return f"a grid of {_power(values[0])}"
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) != len(values):
        return "grids of " + ", ".join(map(_power, values))
    return f"grids of {_power(min(numbers))} to {_power(max(numbers))} by coordinate"


def _where(entry: Mapping[str, Any], several: bool) -> str:
    index = entry.get("index")
    return f"At canary position {index}: " if several and index is not None else ""


def outcome_sentence(entry: Mapping[str, Any], several: bool = False) -> str:
    """The outcome of one position in one sentence: whether the violation survives rounding, and what it is."""
    where, outcome = _where(entry, several), entry.get("outcome")
    if outcome not in OUTCOME_WORDS:
        return f"{where}the violation could not be attributed: {entry.get('reason') or 'no outcome recorded'}."
    if outcome == "float artefact":
        return f"{where}the violation does not survive rounding: {OUTCOME_WORDS[outcome]}."
    if outcome == "mechanism defect":
        return f"{where}the violation survives rounding: {OUTCOME_WORDS[outcome]}."
    return f"{where}the violation survives rounding, and the low bits leak too: {OUTCOME_WORDS[outcome]}."


def _capital(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def summary_line(entry: Mapping[str, Any], several: bool = False) -> str:
    """One line for the command line's summary: the outcome, and the rounded release's bound and score."""
    rounded = entry.get("rounded") or {}
    shown = (f" (rounded to {grid_text(entry.get('grids'))}: epsilon >= {_fmt(rounded.get('epsilon_lower_bound'))}, "
             f"score {rounded.get('score')})" if rounded else "")
    return _capital(outcome_sentence(entry, several)).rstrip(".") + shown + "."


def _evidence(entry: Mapping[str, Any]) -> list[str]:
    """What each of the two statements found, for one position."""
    rounded, bits = entry.get("rounded") or {}, entry.get("low_bits") or {}
    claimed = rounded.get("claims") or {}
    violations = ", ".join(f"{name} ({_fmt(claimed[name])})" if name in claimed else str(name)
                           for name in rounded.get("violations") or ())
    sentences = [
        f"Rounded to {grid_text(entry.get('grids'))}, the same mechanism certifies epsilon >= "
        f"{_fmt(rounded.get('epsilon_lower_bound'), '.4g')} (score {rounded.get('score')}, "
        f"{_fmt(rounded.get('trials'), 'd')} fresh trials per dataset, confidence {_fmt(rounded.get('confidence'))}), "
        + (f"above {violations}: the values themselves violate the claim, whatever their low bits."
           if violations else "which violates no claim: rounding removes the violation.")]
    shown, log10_p = bits.get("p_value"), bits.get("log10_p_value")
    if shown == 0 and isinstance(log10_p, (int, float)) and math.isfinite(log10_p):  # below the smallest float
        shown = f"10^{math.floor(log10_p) + 1}"
    p_value = f"p <= {_fmt(shown, '.2g')} at level {_fmt(bits.get('level'), '.3g')}"
    test = (f"coordinate {bits.get('coordinate')}, feature {bits.get('feature')}, Bonferroni over "
            f"{_fmt(bits.get('tests'), 'd')} tests")
    if entry.get("float_leak"):
        sentences.append(f"Given its rounded value, the bits below the grid depend on the dataset ({p_value}; "
                         f"{test}): a float leak.")
    else:
        sentences.append(f"The bits below the grid were not shown to depend on the dataset given the rounded value "
                         f"({p_value}; {test}).")
    coarse = entry.get("coarse_coordinates") or []
    if coarse:
        sentences.append("For coordinate(s) " + ", ".join(str(c + 1) if isinstance(c, int) else str(c)
                                                          for c in coarse)
                         + " the grid is coarser than 2^-10 of their spread (their float spacing asks for it): the "
                         "rounded release reads less of them.")
    return sentences


def float_rounding_sentences(result: AuditResult) -> list[str]:
    """Every sentence of the section (empty where no violation came through ``float-bits``)."""
    record = result.float_rounding
    if not record:
        return []
    positions = record.get("positions") or []
    several = len(result.per_index) > 1
    sentences = []
    for entry in positions:
        sentences.append(_capital(outcome_sentence(entry, several)))
        if entry.get("outcome") in OUTCOME_WORDS:
            sentences += _evidence(entry)
    confidence, joint = record.get("confidence"), record.get("joint_confidence")
    together = 1 - 2 * (1 - joint) if isinstance(joint, (int, float)) and not isinstance(joint, bool) else None
    sentences.append(
        "Why: the violation was certified through float-bits, which reads the low bits of the released floats, "
        "where a float leak and a defect of the mechanism (a sensitivity bug) look alike. The grid is the largest "
        "power of two at most 2^-10 of the outputs' interquartile range (fine beside the noise) and at least 2^16 "
        "times their float spacing (coarse beside the floats: no bit below it is left to read); rounding is a "
        "post-processing, so every claim applies to the rounded release. Both statements rest on fresh trials, "
        f"independent of the headline's, each at confidence {_fmt(confidence)} and together at {_fmt(joint)} (a "
        f"union bound); with the headline, all at {_fmt(together)} (docs/theory.md 3.5.1).")
    return sentences


def float_rounding_lines(result: AuditResult, md: Callable[[Any], str]) -> list[str]:
    """The Markdown section; ``md`` escapes a value (the text report's ``md``)."""
    sentences = float_rounding_sentences(result)
    if not sentences:
        return []
    return [f"## {TITLE}", ""] + [f"{md(sentence)}\n" for sentence in sentences]
