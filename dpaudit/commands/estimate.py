"""``dpaudit estimate``: certified bounds from scores the user computed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from dpaudit.commands.common import UsageError, emit_json

if TYPE_CHECKING:
    import numpy as np

#: ``dpaudit.auditing.statistics.estimators.STRATEGIES``, spelled out so that ``--help`` imports no NumPy or SciPy
#: (tests/commands/test_cli.py checks they agree).
STRATEGIES = ("split", "union")


def load_scores(path: str, name: str) -> "np.ndarray":
    """Scores from a ``.npy`` file or a text file of numbers (one per line or whitespace-separated)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    import numpy as np

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{name}: no such file {path!r}")
    try:
        values = np.load(file, allow_pickle=False) if file.suffix == ".npy" else np.loadtxt(file, ndmin=1)
    except (ValueError, OSError, EOFError):  # the message would quote the file: say what was expected instead
        kind = "a .npy array of numbers (pickled objects are refused)" if file.suffix == ".npy" else \
            "a text file of numbers (one per line or separated by spaces)"
        raise UsageError(f"{name}: {path!r} is not {kind}") from None
    values = np.asarray(values)
    if values.dtype.kind == "b":
        raise UsageError(f"{name}: {path!r} holds booleans; scores must be real numbers")
    if values.dtype.kind == "c":
        raise UsageError(f"{name}: {path!r} holds complex numbers; scores must be real numbers")
    if values.dtype.kind not in "iuf":
        raise UsageError(f"{name}: {path!r} holds {values.dtype} values; scores must be real numbers")
    if values.ndim != 1:
        raise UsageError(f"{name}: {path!r} has shape {values.shape}; scores must be one number per trial (1-D)")
    return values.astype(float)


def _one_run(args: argparse.Namespace) -> int:
    """``--one-run``: scores of one run's canaries and their inclusion bits."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.result import SCHEMA_VERSION
    from dpaudit.auditing.statistics.one_run_fdp import one_run_audit

    if not args.scores or not args.included:
        raise UsageError("--one-run needs --scores FILE and --included FILE")
    if args.scores_a or args.scores_b:
        raise UsageError("--one-run takes --scores and --included, not --scores-a/--scores-b")
    scores = load_scores(args.scores, "--scores")
    included = load_scores(args.included, "--included")
    if included.shape != scores.shape:
        raise UsageError(f"--included must hold one 0/1 per canary: {included.size} values for "
                         f"{scores.size} scores")
    if not ((included == 0) | (included == 1)).all():
        raise UsageError("--included must hold only 0 (not included) and 1 (included)")
    guesses = int(args.guesses) if args.guesses.isdigit() else args.guesses
    bound = one_run_audit(scores, included, delta=args.delta, confidence=args.confidence, method=args.method,
                          guesses=guesses, seed=args.seed)
    if args.json:
        emit_json({"schema_version": SCHEMA_VERSION, "one_run": bound.to_dict(),
                   "epsilon_lower_bound": bound.epsilon_lower_bound})
    else:
        mu = f", mu >= {bound.mu_lower_bound:.4f} (Gaussian tradeoff family)" if bound.mu_lower_bound is not None \
            else ""
        print(f"epsilon >= {bound.epsilon_lower_bound:.4f} at delta={bound.delta:g} (confidence "
              f"{bound.confidence:g}, one run, {bound.method}{mu})")
        print(f"{bound.correct} of {bound.guesses} guesses right over {bound.canaries} canaries "
              f"(guess count: {bound.guess_rule})")
    return 0


def _run(args: argparse.Namespace) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.result import SCHEMA_VERSION, Empirical
    from dpaudit.auditing.jobs.streaming import ArraySource, certify_source
    from dpaudit.auditing.statistics.confidence import split_calibration

    if args.one_run:
        return _one_run(args)
    if not args.scores_a or not args.scores_b:
        raise UsageError("estimate needs --scores-a and --scores-b (or --one-run with --scores and --included)")

    scores_a = load_scores(args.scores_a, "--scores-a")
    scores_b = load_scores(args.scores_b, "--scores-b")
    # the same certification as an audit (every estimator, counts at thresholds fixed on calibration)
    source = ArraySource(*split_calibration(scores_a, scores_b, args.calibration_fraction, args.seed))
    certification = certify_source(source, delta=args.delta, confidence=args.confidence, threshold=args.threshold)
    eps, gdp = certification.epsilon, certification.gdp
    empirical = Empirical.from_certification(certification, int(min(scores_a.size, scores_b.size)))
    document = {"schema_version": SCHEMA_VERSION, "empirical": empirical.to_dict()}
    if args.json:
        emit_json(document)
    else:
        print(f"epsilon >= {eps.epsilon_lower_bound:.4f} at delta={eps.delta:g} "
              f"(confidence {eps.confidence:g}, {eps.method}, threshold {eps.threshold:.6g})")
        model = gdp.model_based_epsilon
        print(f"mu >= {gdp.mu_lower_bound:.4f} (mu-GDP, certified); epsilon at delta under that model: "
              f"{f'{model:.4f}' if model is not None else 'n/a'} (model-based: assumes a Gaussian tradeoff, "
              f"not a certified bound)")
        print(f"trials certified: {eps.trials['a']} and {eps.trials['b']} "
              f"(calibration {eps.trials['calibration_a']} and {eps.trials['calibration_b']})")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("estimate", help="certified bounds from your own scores")
    parser.add_argument("--scores-a", help="scores on S (.npy or text)")
    parser.add_argument("--scores-b", help="scores on S' (.npy or text), larger under S'")
    parser.add_argument("--one-run", action="store_true",
                        help="one-run audit: --scores of the canaries and --included (1 included, 0 not)")
    parser.add_argument("--scores", help="with --one-run: one score per canary, larger when included")
    parser.add_argument("--included", help="with --one-run: 1 for a canary that was included, 0 otherwise")
    parser.add_argument("--method", choices=("fdp", "steinke", "tail"), default="fdp",
                        help="with --one-run: f-DP (Mahloujifar et al. 2024, default), Steinke et al. 2023, or the "
                             "tail bound of Xiang et al. 2025 (Gaussian family, stronger)")
    parser.add_argument("--guesses", default="auto",
                        help="with --one-run: auto, union, calibrate, or a number of guesses")
    parser.add_argument("--delta", type=float, required=True)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--threshold", choices=STRATEGIES, default="split")
    parser.add_argument("--calibration-fraction", type=float, default=0.1,
                        help="share of each file split off (seeded) to choose the threshold")
    parser.add_argument("--seed", type=int, default=0, help="seed of the calibration split")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_run)
