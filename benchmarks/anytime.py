"""The anytime-valid design measured: validity on correct mechanisms, power beside check and fixed runs.

Run: ``python benchmarks/anytime.py --mode validity [--seeds 200] [--budget 100000] [--only NAME ...]``
or ``python benchmarks/anytime.py --mode power [--seeds 5] [--designs anytime check fixed] [--only NAME ...]``
(add ``--json`` for one JSON line).

``validity``: each correct mechanism audited at its exact epsilon (the claim it keeps), ``--seeds`` seeds each,
watched continuously (no futility stop) up to ``--budget`` trials per side: how many runs ever certify a
violation, against alpha = 1 - confidence (docs/theory.md 13). The cases: the Gaussian and Laplace
mechanisms, one DP-SGD step (``pnsgd`` with one record, one step, whole domain), and the zoo's correct
twins (``audit.checks.zoo.variants``; randomised response among them: ``rr-wrong-flip-probability:correct``).

``power``: each buggy zoo variant (or, ``--suite blackbox``, the black-box suite's violating algorithms on
the pair its screening chooses, at ``--budget``): the median over seeds of the trials per side to the first
flag of the anytime design (its budget: the variant's), of ``check``'s sequential design
(``assert_private``'s looks over that budget) and of the smallest fixed run of the ladder 500, 1000, 2000,
... that flags (an oracle: a fixed run must choose its size before it sees anything); a run that never flags
counts as infinite.

``side-by-side``: the anytime bound at ``--at`` trials (watched without stopping) and the fixed-sample
bound at the same trials and seed, on the correct cases.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.checks.zoo.variants import VARIANTS, claimed_epsilon
from dpaudit.auditing.jobs.anytime import AnytimeJob
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.mechanisms.accounting.claims import evaluate_claims

OPTIONS = RunOptions(store=":memory:", workers=1, progress=False)


def _pair(mech, kind=None):
    spec = CanarySpec(kind=kind)
    return spec.build(mech, spec.indices(mech)[-1])


def _exact_claim(mech, pair, delta):
    entries = evaluate_claims(mech.claims(index=pair.index), delta=delta)
    return min(e.epsilon for e in entries if e.is_bound and e.relation == str(pair.relation))


def correct_cases() -> dict:
    """name -> (pair, claim): correct mechanisms at the epsilon they keep (their exact value on this pair)."""
    delta = 1e-5
    cases = {}
    for name, mech, kind in (("gaussian", mechanisms.make("gaussian", sigma=2.0), "input"),
                             ("laplace", mechanisms.make("laplace", scale=1.0), "input"),
                             ("dp-sgd-step", mechanisms.make("pnsgd", n=1, dim=1, eta=0.5, sigma=2.0,
                                                             domain="whole"), "gradient")):
        pair = _pair(mech, kind)
        cases[name] = (pair, _exact_claim(mech, pair, delta), "auto")
    for variant in VARIANTS:
        if not variant.buggy:
            pair, claim_mechanism, relation = variant.build()
            cases[variant.name] = (pair, claimed_epsilon(claim_mechanism, relation, pair.index, variant.delta),
                                   variant.score)
    return cases


def anytime(pair, claim, budget, seed, score="auto", futility=True):
    job = AnytimeJob(make_job(pair=pair, trials=budget, claimed_epsilon=claim, seed=seed, score=score),
                     futility=futility)
    return run_audits([job], OPTIONS)[0]


def validity(args) -> dict:
    out = {}
    for name, (pair, claim, score) in correct_cases().items():
        if args.only and name not in args.only:
            continue
        start, flags, bounds = time.perf_counter(), 0, []
        for seed in args.seed_range:
            result = anytime(pair, claim, args.budget, seed, score, futility=False)
            flags += result.anytime["stopped"] == "violation"
            bounds.append(result.epsilon_lower_bound)
        alpha = 0.05
        # a binomial count at the nominal rate: mean seeds * alpha, its 99.9% upper quantile
        sd = math.sqrt(args.seeds * alpha * (1 - alpha))
        out[name] = {"claim": claim, "seeds": args.seeds, "seed_start": args.seed_start, "flags": flags,
                     "share": flags / args.seeds,
                     "nominal_mean": args.seeds * alpha, "nominal_sd": sd,
                     "median_bound": statistics.median(bounds), "seconds": time.perf_counter() - start}
        print(f"{name:32s} claim {claim:.4g}: {flags}/{args.seeds} ever flagged (alpha {alpha}), median bound "
              f"{statistics.median(bounds):.3f}, {out[name]['seconds']:.0f} s", file=sys.stderr)
    return out


def _fixed_flag(pair, claim, seed, score, top):
    """The smallest fixed run of the ladder 500, 1000, ... (up to ``top``) that flags, and its bound."""
    budget = 500
    while budget <= top:
        result = run_audits([make_job(pair=pair, trials=budget, seed=seed, score=score, claimed_epsilon=claim)],
                            OPTIONS)[0]
        if result.epsilon_lower_bound > claim:
            return budget
        budget *= 2
    return None


def _check_flag(pair, claim, seed, score, budget):
    chunk = min(10_000, max(1_000, budget // 64))
    job = make_job(pair=pair, trials=budget, seed=seed, score=score, claimed_epsilon=claim, sequential=True,
                   chunk_size=chunk)
    result = run_audits([job], OPTIONS)[0]
    return result.sequential.get("trials_used") if result.epsilon_lower_bound > claim else None


def _cases(args):
    """name -> (pair, claim, score, budget, true epsilon): the zoo's buggy variants, or the black-box suite's
    violating algorithms on the pair its screening chooses (``--suite blackbox``)."""
    if args.suite == "zoo":
        for variant in VARIANTS:
            if variant.buggy and (not args.only or variant.name in args.only):
                pair, claim_mechanism, relation = variant.build()
                claim = claimed_epsilon(claim_mechanism, relation, pair.index, variant.delta)
                yield variant.name, pair, claim, variant.score, variant.trials, variant.true_epsilon
        return
    # the suite's screening picks each algorithm's pair (seed 0), as dpaudit zoo --suite black-box does
    from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE, screen_algorithm

    for algorithm in SUITE:
        if not algorithm.violates or (args.only and algorithm.name not in args.only):
            continue
        _, chosen, _ = screen_algorithm(algorithm, trials=args.budget, seed=0, screen_trials=20_000)
        first, second = chosen.datasets()
        mechanism = algorithm.mechanism()
        job = make_job(mechanism, dataset_pair=(first, second), trials=1_000)
        truth = algorithm.law(chosen.first, chosen.second).true_epsilon if algorithm.law is not None else None
        yield algorithm.name, job.pairs[0], algorithm.claim, "auto", args.budget, truth


def power(args) -> dict:
    out = {}
    for name, pair, claim, score, budget, truth in _cases(args):
        rows = {design: [] for design in args.designs}
        start = time.perf_counter()
        for seed in args.seed_range:
            if "anytime" in rows:
                result = anytime(pair, claim, budget, seed, score)
                rows["anytime"].append(result.anytime["stopping_trial"] if result.anytime["stopped"] == "violation"
                                       else None)
            if "check" in rows:
                rows["check"].append(_check_flag(pair, claim, seed, score, budget))
            if "fixed" in rows:
                rows["fixed"].append(_fixed_flag(pair, claim, seed, score, budget))
        medians = {k: _median(v) for k, v in rows.items()}
        gross = truth is not None and truth >= 2 * claim
        out[name] = {"claim": claim, "true_epsilon": truth, "gross": gross, "budget": budget, **rows,
                     "median": medians, "seconds": time.perf_counter() - start}
        ratio = (medians["anytime"] / medians["fixed"]) if medians.get("anytime") and medians.get("fixed") else None
        print(f"{name:28s} claim {claim:.3g} true {truth if truth is not None else float('nan'):.3g}"
              f"{' GROSS' if gross else ''}: median trials to flag anytime {medians.get('anytime', '-')}, check "
              f"{medians.get('check', '-')}, smallest fixed run {medians.get('fixed', '-')}, fixed budget {budget}"
              + (f", anytime/fixed {ratio:.2f}" if ratio else ""), file=sys.stderr)
    return out


def _median(values):
    """Median of the flags, a run that never flagged counting as infinite (None when half never did)."""
    keyed = sorted(math.inf if v is None else v for v in values)
    middle = len(keyed) // 2
    value = keyed[middle] if len(keyed) % 2 else (keyed[middle - 1] + keyed[middle]) / 2
    return None if math.isinf(value) else value


def side_by_side(args) -> dict:
    """The anytime bound at ``--at`` trials (watched without stopping) and the fixed-sample bound at the same
    trials and seed, on the correct cases."""
    out = {}
    for name, (pair, claim, score) in correct_cases().items():
        if args.only and name not in args.only:
            continue
        pairs = []
        for seed in args.seed_range:
            any_job = AnytimeJob(make_job(pair=pair, trials=args.at, seed=seed, score=score), futility=False)
            fixed_job = make_job(pair=pair, trials=args.at, seed=seed, score=score)
            a, f = run_audits([any_job, fixed_job], OPTIONS)
            pairs.append((a.epsilon_lower_bound, f.epsilon_lower_bound))
        ratio = statistics.median(a / f for a, f in pairs if f > 0) if any(f > 0 for _, f in pairs) else None
        out[name] = {"anytime": [a for a, _ in pairs], "fixed": [f for _, f in pairs], "median_ratio": ratio}
        print(f"{name:32s} at {args.at}: anytime {statistics.median(a for a, _ in pairs):.3f}, fixed "
              f"{statistics.median(f for _, f in pairs):.3f}, median ratio {ratio}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("validity", "power", "side-by-side"), default="validity")
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--seed-start", type=int, default=0,
                        help="the first seed (a run of many seeds split over processes: 0, then --seeds, ...)")
    parser.add_argument("--budget", type=int, default=100_000)
    parser.add_argument("--at", type=int, default=100_000)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--suite", choices=("zoo", "blackbox"), default="zoo",
                        help="power: the zoo's buggy variants or the black-box suite's violating algorithms")
    parser.add_argument("--designs", nargs="+", choices=("anytime", "check", "fixed"),
                        default=["anytime", "check", "fixed"], help="power: the designs measured (default all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.seeds = args.seeds or {"validity": 200, "power": 5, "side-by-side": 3}[args.mode]
    if args.seeds < 1 or args.seed_start < 0:
        parser.error(f"--seeds must be at least 1 and --seed-start at least 0, got {args.seeds} and {args.seed_start}")
    args.seed_range = range(args.seed_start, args.seed_start + args.seeds)  # the seeds every mode runs
    np.seterr(all="ignore")
    run = {"validity": validity, "power": power, "side-by-side": side_by_side}[args.mode]
    result = run(args)
    if args.json:
        print(json.dumps({"mode": args.mode, "seeds": args.seeds, "result": result}, default=str))


if __name__ == "__main__":
    main()
