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
from dpaudit.reports.html import html
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
        return html(result)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got format={fmt!r}")


def _umask() -> int:
    """The process's file-creation mask.

    Read from ``/proc/self/status`` where the kernel gives it; elsewhere by setting it and setting it back
    (there is no getter), which another thread creating a file in between would see.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it: never a truncated file.

    The file gets the mode of any file the user writes (``0o666`` less the umask), not the private
    ``0o600`` of a temporary file: a report in a shared folder can be read by whoever reads the others.
    """
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fchmod(stream.fileno(), 0o666 & ~_umask())
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
