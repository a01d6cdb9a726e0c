"""Every figure quoted in the prose and tables of README.md and docs/guide.md is checked (issue 73).

``tests/package/test_distribution.py`` runs every Python block of these documents and compares what the text
says a block prints; this file covers the figures outside code blocks. Each number with a decimal point there
is either exempt by a named rule (:data:`EXEMPT`: a version, a section reference, a licence, a constant the text
sets, a timing phrased as a measurement) or registered in ``FIGURES`` (``tests/package/doc_figure_registry.py``)
under the line that holds it, with how it is checked:

* :class:`Recomputed` (a): a claim, bound or exact value cheap enough to recompute here (well under 2 s each),
  compared at the printed precision (rounded to the nearest last digit, as the documents round);
* :class:`AssertedBy` (b): a test elsewhere asserts it; the test must exist and its source must hold the
  figure's literal, so that the figure and its test cannot drift apart silently. :class:`Printed` is the
  docs test's own kind: the figure is part of what the text says a block prints, which that test compares
  with the block's output (within its tolerance: 2%, or two units of the last digit);
* :class:`Recorded` (c): a measurement too slow for CI; its command, date, commit and output are kept under
  ``benchmarks/records/doc_figures/``, and the figure must appear in that output. A measurement too slow to
  run even once for this check keeps the record it was published from, and its record says so.

A figure that is neither exempt nor registered fails, naming the document, line and figure; so does a
registered line whose anchor is gone, or whose figures are no longer the registered ones (a figure edited in
the text without its check). The last tests show that each check can fail.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.package.doc_figure_registry import (
    FIGURES,
    GUIDE,
    JAX_BANDMF,
    OPACUS_TEST,
    RECOMPUTE,
    ROOT,
    A,
    AssertedBy,
    Check,
    Line,
    Printed,
    Recomputed,
    Recorded,
)
from tests.package.test_distribution import _quoted_prints

DOCUMENTS = ("README.md", "docs/guide.md")
RECORDS = ROOT / "benchmarks" / "records" / "doc_figures"

#: A number with a decimal point (``3.5.1`` whole); a sign is never part of it
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?![\w.]*\d)")


# -- what is exempt: a rule per kind of number that is no result ----------------------------------------------
#: ``(rule, pattern)``: the group ``figure`` of each match is exempt; every other number must be registered
EXEMPT: tuple[tuple[str, re.Pattern[str]], ...] = tuple((rule, re.compile(pattern)) for rule, pattern in (
    ("a Python version", r"Python (?P<figure>\d+\.\d+)"),
    ("a library release", r"\b(?:diffprivlib|OpenDP|python-dp|Opacus|opacus|jax_privacy|torch|scipy) "
                          r"(?P<figure>\d+(?:\.\d+)+)"),
    ("a licence", r"License (?P<figure>\d+\.\d+)"),
    ("a section of docs/theory.md", r"docs/theory\.md`?(?: section)? (?P<figure>\d+(?:\.\d+)+)"),
    ("a confidence level the text sets", r"\bconfidence (?P<figure>0\.\d+)"),
    ("the ceiling band's quantile levels", r"(?<![\d.])(?P<figure>2\.5|97\.5)%"),
    ("the target of `dpaudit plan --target 0.9`", r"\breaches (?P<figure>0\.\d+) of the exact value"),
    ("an instance's parameter", r"\bcoefficients \(1, -(?P<figure>\d+\.\d+)\)"),
    ("an instance's parameter", r"\bnoise multiplier\s+(?P<figure>\d+\.\d+)"),
    ("a timing phrased as a measurement", r"\b(?:about|in) (?P<figure>\d+\.\d+) ?(?:s|min|minutes|hours) "
                                          r"(?:of CPU|on (?:one|\d+)(?: shared)? (?:CPU )?cores?)"),
))
#: Inside an inline code span, what the code sets: ``>=v`` or ``,<v`` (a version range), or ``name = v``,
#: ``name=v``, ``--option v``, ``call(v`` (an input the reader types): never a result
CODE_INPUTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a version range in code", re.compile(r"(?:^|,)[<>]=?$")),
    ("an input set in code", re.compile(r"(?:=\s*|--[\w-]+\s+|\()$")),
)


def _prose(text: str) -> str:
    """``text`` with every fenced code block blanked (its lines kept, empty), so offsets keep their lines."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def _code_spans(prose: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each inline code span, backticks paired within a paragraph (as Markdown pairs them)."""
    spans, offset = [], 0
    for paragraph in re.split(r"(\n\s*\n)", prose):
        ticks = [offset + m.start() for m in re.finditer(r"`", paragraph)]
        spans += list(zip(ticks[0::2], ticks[1::2]))
        offset += len(paragraph)
    return spans


def figures_of(text: str) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """``([(line, figure, exempting rule)], [(line, figure)])``: the exempt numbers outside code blocks with
    the rule that exempts each, and the others, in the text's order (lines are 1-based)."""
    prose = _prose(text)
    exempt_at = {m.start("figure"): rule for rule, pattern in EXEMPT for m in pattern.finditer(prose)}
    spans = _code_spans(prose)
    exempt, checked = [], []
    for match in NUMBER.finditer(prose):
        line = prose.count("\n", 0, match.start()) + 1
        rule = exempt_at.get(match.start())
        code = next((prose[start + 1:match.start()] for start, end in spans if start < match.start() < end), None)
        if rule is None and code is not None:
            rule = next((name for name, pattern in CODE_INPUTS if pattern.search(code)), None)
        if rule is None:
            checked.append((line, match.group()))
        else:
            exempt.append((line, match.group(), rule))
    return exempt, checked


# -- the checks ----------------------------------------------------------------------------------------------
def _decimals(figure: str) -> int:
    return len(figure.split(".")[-1])


def _rounds_to(value: float, figure: str) -> bool:
    """Whether ``value`` printed at ``figure``'s precision (nearest, as the documents round) is ``figure``."""
    return f"{value:.{_decimals(figure)}f}" == figure


def _holds_number(text: str, literal: str) -> bool:
    """Whether ``literal`` is in ``text`` as a whole number (``4.48`` is not in ``4.481`` nor in ``14.48``)."""
    return re.search(rf"(?<![\d.]){re.escape(literal)}(?![\d])", text) is not None


def registry_problems(document: str, text: str, registry: tuple[Line, ...] = FIGURES) -> list[str]:
    """What keeps ``document``'s figures from being exempt or registered, one message each: a figure that is
    not registered (document, line, figure), a registered line that is gone or not unique, a line whose
    figures differ from the registered ones."""
    _, checked = figures_of(text)
    lines = text.split("\n")
    prose_lines = _prose(text).split("\n")
    by_line: dict[int, list[str]] = {}
    for number, figure in checked:
        by_line.setdefault(number, []).append(figure)
    problems, claimed = [], set()
    for entry in (e for e in registry if e.document == document):
        found = [i + 1 for i, line in enumerate(prose_lines) if entry.anchor in line]
        if len(found) != 1:
            problems.append(f"{document}: the registered line {entry.anchor!r} is found on {len(found)} lines "
                            f"outside code blocks ({found}), not one")
            continue
        (number,) = found
        claimed.add(number)
        registered = [figure for figure, _ in entry.figures]
        if by_line.get(number, []) != registered:
            problems.append(f"{document} line {number}: figures {by_line.get(number, [])} where {registered} are "
                            f"registered: {lines[number - 1].strip()!r}")
    for number, figures in sorted(by_line.items()):
        if number not in claimed:
            problems += [f"{document} line {number}: figure {figure} is neither exempt nor registered: "
                         f"{lines[number - 1].strip()!r}" for figure in figures]
    return problems


def check_problem(document: str, figure: str, check: Check, *, text: str | None = None) -> str | None:
    """Why ``figure`` fails ``check`` (``None`` when it passes); ``text`` is the document's text for
    :class:`Printed` (default: the file)."""
    where = f"{document} figure {figure}"
    if isinstance(check, Recomputed):
        value = RECOMPUTE[check.name]()
        return None if _rounds_to(value, figure) else f"{where}: recomputed {value!r} ({check.name})"
    if isinstance(check, Printed):
        quoted = _quoted_prints(text if text is not None else (ROOT / document).read_text(encoding="utf-8"))
        return None if any(_holds_number(q, figure) for q in quoted.values()) else \
            f"{where}: in no print the docs test compares ({sorted(quoted.values())})"
    literal = check.literal or figure
    numbers = [n for n in re.findall(r"\d+\.\d+", literal)]
    if not any(_rounds_to(float(n), figure) for n in numbers):
        return f"{where}: the literal {literal!r} does not round to it"
    if isinstance(check, AssertedBy):
        path, _, name = check.test.partition("::")
        source = (ROOT / path).read_text(encoding="utf-8")
        function = next((node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
                         and node.name == name), None)
        if function is None:
            return f"{where}: no test {check.test}"
        body = ast.get_source_segment(source, function) or ""
        return None if literal in body else f"{where}: {check.test} does not hold {literal!r}"
    record = RECORDS / check.record
    if not record.is_file():
        return f"{where}: no record {record.relative_to(ROOT)}"
    header, separator, output = record.read_text(encoding="utf-8").partition("\n---\n")
    keys = {line.split(":", 1)[0] for line in header.splitlines() if ":" in line}
    if not separator or not {"command", "date", "commit"} <= keys:
        return f"{where}: {check.record} must give command, date and commit above a '---' line"
    return None if _holds_number(output, literal) else f"{where}: {check.record}'s output does not hold {literal}"


def _entries(kind: type) -> list[tuple[str, str, Check]]:
    return [(line.document, figure, check) for line in FIGURES for figure, check in line.figures
            if isinstance(check, kind)]


# -- the tests -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_figure_outside_code_blocks_is_exempt_or_registered(document):
    text = (ROOT / document).read_text(encoding="utf-8")
    assert registry_problems(document, text) == []


def test_anchors_hold_no_figure_and_every_recomputation_is_used():
    """An anchor without a figure makes an edited figure read as a change of that figure, not as a lost line."""
    assert [line.anchor for line in FIGURES if NUMBER.search(line.anchor)] == []
    assert {check.name for _, _, check in _entries(Recomputed)} == set(RECOMPUTE)


def test_recomputed_figures_agree_at_their_printed_precision():
    problems = [check_problem(*entry) for entry in _entries(Recomputed)]
    assert [p for p in problems if p] == []


def test_figures_asserted_by_tests_are_in_those_tests():
    problems = [check_problem(*entry) for entry in _entries(AssertedBy) + _entries(Printed)]
    assert [p for p in problems if p] == []


def test_measured_figures_are_in_their_records():
    problems = [check_problem(*entry) for entry in _entries(Recorded)]
    assert [p for p in problems if p] == []
    used = {check.record for _, _, check in _entries(Recorded)}
    kept = {path.name for path in RECORDS.glob("*.txt")}
    assert kept == used, "a record no figure reads, or a figure without its record"


# -- the checks can fail ---------------------------------------------------------------------------------------
def test_a_changed_figure_is_reported_with_its_line():
    text = (ROOT / GUIDE).read_text(encoding="utf-8")
    changed = text.replace("0.718 at `q = 0.01`", "0.719 at `q = 0.01`", 1)
    assert changed != text
    line = changed[:changed.index("0.719 at")].count("\n") + 1
    (problem,) = registry_problems(GUIDE, changed)
    assert problem.startswith(f"{GUIDE} line {line}: figures ['0.719'] where ['0.718'] are registered")
    # and the registry's own figure is held to its recomputation, its test, its print and its record
    assert "recomputed 0.71806" in check_problem(GUIDE, "0.719", A("sgm-pld q=0.01"))
    assert check_problem(GUIDE, "4.583", AssertedBy(OPACUS_TEST)) == \
        f"{GUIDE} figure 4.583: {OPACUS_TEST} does not hold '4.583'"
    assert "in no print" in check_problem(GUIDE, "7.19", Printed(), text=text)
    assert "does not round" in check_problem(GUIDE, "1.79", Recorded(JAX_BANDMF, "1.782"))
    assert "output does not hold 2.3" in check_problem(GUIDE, "2.3", Recorded(JAX_BANDMF))


def test_an_unregistered_figure_is_reported_and_only_the_rules_exempt():
    text = (ROOT / GUIDE).read_text(encoding="utf-8")
    added = text + "\nA new audit certifies 3.142 at 10^5 trials (Python 3.12, docs/theory.md 4.2).\n"
    line = added.count("\n")
    assert registry_problems(GUIDE, added) == [f"{GUIDE} line {line}: figure 3.142 is neither exempt nor registered: "
                                               f"'A new audit certifies 3.142 at 10^5 trials (Python 3.12, "
                                               f"docs/theory.md 4.2).'"]
    exempt, checked = figures_of("It took about 2.5 s on 2 cores, then 1.5 s; `run(trials=0.5)` certified `0.25`.\n"
                                 "```python\nprint(9.99)\n```\n")
    assert [(figure, rule) for _, figure, rule in exempt] == [("2.5", "a timing phrased as a measurement"),
                                                              ("0.5", "an input set in code")]
    assert checked == [(1, "1.5"), (1, "0.25")]  # a bare timing and a result in code are not exempt
    stale = FIGURES + (Line(GUIDE, "no such line anywhere", (("1.0", A("gaussian sigma 2, sensitivity 1")),)),)
    assert "found on 0 lines" in registry_problems(GUIDE, text, stale)[0]
