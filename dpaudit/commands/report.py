"""``dpaudit report``: re-render a stored result (a JSON file or an audit id in the store)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpaudit.auditing.jobs.result import AuditResult, load_result
from dpaudit.commands.common import UsageError


def _load(reference: str, store: str) -> AuditResult:
    """A result from a JSON file path, or by audit id from ``store``."""
    path = Path(reference)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise UsageError(f"no such result file {reference!r}")
        return load_result(path)
    if not Path(store).is_file():
        raise UsageError(f"{reference!r} is neither a result file nor an audit id in {store} (no such store)")
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.store import Store

    with Store(store) as opened:
        matches = opened.result_ids(reference)
    if len(matches) > 1:
        raise UsageError(f"audit id prefix {reference!r} is ambiguous in {store}: {', '.join(matches[:5])}"
                         + (" ..." if len(matches) > 5 else ""))
    return load_result(matches[0] if matches else reference, store=store)


def _run(args: argparse.Namespace) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.reports.render import render, write_text_atomic

    result = _load(args.result, args.store)
    write_text_atomic(Path(args.out), render(result, args.format))
    audit_id = "".join(ch if ch.isprintable() else "?" for ch in str(result.audit_id))[:40]
    print(f"wrote {args.out} ({args.format} report of audit {audit_id})", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-render a stored result")
    parser.add_argument("result", metavar="RESULT_OR_ID",
                        help="a result .json file, or an audit id (or an unambiguous prefix of one) in --store")
    parser.add_argument("--format", choices=("html", "md", "json"), required=True)
    parser.add_argument("--out", required=True, help="output file")
    parser.add_argument("--store", default="dpaudit.sqlite", help="store holding audit ids")
    parser.set_defaults(handler=_run)
