"""Render a finished result document to JSON, Markdown and self-contained HTML.

Reports only read a finished result; they never run anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dpaudit.reports.text import markdown, verdict_sentence

__all__ = ["FORMATS", "render", "write_all", "verdict_sentence"]

FORMATS = ("json", "md", "html")


def render(document: dict[str, Any], fmt: str) -> str:
    """The report as text in format ``fmt`` (``json``, ``md`` or ``html``)."""
    if fmt == "json":
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    if fmt == "md":
        return markdown(document)
    if fmt == "html":
        from dpaudit.reports.html import html

        return html(document)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")


def write_all(document: dict[str, Any], directory: Path) -> list[Path]:
    """Write every format as ``<audit_id>.<ext>`` in ``directory``."""
    paths = []
    for fmt in FORMATS:
        path = Path(directory) / f"{document['audit_id']}.{fmt}"
        path.write_text(render(document, fmt), encoding="utf-8")
        paths.append(path)
    return paths
