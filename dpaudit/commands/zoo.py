"""``dpaudit zoo``: audit every broken mechanism of the zoo and its correct twin."""

from __future__ import annotations

import argparse
import sys

from dpaudit.commands.common import count, emit_json


def _run(args: argparse.Namespace) -> int:
    from dpaudit.audit.checks.zoo import REAL_WORLD, VARIANTS, run_zoo

    chosen = [v for v in [*VARIANTS, *REAL_WORLD] if not args.only or any(name in v.name for name in args.only)]
    results = run_zoo(trials=args.trials, seed=args.seed, variants=chosen)
    failed = [r.name for r in results if r.failed]
    if args.json:
        emit_json({"schema_version": 2, "failed": failed, "variants": [r.to_dict() for r in results]})
    else:
        out = sys.stdout
        out.write(f"{'variant':<42} {'buggy':<6} {'status':<13} {'eps >=':>8} {'claim':>8} {'true':>8} "
                  f"{'trials':>8} {'s':>6}\n")
        for r in results:
            true = f"{r.true_epsilon:.3f}" if r.true_epsilon is not None else "?"
            out.write(f"{r.name:<42} {str(r.buggy):<6} {r.status:<13} {r.epsilon_lower_bound:>8.3f} "
                      f"{r.claimed_epsilon:>8.3f} {true:>8} {r.trials:>8} {r.seconds:>6.1f}\n")
    if failed:
        print(f"dpaudit zoo: {len(failed)} variant(s) failed (a bug beyond its claim missed, or a correct "
              f"variant flagged): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "zoo", help="audit the zoo of broken mechanisms and their correct versions; exit 1 if a bug beyond its "
                    "claim is missed or a correct version is flagged")
    parser.add_argument("--trials", type=count(20), help="trials per dataset (default: each variant's own)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="run only variants whose name contains one of these")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_run)
