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
            **_default_neighbours(cls),
        })
    document: dict[str, Any] = {"mechanisms": entries}
    document.update(_attack_catalogue())
    return document


#: the canary pair that audits each relation (``attacks.canaries.PAIR_FOR_RELATION``, spelled out here so that
#: ``dpaudit --help`` imports no NumPy; a test keeps the two equal)
PAIR_FOR = {"replace-one": "opposite", "add-remove": "remove", "zero-out": "zero"}


def _default_neighbours(cls: type) -> dict[str, Any]:
    """The canary pair and relation a default audit of ``cls`` (its default parameters) uses; ``{}`` where the
    defaults cannot be built."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.attacks.canaries import CanarySpec
    from dpaudit.core.errors import DPAuditError

    try:
        mechanism = cls()
        spec = CanarySpec()
        # the relation a default CanarySpec builds its pair under (the pair itself needs datasets)
        return {"default_pair": spec.pair_for(mechanism), "default_relation": str(spec._relation(mechanism))}
    except (DPAuditError, ValueError, TypeError, OSError):
        return {}


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
        if entry.get("default_relation"):
            out.write(f"      neighbours   a default audit uses {entry['default_relation']} neighbours (canary pair "
                      f"{entry['default_pair']!r}); each claim holds for the relation it is stated for (dpaudit "
                      f"bound {entry['name']} lists them)\n")
    out.write("\nRelations: a claim made for one relation says nothing of another; [canary] pair = "
              + ", ".join(f"{pair!r} audits {relation}" for relation, pair in PAIR_FOR.items()) + ".\n")
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
