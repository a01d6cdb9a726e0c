"""``dpaudit zoo``: audit every broken mechanism of a suite (the zoo, the black-box suite, the DP-SGD and DP-MF
bug zoos) and its correct twin."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dpaudit.commands.common import UsageError, add_progress_flags, count, emit_json, show_progress
from dpaudit.core.progress import enabled

SUITES = ("zoo", "black-box", "dp-sgd", "dp-mf")
#: What a table prints where a value is not known or not computed (explained under the table when it shows).
UNKNOWN = "?"
#: What the training zoos' tables print for a case without a single score (explained when it shows).
NO_SCORE = "-"


def _chosen(args: argparse.Namespace, items: Sequence[Any], what: str) -> list:
    """The suite's ``items`` whose name contains a part of ``--only`` (all without it).

    Raises
    ------
    UsageError
        When a part of ``--only`` matches no name (``what``: ``"algorithm of the black-box suite"``).
    """
    names = [item.name for item in items]
    unknown = [part for part in args.only or () if not any(part in name for name in names)]
    if unknown:
        raise UsageError(f"zoo: --only {unknown[0]!r} matches no {what} (names: {', '.join(names)})")
    return [item for item in items if not args.only or any(part in item.name for part in args.only)]


def _each(args: argparse.Namespace, items: list, run_one: Callable[[Any], list]) -> list:
    """The results of ``run_one`` on each item, in order, under a bar on stderr naming the item that runs
    (``--progress``/``--quiet``; by default shown unless ``--json`` goes to a stderr that is no terminal, as
    ``dpaudit run`` does)."""
    # tqdm loads when a suite runs: dpaudit --help imports no more than the parser
    from tqdm import tqdm

    results: list = []
    shown = show_progress(args, enabled(without_terminal=not args.json))
    label = "zoo" if args.suite == "zoo" else f"zoo {args.suite}"
    with tqdm(total=len(items), desc=label, unit="case", file=sys.stderr, disable=not shown, dynamic_ncols=True) as bar:
        for item in items:
            bar.set_postfix_str(item.name)  # a case can run for minutes: the bar says which one
            results.extend(run_one(item))
            bar.update(1)
    return results


def _run_black_box(args: argparse.Namespace) -> int:
    """The black-box benchmark suite (audit/checks/zoo/blackbox_suite.py)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE, run_algorithm
    from dpaudit.auditing.checks.zoo.statuses import status_legend

    chosen = _chosen(args, SUITE, "algorithm of the black-box suite")
    results = _each(args, chosen, lambda algorithm: [run_algorithm(
        algorithm, trials=args.trials or 1_000_000, seed=args.seed, screen_trials=args.screen_trials,
        with_law=not args.no_law)])
    failed = [r.name for r in results if r.failed]
    if args.json:
        emit_json({"schema_version": 2, "suite": "black-box", "failed": failed,
                   "algorithms": [r.to_dict() for r in results]})
    else:
        out = sys.stdout
        out.write(f"{'algorithm':<28} {'claim':>6} {'true':>7} {'ceiling':>8} {'band':>13} {'eps >=':>8} "
                  f"{'verdict':<13} {'pair':<18} {'s':>6}\n")
        for r in results:
            true = UNKNOWN if r.true_epsilon is None else f"{r.true_epsilon:.3f}"
            ceiling = UNKNOWN if r.ceiling is None else f"{r.ceiling:.3f}"
            band = UNKNOWN if r.ceiling_low is None else f"{r.ceiling_low:.3f}-{r.ceiling_high:.3f}"
            out.write(f"{r.name:<28} {r.claimed_epsilon:>6.3f} {true:>7} {ceiling:>8} {band:>13} "
                      f"{r.epsilon_lower_bound:>8.4f} {r.status:<13} {r.pair:<18} {r.seconds:>6.1f}\n")
        out.write(f"trials per side: {results[0].trials}; true epsilon and ceiling on the chosen pair from its "
                  f"exact law ('{UNKNOWN}': not computed); band: where 95% of audits at the oracle threshold land; "
                  f"delta 0, confidence 0.95\n")
        out.write(status_legend(r.status for r in results))
    if failed:
        print(f"dpaudit zoo: {len(failed)} algorithm(s) failed (a violation missed, or a correct algorithm "
              f"flagged): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


#: The legend line of each training zoo's table (the statuses' line follows it).
_LEGENDS = {
    "dp-sgd": ("claim: what the library's own accountant reports at delta 1e-5; true: the pair's exact epsilon "
               f"('{UNKNOWN}': not computed); assert_private at the claim, confidence 0.95; trials: per dataset, "
               f"used before a violation stopped the audit\n"),
    "dp-mf": ("claim: the epsilon each case claims at delta 1e-5 (the bug's, or the correct one for a twin); true: "
              f"the pair's exact epsilon (reshuffled-epochs: Monte Carlo; '{UNKNOWN}': not computed); "
              "assert_private at the claim, confidence 0.95; trials: per dataset, used before a violation stopped "
              "the audit\n"),
}


def _training_zoo(args: argparse.Namespace) -> list:
    """The results of a training bug zoo: dp-sgd (audit/checks/zoo/dpsgd.py, training code as it
    shipped) or dp-mf (audit/checks/zoo/dpmf.py, correlated noise with a wrong claim or wrong noise)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    if args.suite == "dp-sgd":
        from dpaudit.auditing.checks.zoo.dpsgd import DPSGD_ZOO as cases, run_dpsgd_zoo as run  # when it runs
    else:
        from dpaudit.auditing.checks.zoo.dpmf import DPMF_ZOO as cases, run_dpmf_zoo as run  # when it runs
    chosen = _chosen(args, cases, f"case of the {args.suite} suite")
    return _each(args, chosen, lambda case: run(trials=args.trials, seed=args.seed, cases=[case]))


def _run_training(args: argparse.Namespace) -> int:
    """A training bug zoo, each case beside its twin, through ``assert_private`` at the case's claim."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.checks.zoo.statuses import status_legend

    results = _training_zoo(args)
    failed = [r.name for r in results if r.failed]
    if args.json:
        emit_json({"schema_version": 2, "suite": args.suite, "delta": 1e-5, "failed": failed,
                   "cases": [r.to_dict() for r in results]})
    else:
        out = sys.stdout
        out.write(f"{'case':<42} {'report':<28} {'claim':>7} {'true':>7} {'eps >=':>8} {'status':<13} "
                  f"{'trials':>8} {'score':<13} {'s':>6}\n")
        for r in results:
            true = UNKNOWN if r.true_epsilon is None else f"{r.true_epsilon:.3f}"
            out.write(f"{r.name:<42} {r.report:<28} {r.claimed_epsilon:>7.3f} {true:>7} {r.epsilon_lower_bound:>8.3f} "
                      f"{r.status:<13} {r.trials_used:>8} {r.score or NO_SCORE:<13} {r.seconds:>6.1f}\n")
        out.write(_LEGENDS[args.suite])
        if any(r.score is None for r in results):
            out.write(f"score: {NO_SCORE} = no single score (the case was not audited, or a portfolio chose per "
                      f"position)\n")
        out.write(status_legend(r.status for r in results))
    if failed:
        print(f"dpaudit zoo: {len(failed)} case(s) failed (a violation missed, or a correct case flagged): "
              f"{', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.suite == "black-box":
        return _run_black_box(args)
    if args.suite in ("dp-sgd", "dp-mf"):
        if args.screen_trials is not None:
            raise UsageError("zoo: --screen-trials applies to --suite black-box only")
        return _run_training(args)
    if args.screen_trials is not None:
        raise UsageError("zoo: --screen-trials applies to --suite black-box only")
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.checks.zoo import REAL_WORLD, VARIANTS, run_zoo
    from dpaudit.auditing.checks.zoo.statuses import status_legend

    chosen = _chosen(args, [*VARIANTS, *REAL_WORLD], "variant of the zoo")
    results = _each(args, chosen, lambda variant: run_zoo(trials=args.trials, seed=args.seed, variants=[variant]))
    failed = [r.name for r in results if r.failed]
    if args.json:
        emit_json({"schema_version": 2, "failed": failed, "variants": [r.to_dict() for r in results]})
    else:
        out = sys.stdout
        out.write(f"{'variant':<42} {'buggy':<6} {'status':<13} {'eps >=':>8} {'claim':>8} {'true':>8} "
                  f"{'trials':>8} {'s':>6}\n")
        for r in results:
            true = f"{r.true_epsilon:.3f}" if r.true_epsilon is not None else UNKNOWN
            out.write(f"{r.name:<42} {str(r.buggy):<6} {r.status:<13} {r.epsilon_lower_bound:>8.3f} "
                      f"{r.claimed_epsilon:>8.3f} {true:>8} {r.trials:>8} {r.seconds:>6.1f}\n")
        out.write(status_legend(r.status for r in results))
        if any(r.true_epsilon is None for r in results):
            out.write(f"true: {UNKNOWN} = not known (a buggy variant is then taken to exceed its claim)\n")
    if failed:
        print(f"dpaudit zoo: {len(failed)} variant(s) failed (a bug beyond its claim missed, or a correct "
              f"variant flagged): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "zoo", help="audit the zoo of broken mechanisms and their correct versions; exit 1 if a bug beyond its "
                    "claim is missed or a correct version is flagged")
    parser.add_argument("--suite", choices=SUITES, default="zoo",
                        help="zoo: broken mechanisms and their twins (default); black-box: the benchmark "
                             "algorithms of the published black-box finders at their claims; dp-sgd: DP-SGD "
                             "training code as it shipped (Opacus, jax_privacy), from its users' reports; dp-mf: "
                             "DP matrix-factorisation training (correlated noise) with wrong sensitivities or noise")
    parser.add_argument("--trials", type=count(20),
                        help="trials per dataset (default: each variant's own; 10^6 for --suite black-box)")
    parser.add_argument("--screen-trials", type=count(20),
                        help="black-box suite: trials per side for each screened input pattern")
    parser.add_argument("--no-law", action="store_true",
                        help="black-box suite: skip the exact laws (true epsilon, ceiling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", help="run only variants whose name contains one of these")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    add_progress_flags(parser, "shown, but not with --json when stderr is not a terminal")
    parser.set_defaults(handler=_run)
