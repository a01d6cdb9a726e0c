"""``dpaudit list``: the registered mechanisms and their parameters."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from dpaudit import mechanisms
from dpaudit.commands.common import emit_json


def catalogue() -> dict[str, Any]:
    """Everything ``dpaudit list`` shows, as a JSON-friendly dict."""
    entries = []
    for name, cls in sorted(mechanisms.registered().items()):
        entries.append({
            "name": name,
            "summary": cls.summary,
            "params": [{"name": p.name, "default": p.default, "required": p.required, "doc": p.doc}
                       for p in mechanisms.describe(cls)],
        })
    document: dict[str, Any] = {"mechanisms": entries}
    document.update(_attack_catalogue())
    return document


def _attack_catalogue() -> dict[str, Any]:
    try:
        # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
        from dpaudit.attacks.catalogue import catalogue as attack_catalogue
    except ImportError:
        return {}
    return attack_catalogue()


def _run(args: argparse.Namespace) -> int:
    document = catalogue()
    if args.json:
        emit_json(document)
        return 0
    out = sys.stdout
    out.write("Mechanisms\n")
    for entry in document["mechanisms"]:
        out.write(f"\n  {entry['name']}: {entry['summary']}\n")
        for p in entry["params"]:
            if p["required"]:
                shown = " (required)"
            elif p["default"] is not None:
                shown = f" (default {p['default']!r})"
            elif re.search(r"\bdefault\b|\bNone\b", str(p["doc"])):  # the doc says what unset means
                shown = ""
            else:
                shown = " (optional)"
            out.write(f"      {p['name']:<12} {p['doc']}{shown}\n")
    for section in ("canaries", "scores", "estimators"):
        if section in document:
            out.write(f"\n{section.capitalize()}\n")
            for entry in document[section]:
                out.write(f"  {entry['name']:<16} {entry['summary']}\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("list", help="mechanisms, canaries, scores, estimators")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_run)
