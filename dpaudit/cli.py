"""The ``dpaudit`` command line.

Exit codes (docs/design.md): 0 success, 1 a privacy violation was certified
(``check``), 2 bad input (one line on stderr, never a traceback), 3 an
internal error. ``--json`` prints exactly one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from dpaudit.mechanisms.errors import DPAuditError

__all__ = ["count", "main", "UsageError"]

EXIT_OK, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(DPAuditError):
    """Bad flags or arguments on the command line."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("dpaudit").strip()
        raise UsageError(f"{command}: {message}" if command else message)


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


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout."""
    json.dump(document, sys.stdout, indent=2, sort_keys=False, allow_nan=False, default=_jsonable)
    sys.stdout.write("\n")


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


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
