"""``dpaudit report``: re-render a stored result (a JSON file or an audit id in the store)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dpaudit.audit.cli import UsageError
from dpaudit.audit.store import Store


def load_result(reference: str, store: str) -> dict:
    """A result document from a JSON file path, or by audit id from ``store``."""
    path = Path(reference)
    if path.suffix == ".json" or path.is_file():
        if not path.is_file():
            raise UsageError(f"no such result file {reference!r}")
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"{reference} is not a JSON result ({exc})") from None
        if not isinstance(document, dict) or "schema_version" not in document:
            raise UsageError(f"{reference} is not a dpaudit result (no schema_version)")
        return document
    if not Path(store).is_file():
        raise UsageError(f"{reference!r} is neither a result file nor an audit id in {store} (no such store)")
    with Store(store) as opened:
        return opened.get_result(reference)


def _run(args: argparse.Namespace) -> int:
    from dpaudit.reports.render import render

    document = load_result(args.result, args.store)
    Path(args.out).write_text(render(document, args.format), encoding="utf-8")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="re-render a stored result")
    parser.add_argument("result", metavar="RESULT_OR_ID", help="a result .json file or an audit id")
    parser.add_argument("--format", choices=("html", "md", "json"), required=True)
    parser.add_argument("--out", required=True, help="output file")
    parser.add_argument("--store", default="dpaudit.sqlite", help="store holding audit ids")
    parser.set_defaults(handler=_run)
