"""Render a finished result document to JSON, Markdown and self-contained HTML.

Reports only read a finished result; they never run anything.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult, load_result
from dpaudit.reports.text import markdown, verdict_sentence

__all__ = ["FORMATS", "as_document", "render", "verdict_sentence", "write_all", "write_text_atomic"]

FORMATS = ("json", "md", "html")


def as_document(result: AuditResult | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document of a result (reports render the document form)."""
    return result.to_dict() if isinstance(result, AuditResult) else dict(result)


def render(result: AuditResult | Mapping[str, Any], fmt: str) -> str:
    """The report of ``result`` (an :class:`AuditResult`, or its JSON document read back with
    ``load_result``) as text in format ``fmt`` (``json``, ``md`` or ``html``)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")
    result = load_result(result)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"
    if fmt == "md":
        return markdown(result)
    if fmt == "html":
        from dpaudit.reports.html import html

        return html(result)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it: never a truncated file."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_all(result: AuditResult | Mapping[str, Any], directory: Path) -> list[Path]:
    """Write every format as ``<audit_id>.<ext>`` in ``directory``."""
    result = load_result(result)
    paths = []
    for fmt in FORMATS:
        path = Path(directory) / f"{result.audit_id}.{fmt}"
        write_text_atomic(path, render(result, fmt))
        paths.append(path)
    return paths
