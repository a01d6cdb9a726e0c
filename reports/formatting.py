"""Values of a result as report text: the typed result, Markdown escaping, numbers, bands and tables.

Every value taken from a result is escaped for Markdown by :func:`md`
(line breaks, HTML, link and image brackets, emphasis and table
characters), whether the result was just produced or loaded from a file
someone edited; numbers go through :func:`num`, which escapes whatever is
not a number (:func:`_plain_num` for the HTML report, which Jinja2 escapes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult, load_result

__all__ = ["Result", "band_text", "md", "num", "typed"]

Result = AuditResult | Mapping[str, Any]


def typed(result: Result) -> AuditResult:
    """The :class:`AuditResult` of a result or of its JSON document (reports render the typed result)."""
    return load_result(result)


_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


_MARKDOWN = re.compile(r"([\\`*_\[\]|#!~])")


# where Markdown would read raw HTML or an entity: "<" opening a tag, comment or autolink, "&" opening an entity,
# ">" opening a block quote; a backslash makes each a literal character (CommonMark 2.4), so "epsilon >= 2"
# stays as written and no HTML entity is needed
_HTML_START = re.compile(r"<(?=[A-Za-z/!?])|&(?=#|[A-Za-z0-9]+;)|^>")


def md(value: Any) -> str:
    """``value`` as inert Markdown on one line: no heading, link, image, emphasis, table cell or HTML, and no
    HTML entity (``>=`` is written as ``>=``)."""
    text = "n/a" if value is None else str(value)
    text = _MARKDOWN.sub(r"\\\1", _LINE_BREAKS.sub(" ", text))
    return _HTML_START.sub(lambda match: "\\" + match.group(0), text)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def num(value: Any, spec: str = ".4g") -> str:
    """A number formatted with ``spec``; ``n/a`` for None; anything else escaped as text."""
    if value is None:
        return "n/a"
    if _number(value):
        try:
            return format(value, spec) if math.isfinite(value) else str(value)
        except ValueError:  # an int format for a float from an edited file
            return md(value)
    return md(value)


def _plain_num(value: Any, spec: str = ".4g") -> str:
    """Like :func:`num` without Markdown escaping (for the HTML report and sentences escaped later)."""
    if value is None:
        return "n/a"
    try:
        return format(value, spec) if _number(value) and math.isfinite(value) else str(value)
    except ValueError:
        return str(value)


def band_text(band: Sequence[float] | None) -> str:
    """A ceiling band as ``low to high`` (``n/a`` without one)."""
    if band is None:
        return "n/a"
    return f"{_plain_num(band[0], '.3f')} to {_plain_num(band[1], '.3f')}"


def _table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(md(cell) for cell in header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows])
