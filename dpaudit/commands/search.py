"""``dpaudit search``: find the worst neighbouring pair of a user function and certify it.

The function is named as ``path/to/file.py:name`` or ``package.module:name``;
``fn(records, rng) -> array`` is called once per trial, or with
``--batched`` ``fn(records, rng, trials) -> (trials, dim)`` once per chunk.
Exit 0 when nothing above ``--epsilon`` is certified, 1 when a violation is,
2 on bad input.

``--domain LOW HIGH`` once per column describes records of several columns,
and ``--labels`` the values of a label column after them (candidates flip
it). ``--relation`` names the neighbouring relation the claim is made for
(``replace-one``, ``add-remove`` or ``zero-out``; default both of the first
two for a function, the claim's own for a library adapter); ``--size N``
keeps every dataset at ``N`` records (a known-size claim).

With ``--queries N`` the function takes a vector of ``N`` query answers (the
records are the answers) and the candidates are the standard input patterns
(one answer up or down by ``--sensitivity``, all up, all down, half and
half, ...; ``--relation one-answer`` moves one answer only) instead of
record pairs from ``--domain``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dpaudit.commands.common import (
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    add_progress_flags,
    count,
    emit_json,
    show_progress,
)
from dpaudit.core.progress import enabled


def load_function(spec: str) -> Any:
    """The function ``spec`` names: ``file.py:name`` or ``module:name``."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.core.errors import ParameterError
    from dpaudit.mechanisms.user_code import load_object

    try:
        function = load_object(spec, parameter="--function")
    except ParameterError as exc:
        raise UsageError(f"search: {exc}") from None
    if not callable(function):
        raise UsageError(f"search: --function {spec!r} names {type(function).__name__}, not a function")
    return function


def _run(args: argparse.Namespace) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.checks.search import search
    from dpaudit.mechanisms.wrapped import from_batched_callable, from_callable

    if (args.domain is None) == (args.queries is None):
        raise UsageError("search: give exactly one of --domain LOW HIGH (records) and --queries N (a vector "
                         "of query answers)")
    vector = ("component-wise", "one-answer")
    if args.relation is not None and (args.relation in vector) != (args.queries is not None):
        raise UsageError(f"search: --relation {args.relation} applies to "
                         f"{'--queries' if args.relation in vector else '--domain'} (records: replace-one, "
                         f"add-remove or zero-out; query answers: component-wise or one-answer)")
    function = load_function(args.function)
    wrap = from_batched_callable if args.batched else from_callable
    if args.queries is not None:
        mechanism = wrap(function, args.output_dim)
        found = search(mechanism, queries=args.queries, sensitivity=args.sensitivity, center=args.center,
                       relation=args.relation, epsilon=args.epsilon, score=args.score, trials=args.trials,
                       screen_trials=args.screen_trials or 20_000, delta=args.delta, confidence=args.confidence,
                       seed=args.seed, progress=show_progress(args, enabled()))
    else:
        domain = args.domain[0] if len(args.domain) == 1 else args.domain
        # records of one number: the function refuses records outside the domain; of several columns (or a
        # label): the search keeps each column in its own range
        one = len(args.domain) == 1 and args.labels is None
        mechanism = wrap(function, args.output_dim, record_domain=tuple(domain) if one else None)
        optional = {key: value for key, value in (("max_candidates", args.max_candidates),
                                                  ("min_records", args.min_records), ("size", args.size),
                                                  ("large_records", args.large_records)) if value is not None}
        found = search(mechanism, record_domain=domain, labels=args.labels, relation=args.relation,
                       epsilon=args.epsilon, thresholds=args.threshold or (), score=args.score,
                       trials=args.trials, screen_trials=args.screen_trials or 1_000, delta=args.delta,
                       confidence=args.confidence, seed=args.seed, progress=show_progress(args, enabled()),
                       **optional)
    if args.json:
        emit_json(found.to_dict())
    else:
        out = sys.stdout
        def last(row):  # a row's strength in the last round it was screened in
            return ((row.get("rounds") or [row])[-1]["screen_epsilon"], len(row.get("rounds") or ()))

        ranked = sorted((c for c in found.candidates if c["screen_epsilon"] is not None),
                        key=lambda c: (-last(c)[1], -last(c)[0]))
        failed = len(found.candidates) - len(ranked)
        note = f", {failed} where the function failed (listed with --json)" if failed else ""
        rounds = " -> ".join(f"{r['candidates']} on {r['trials']}" for r in found.rounds) or \
            f"{len(found.candidates)} on {found.screen_trials}"
        out.write(f"screened {len(found.candidates)} candidate pairs (rounds: {rounds} trials each{note}); "
                  f"the pairs that reached the last round first, strongest first within a round (each figure from "
                  f"the last round the pair reached):\n")
        for row in ranked[:5]:
            shown = (row.get("rounds") or [row])[-1]
            out.write(f"  round {last(row)[1] + 1}  {shown['screen_epsilon']:>7.3f}  {shown['score']:<11} "
                      f"{row['relation']:<12} {row['name']}\n")
        chosen = found.chosen
        out.write(f"certified on {args.trials} fresh trials per dataset ({chosen['score']}, {chosen['name']}): "
                  f"epsilon >= {found.epsilon_lower_bound:.4f} at delta={args.delta:g}, confidence "
                  f"{args.confidence:g}")
        if args.epsilon is not None and not found.claim_applies:
            out.write(f"; claim {args.epsilon:g}: does not apply ({found.note})\n")
        else:
            out.write(f"; claim {args.epsilon:g}: {'VIOLATION' if found.violation else 'no violation'}\n"
                      if args.epsilon is not None else "\n")
    return EXIT_VIOLATION if found.violation else EXIT_OK


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "search", help="screen neighbouring pairs of a user function and certify the worst; exit 1 on a violation")
    parser.add_argument("--function", required=True, metavar="FILE.py:NAME", help="fn(records, rng) -> array")
    parser.add_argument("--domain", nargs=2, type=float, action="append", metavar=("LOW", "HIGH"),
                        help="where records lie (once per column for records of several)")
    parser.add_argument("--labels", nargs="+", type=float, metavar="Y",
                        help="the values of a label column after the --domain columns (candidates flip it)")
    parser.add_argument("--queries", type=count(1), metavar="N",
                        help="the function takes a vector of N query answers: screen the standard input patterns")
    parser.add_argument("--sensitivity", type=float, default=1.0, help="with --queries: how far an answer moves")
    parser.add_argument("--center", type=float, default=1.0, help="with --queries: the base answer of the patterns")
    parser.add_argument("--relation", choices=("replace-one", "add-remove", "zero-out", "component-wise",
                                               "one-answer"),
                        help="the relation the claim is made for (default: replace-one and add-remove for records; "
                             "with --queries component-wise: every answer may move, or one-answer)")
    parser.add_argument("--size", type=count(1), metavar="N",
                        help="every dataset holds N records (a claim for a known size: replace-one pairs)")
    parser.add_argument("--large-records", type=count(0), metavar="N",
                        help="records of the large datasets offered for float sums (default 2,000; 0: none)")
    parser.add_argument("--epsilon", type=float, help="the claimed epsilon (exit 1 when certified above it)")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--threshold", type=float, action="append", help="a clipping threshold (repeatable)")
    parser.add_argument("--batched", action="store_true", help="fn(records, rng, trials) -> (trials, dim)")
    parser.add_argument("--output-dim", type=count(1), default=1)
    parser.add_argument("--score", help="screen and certify with this score only")
    parser.add_argument("--trials", type=count(20), default=100_000, help="certifying trials per dataset")
    parser.add_argument("--screen-trials", type=count(20),
                        help="screening trials per candidate (default 1,000; 20,000 with --queries)")
    parser.add_argument("--max-candidates", type=count(1), help="screen at most this many (default 600)")
    parser.add_argument("--min-records", type=count(0),
                        help="no dataset holds fewer records (default 1: never the empty dataset)")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    add_progress_flags(parser, "when stderr is a terminal")
    parser.set_defaults(handler=_run)
