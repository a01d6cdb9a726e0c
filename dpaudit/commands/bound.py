"""``dpaudit bound``: every theoretical claim for given mechanism parameters."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from dpaudit import mechanisms
from dpaudit.commands.common import UsageError, emit_json


def parse_assignments(pairs: list[str] | None) -> dict[str, Any]:
    """``["sigma=2", "variant=stop", "init=[0.5]"]`` -> typed values (JSON syntax, else a string)."""
    params: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--set takes key=value, got {pair!r}")
        lowered = raw.strip().lower()
        if lowered in ("none", "null"):
            value: Any = None
        else:
            try:
                value = json.loads(lowered if lowered in ("true", "false") else raw)
            except json.JSONDecodeError:
                value = raw
        params[key.strip()] = value
    return params


def _check_level(name: str, value: float | None, *, upper_open: bool) -> None:
    """Refuse ``--delta`` outside [0, 1), the rule of ``[audit] delta`` in ``run`` and ``audit``
    (``audit.statistics.settings``; claims that need delta > 0 say so), or ``--epsilon`` outside [0, inf)."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (upper_open and value >= 1):
        allowed = "[0, 1)" if upper_open else "[0, inf)"
        raise UsageError(f"--{name} must be a number in {allowed}, got {name}={value}")


def bound_document(mech, *, delta: float | None, epsilon: float | None, index: str | None) -> dict[str, Any]:
    """The JSON document of ``dpaudit bound``: every claim, and the tightest (``audit.checks.verdict.compare``)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.statistics.verdict import compare
    from dpaudit.mechanisms.accounting.claims import evaluate_claims

    def entries(claims) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        evaluated = evaluate_claims(claims, delta=delta, epsilon=epsilon)
        tightest = {}
        if delta is not None:  # the smallest claim per relation (the verdict's rule)
            for relation in sorted({str(e.relation) for e in evaluated}):
                compared = compare(0.0, evaluated, relation)
                if compared.tightest is not None:
                    tightest[relation] = {"name": compared.tightest, "epsilon": compared.tightest_epsilon}
        return [e.to_dict() for e in evaluated], tightest

    document: dict[str, Any] = {
        "schema_version": 1,
        "mechanism": {"name": mech.name, "params": mech.params},
        "delta": delta,
        "epsilon": epsilon,
    }
    if index == "all":
        if not mech.has_positions:
            raise UsageError(f"--index all needs a mechanism with records in a fixed order, got {mech.name}")
        n = mech.n_records
        document["per_index"] = [{"index": t, "claims": entries(mech.claims(index=t))[0]} for t in range(1, n + 1)]
        chosen = None
    else:
        chosen = None if index is None else _parse_index(index)
    document["claims"], tightest = entries(mech.claims(index=chosen))
    if tightest:
        document["tightest"] = tightest
    return document


def _parse_index(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"--index takes an integer or 'all', got {raw!r}") from None


def _print_table(document: dict[str, Any]) -> None:
    out = sys.stdout
    target = (f"delta={document['delta']:g}" if document["delta"] is not None
              else f"epsilon={document['epsilon']:g}")
    out.write(f"{document['mechanism']['name']} at {target}\n")
    quantity = "epsilon" if document["delta"] is not None else "delta"
    for entry in document["claims"]:
        value = entry[quantity]
        valued = entry["applicable"] or value is not None  # a reference keeps its value, never applicable
        shown = "n/a" if not valued else ("inf" if value is None else f"{value:.6g}")
        index = "" if entry["index"] is None else f" [t={entry['index']}]"
        out.write(f"  {entry['name']:<28}{index:<9} {quantity}={shown:<12} {entry['relation']}\n")
        if not entry["applicable"]:
            out.write(f"      {'' if valued else 'not applicable: '}{entry['reason']}\n")
        for note in entry["notes"]:
            out.write(f"      note: {note}\n")
    for row in document.get("per_index", []):
        shown = [e for e in row["claims"] if e["applicable"] and e[quantity] is not None]
        names = [e["name"] for e in shown]
        values = ", ".join(f"{_label(e, names)}={e[quantity]:.4g}" for e in shown)
        out.write(f"  t={row['index']:<5} {values}\n")


def _label(entry: dict[str, Any], names: list[str]) -> str:
    """A claim's name, with its relation where the row states the claim for two relations."""
    return f"{entry['name']} ({entry['relation']})" if names.count(entry["name"]) > 1 else entry["name"]


def _run(args: argparse.Namespace) -> int:
    if (args.delta is None) == (args.epsilon is None):
        raise UsageError("give exactly one of --delta and --epsilon")
    _check_level("delta", args.delta, upper_open=True)
    _check_level("epsilon", args.epsilon, upper_open=False)
    mech = mechanisms.make(args.mechanism, **parse_assignments(args.set))
    document = bound_document(mech, delta=args.delta, epsilon=args.epsilon, index=args.index)
    if args.json:
        emit_json(document)
    else:
        _print_table(document)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bound", help="every theoretical claim for these parameters")
    parser.add_argument("mechanism", help="mechanism name (see dpaudit list)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", help="a mechanism parameter")
    parser.add_argument("--delta", type=float, help="report epsilon(delta)")
    parser.add_argument("--epsilon", type=float, help="report delta(epsilon)")
    parser.add_argument("--index", help="canary position (1-based) or 'all'")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_run)
