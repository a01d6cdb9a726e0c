"""The ``dpaudit`` command line.

Exit codes (docs/design.md, ``dpaudit.commands.common``): 0 success, 1 a privacy violation was certified
(``check``), 2 bad input (one line on stderr, never a traceback), 3 an
internal error. ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

# what commands share lives in dpaudit.commands.common; these names stay importable from here
from dpaudit.commands.common import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATION, UsageError, count,
                                     emit_json)
from dpaudit.core.errors import DPAuditError

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERNAL", "EXIT_OK", "EXIT_VIOLATION", "UsageError", "count", "emit_json", "main"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("dpaudit").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def _build_parser() -> argparse.ArgumentParser:
    from dpaudit import commands

    from dpaudit import __version__

    parser = _Parser(prog="dpaudit", description="Empirical privacy auditing of DP mechanisms.")
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for register in commands.REGISTRARS:
        register(sub)
    return parser


def _shorten(message: str, limit: int = 400) -> str:
    """One line of at most ``limit`` characters."""
    return message if len(message) <= limit else message[: limit - 3] + "..."


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        handler: Callable[[argparse.Namespace], int] = args.handler
        return handler(args)
    except (DPAuditError, ValueError, OSError, KeyError) as exc:
        if isinstance(exc, BrokenPipeError):  # the reader went away (`| head`)
            return EXIT_OK
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, KeyError):
            message = f"unknown name {message}"
        print(f"dpaudit: error: {_shorten(message)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("dpaudit: error: out of memory; lower --trials, [audit] chunk_size or the model size, "
              "or raise --max-memory only if the machine has it", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("dpaudit: interrupted; finished chunks are stored", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        print(f"dpaudit: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
