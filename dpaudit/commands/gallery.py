"""``dpaudit gallery``: audits next to the theory of the seed papers, in one HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpaudit.commands.common import add_progress_flags, count, show_progress
from dpaudit.core.progress import enabled


def _run(args: argparse.Namespace) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.gallery import build

    index = build(Path(args.out), trials=args.trials, workers=args.workers, store=args.store,
                  progress=show_progress(args, enabled()))
    print(f"wrote {index}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("gallery", help="build the gallery of audits next to theory (HTML)")
    parser.add_argument("--out", default="gallery", help="output directory (default gallery/)")
    parser.add_argument("--trials", type=count(20), help="trials per dataset for every audit (default: each config's)")
    parser.add_argument("--workers", type=count(1), help="parallel workers (default: all cores)")
    parser.add_argument("--store", default="gallery.sqlite", help="SQLite store (default gallery.sqlite)")
    add_progress_flags(parser, "when stderr is a terminal")
    parser.set_defaults(handler=_run)
