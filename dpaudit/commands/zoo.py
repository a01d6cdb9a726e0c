"""``dpaudit zoo``: audit every broken mechanism of a suite (the zoo, the black-box suite, the DP-SGD and DP-MF
bug zoos) and its correct twin."""

from __future__ import annotations

import argparse
import sys

from dpaudit.commands.common import UsageError, count, emit_json

SUITES = ("zoo", "black-box", "dp-sgd", "dp-mf")


def _run_black_box(args: argparse.Namespace) -> int:
    """The black-box benchmark suite (audit/checks/zoo/blackbox_suite.py)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE, run_blackbox_suite

    names = [a.name for a in SUITE]
    unknown = [part for part in args.only or () if not any(part in name for name in names)]
    if unknown:
        raise UsageError(f"zoo: --only {unknown[0]!r} matches no algorithm of the black-box suite "
                         f"(names: {', '.join(names)})")
    results = run_blackbox_suite(trials=args.trials or 1_000_000, seed=args.seed, only=args.only,
                                 screen_trials=args.screen_trials, with_law=not args.no_law)
    failed = [r.name for r in results if r.failed]
    if args.json:
        emit_json({"schema_version": 2, "suite": "black-box", "failed": failed,
                   "algorithms": [r.to_dict() for r in results]})
    else:
        out = sys.stdout
        out.write(f"{'algorithm':<28} {'claim':>6} {'true':>7} {'ceiling':>8} {'band':>13} {'eps >=':>8} "
                  f"{'verdict':<13} {'pair':<18} {'s':>6}\n")
        for r in results:
            true = "?" if r.true_epsilon is None else f"{r.true_epsilon:.3f}"
            ceiling = "?" if r.ceiling is None else f"{r.ceiling:.3f}"
            band = "?" if r.ceiling_low is None else f"{r.ceiling_low:.3f}-{r.ceiling_high:.3f}"
            out.write(f"{r.name:<28} {r.claimed_epsilon:>6.3f} {true:>7} {ceiling:>8} {band:>13} "
                      f"{r.epsilon_lower_bound:>8.4f} {r.status:<13} {r.pair:<18} {r.seconds:>6.1f}\n")
        out.write(f"trials per side: {results[0].trials}; true epsilon and ceiling on the chosen pair from its "
                  f"exact law ('?': not computed); band: where 95% of audits at the oracle threshold land; "
                  f"delta 0, confidence 0.95\n")
    if failed:
        print(f"dpaudit zoo: {len(failed)} algorithm(s) failed (a violation missed, or a correct algorithm "
              f"flagged): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


#: The legend line of each training zoo's table.
_LEGENDS = {
    "dp-sgd": ("claim: what the library's own accountant reports at delta 1e-5; true: the pair's exact epsilon "
               "('?': not computed); assert_private at the claim, confidence 0.95; trials: per dataset, used "
               "before a violation stopped the audit\n"),
    "dp-mf": ("claim: the epsilon each case claims at delta 1e-5 (the bug's, or the correct one for a twin); true: "
              "the pair's exact epsilon (reshuffled-epochs: Monte Carlo); assert_private at the claim, confidence "
              "0.95; trials: per dataset, used before a violation stopped the audit; within-claim: a bug whose "
              "true epsilon stays within its claim\n"),
}


def _training_zoo(args: argparse.Namespace) -> list:
    """The results of a training bug zoo: dp-sgd (audit/checks/zoo/dpsgd.py, training code as it
    shipped) or dp-mf (audit/checks/zoo/dpmf.py, correlated noise with a wrong claim or wrong noise)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    if args.suite == "dp-sgd":
        from dpaudit.auditing.checks.zoo.dpsgd import DPSGD_ZOO as cases, run_dpsgd_zoo as run  # when it runs
    else:
        from dpaudit.auditing.checks.zoo.dpmf import DPMF_ZOO as cases, run_dpmf_zoo as run  # when it runs
    names = [case.name for case in cases]
    unknown = [part for part in args.only or () if not any(part in name for name in names)]
    if unknown:
        raise UsageError(f"zoo: --only {unknown[0]!r} matches no case of the {args.suite} suite (names: "
                         f"{', '.join(names)})")
    return run(trials=args.trials, seed=args.seed, only=args.only)


def _run_training(args: argparse.Namespace) -> int:
    """A training bug zoo, each case beside its twin, through ``assert_private`` at the case's claim."""
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
            true = "?" if r.true_epsilon is None else f"{r.true_epsilon:.3f}"
            out.write(f"{r.name:<42} {r.report:<28} {r.claimed_epsilon:>7.3f} {true:>7} {r.epsilon_lower_bound:>8.3f} "
                      f"{r.status:<13} {r.trials_used:>8} {r.score or '-':<13} {r.seconds:>6.1f}\n")
        out.write(_LEGENDS[args.suite])
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
    parser.set_defaults(handler=_run)
