"""``dpaudit run`` and ``dpaudit check``: run audits from TOML configs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dpaudit.commands.common import EXIT_OK, EXIT_VIOLATION, UsageError, count, emit_json
from dpaudit.core.progress import enabled

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.result import AuditResult


def _summary(results: list["AuditResult"]) -> None:
    """One row per audit (the whole title, last), then its verdict's reason, and for a sequential audit how it
    looked (the words of the report's headline)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.reports.float_rounding import summary_line
    from dpaudit.reports.text import looks_text

    err = sys.stderr
    err.write(f"{'audit':<18} {'eps >=':>8} {'mu(GDP)':>8} {'conf':>6} {'verdict':<12} title\n")
    for result in results:
        emp = result.empirical
        mu = f"{'n/a':>8}" if result.anytime else f"{emp.mu_lower_bound:>8.4f}"  # the anytime design fits no GDP
        err.write(f"{result.audit_id:<18} {emp.epsilon_lower_bound:>8.4f} {mu} "
                  f"{emp.confidence:>6.4g} {result.verdict:<12} {result.title}\n")
        err.write(f"{'':<18} {result.verdict_reason}\n")
        if result.anytime:
            err.write(f"{'':<18} {result.anytime['statement']}\n")
        for entry in result.float_rounding.get("positions") or ():  # a float-bits violation, rounded
            err.write(f"{'':<18} {summary_line(entry, len(result.per_index) > 1)}\n")
        looks = looks_text(result)
        if looks:
            same = result.sequential.get("same_trials_as")
            err.write(f"{'':<18} confidence {emp.confidence:g} over the {looks}"
                      + (f"; without looks (dpaudit run): {same}" if same else "") + "\n")


def check_out(out: str) -> None:
    """Refuse ``--out`` before any work: a file where the folder should be, or a folder that cannot be written.

    Parameters
    ----------
    out : str
        The folder for the reports (created with its parents when the audits are done).

    Raises
    ------
    UsageError
        One line naming ``--out``, the path and why.
    """
    directory = Path(out)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"--out {out}: a file, not a directory; name a folder for the reports")
    existing = next(parent for parent in (directory, *directory.absolute().parents) if parent.exists())
    if not existing.is_dir():
        raise UsageError(f"--out {out}: {existing} is a file, not a directory; name a folder for the reports")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: directory {existing} is read-only; make it writable or choose another --out")


def _write_outputs(documents: list["AuditResult"], out: str, store: str) -> list[str]:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.reports.render import write_all

    directory = Path(out)
    written = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for doc in documents:
            written.extend(str(p) for p in write_all(doc, directory))
    except OSError as exc:  # checked before the audits, but the folder may have changed since
        raise UsageError(f"--out {out}: cannot write the reports ({exc.strerror or exc}); the results are in the "
                         f"store {store} (dpaudit report ID --store {store})") from None
    return written


def _run(args: argparse.Namespace, *, check: bool) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.config import load_configs
    from dpaudit.auditing.jobs.runner import RunOptions, run_configs
    from dpaudit.auditing.jobs.store import check_location
    from dpaudit.auditing.statistics.budget import parse_size
    from dpaudit.auditing.statistics.verdict import combine

    show_progress = not args.quiet and enabled(without_terminal=not args.json)
    max_memory = parse_size(args.max_memory) if args.max_memory is not None else None
    options = RunOptions(store=args.store, workers=args.workers, backend=args.backend,
                         scheduler=args.scheduler, progress=show_progress, max_memory=max_memory,
                         verbose=args.verbose)
    options.check()  # a bad backend or an unreachable scheduler fails before configs are read
    if args.out:
        check_out(args.out)  # where the reports go is known before the first trial
    check_location(args.store)
    configs = load_configs(args.configs)
    if args.trials is not None:
        configs = [config.with_trials(args.trials) for config in configs]
    documents = run_configs(configs, options, sequential=check)
    written = _write_outputs(documents, args.out, args.store) if args.out else []
    if not args.quiet:
        _summary(documents)
        for path in written:
            sys.stderr.write(f"wrote {path}\n")
    if args.json:
        if len(documents) == 1:
            emit_json(documents[0].to_dict())
        else:
            emit_json({"schema_version": documents[0].schema_version,
                       "verdict": combine([d.verdict for d in documents]),
                       "audits": [d.to_dict() for d in documents]})
    violated = any(doc.verdict == "violation" for doc in documents)
    return EXIT_VIOLATION if (check and violated) else EXIT_OK


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", nargs="+", metavar="CONFIG", help="audit config files (TOML)")
    parser.add_argument("--trials", type=count(20), help="trials per dataset (overrides [audit] trials)")
    parser.add_argument("--workers", type=count(1), help="parallel workers (default: all cores)")
    parser.add_argument("--backend", choices=("local", "dask"), default="local")
    parser.add_argument("--scheduler", help="Dask scheduler address for --backend dask")
    parser.add_argument("--store", default="dpaudit.sqlite", help="SQLite store (default dpaudit.sqlite)")
    parser.add_argument("--out", help="directory for reports (JSON, Markdown, HTML)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar or summary (progress shows by default, but not with --json to a stderr "
                             "that is no terminal; DPAUDIT_PROGRESS=1 or 0 sets that default)")
    parser.add_argument("--verbose", action="store_true", help="show Dask's own logging")
    parser.add_argument("--max-memory", metavar="SIZE",
                        help="memory an audit may use, e.g. 8GiB (default: half of the machine's memory)")


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser("run", help="run audits, store them, write reports")
    _add_arguments(run)
    run.set_defaults(handler=lambda args: _run(args, check=False))
    check = subparsers.add_parser("check", help="like run; exit 1 when a claim is violated")
    _add_arguments(check)
    check.set_defaults(handler=lambda args: _run(args, check=True))

