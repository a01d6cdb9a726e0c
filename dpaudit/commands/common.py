"""What every ``dpaudit`` subcommand shares: the usage error, exit codes, counts and JSON output.

Exit codes (docs/design.md): 0 success, 1 a privacy violation was certified
(``check``), 2 bad input (one line on stderr, never a traceback), 3 an
internal error. ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from dpaudit.core.errors import DPAuditError

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_OK", "EXIT_VIOLATION", "UsageError", "add_progress_flags", "count",
           "emit_json", "show_progress"]

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(DPAuditError):
    """Bad flags or arguments on the command line."""


def count(minimum: int) -> Callable[[str], int]:
    """An argparse type for counts: ``100000``, ``1e5`` or ``100_000``, at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
            if not (number == number and abs(number) != float("inf") and number.is_integer()):
                raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
            value = int(number)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text}")
        return value
    parse.__name__ = "count"
    return parse


def add_progress_flags(parser: argparse.ArgumentParser, default: str) -> None:
    """``--progress`` (progress on stderr, a terminal or not) and ``--quiet`` (none), one or the other.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The subcommand's parser.
    default : str
        When progress shows without either flag, as ``--help`` says it (``"when stderr is a terminal"``).
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--progress", action="store_true",
                       help=f"show progress on stderr even when it is not a terminal (default: {default}; "
                            f"the environment variable DPAUDIT_PROGRESS=1 or 0 sets the default on or off)")
    group.add_argument("--quiet", action="store_true", help="no progress")


def show_progress(args: argparse.Namespace, default: bool) -> bool:
    """Whether to show progress: ``--quiet`` never, ``--progress`` always, else ``default``."""
    if args.quiet:
        return False
    return bool(args.progress) or default


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout."""
    json.dump(document, sys.stdout, indent=2, sort_keys=False, allow_nan=False, default=_jsonable)
    sys.stdout.write("\n")


def _jsonable(value: Any) -> Any:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
