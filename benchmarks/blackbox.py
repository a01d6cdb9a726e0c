"""The black-box benchmark suite: seconds, certified / ceiling, and monotonicity in the budget.

Modes (``--mode``):

* ``laws``: for every algorithm with an exact law, every input pattern's true
  epsilon and ceiling at ``--trials`` (no audit; the oracle pair's figures).
* ``suite``: the suite as ``dpaudit zoo --suite black-box`` runs it at
  ``--trials`` per side (default 10^6): per algorithm the pair chosen, the
  claim, true epsilon, ceiling, certified bound, verdict and seconds.
* ``screen``: per algorithm and seed the pair the suite's screen chooses
  for an audit of ``--trials`` and its exact ceiling there (no audit);
  ``--finalists`` and ``--final-factor`` set the second round, to compare
  settings on the same screening seeds.
* ``catch``: per algorithm the verdict on each of ``--seeds`` seeds at
  ``--trials``: how often a violating one is flagged and a correct one
  is not (one run's bound has a spread of several hundredths at
  epsilon 0.1, so a single seed does not say how reliably a violation
  close to its ceiling is caught; docs/theory.md 8).
* ``monotone``: per algorithm the median certified bound over ``--seeds``
  seeds at ``--trials`` and at ten times that, with the ceiling at both; a
  drop beyond the sampling error (the median at 1x above the largest bound
  at 10x) is flagged.

Run: ``python benchmarks/blackbox.py --mode suite [--trials 1e6] [--only svt] [--json]``;
``python benchmarks/blackbox.py --mode screen --only svt4 --seeds 8 --finalists 3 --final-factor 4``;
``python benchmarks/blackbox.py --mode catch --only svt3 --seeds 7``.
Quote seconds as ratios measured in one run on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

import dpaudit.auditing.checks.vector_pairs as vector_pairs
from dpaudit.auditing.checks.vector_pairs import pattern_pairs
from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE, run_algorithm, screen_algorithm


def _selected(only):
    return [a for a in SUITE if not only or any(part in a.name for part in only)]


def law_rows(trials: int, only) -> list[dict]:
    rows = []
    for algorithm in _selected(only):
        if algorithm.law is None:
            rows.append({"algorithm": algorithm.name, "pattern": None, "true_epsilon": None, "ceiling": None})
            continue
        for candidate in pattern_pairs(algorithm.queries, relation=algorithm.relation):
            start = time.perf_counter()
            law = algorithm.law(candidate.first, candidate.second)
            rows.append({"algorithm": algorithm.name, "pattern": candidate.name, "claim": algorithm.claim,
                         "true_epsilon": law.true_epsilon, "ceiling": law.ceiling(trials), "reach": law.reach(),
                         "outcomes": law.outcomes, "seconds": time.perf_counter() - start})
    return rows


def suite_rows(trials: int, only, seed: int) -> list[dict]:
    rows = []
    for algorithm in _selected(only):
        cpu = time.process_time()  # CPU seconds of this process: less sensitive than wall time to other load
        result = run_algorithm(algorithm, trials=trials, seed=seed)
        rows.append({**result.to_dict(), "cpu_seconds": time.process_time() - cpu})
        print(f"{result.name:<28} {result.status:<12} eps>={result.epsilon_lower_bound:.4f} "
              f"ceiling={result.ceiling} true={result.true_epsilon} pair={result.pair} {result.seconds:.1f}s "
              f"cpu {rows[-1]['cpu_seconds']:.1f}s", file=sys.stderr, flush=True)
    return rows


def screen_rows(trials: int, only, seeds: int, finalists: int, final_factor: int) -> list[dict]:
    rows = []
    for algorithm in _selected(only):
        ceilings: dict[str, float | None] = {}
        for seed in range(seeds):
            start = time.perf_counter()
            _, chosen, _ = screen_algorithm(algorithm, trials=trials, seed=seed, finalists=finalists,
                                            final_factor=final_factor)
            if chosen.name not in ceilings:
                ceilings[chosen.name] = (algorithm.law(chosen.first, chosen.second).ceiling(trials)
                                         if algorithm.law is not None else None)
            rows.append({"algorithm": algorithm.name, "seed": seed, "pair": chosen.name,
                         "ceiling": ceilings[chosen.name], "finalists": finalists, "final_factor": final_factor,
                         "seconds": time.perf_counter() - start})
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def catch_rows(trials: int, only, seeds: int) -> list[dict]:
    rows = []
    for algorithm in _selected(only):
        results = [run_algorithm(algorithm, trials=trials, seed=seed) for seed in range(seeds)]
        right = [r.flagged == algorithm.violates for r in results]
        rows.append({"algorithm": algorithm.name, "violates": algorithm.violates, "claim": algorithm.claim,
                     "trials": trials, "seeds": seeds, "right": sum(right),
                     "bounds": [r.epsilon_lower_bound for r in results], "pairs": [r.pair for r in results],
                     "ceilings": [r.ceiling for r in results]})
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def monotone_rows(trials: int, only, seeds: int) -> list[dict]:
    rows = []
    for algorithm in _selected(only):
        bounds, ceilings = {}, {}
        for budget in (trials, 10 * trials):
            results = [run_algorithm(algorithm, trials=budget, seed=seed) for seed in range(seeds)]
            bounds[budget] = [r.epsilon_lower_bound for r in results]
            ceilings[budget] = [r.ceiling for r in results]
        low, high = statistics.median(bounds[trials]), statistics.median(bounds[10 * trials])
        rows.append({"algorithm": algorithm.name, "trials": trials, "median_1x": low, "median_10x": high,
                     "bounds_1x": bounds[trials], "bounds_10x": bounds[10 * trials],
                     "ceilings_1x": ceilings[trials], "ceilings_10x": ceilings[10 * trials],
                     "drop_beyond_error": high < low and low > max(bounds[10 * trials])})
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def _fmt(value) -> str:
    if value is None:
        return "?"
    return "inf" if isinstance(value, float) and math.isinf(value) else f"{value:.4f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("laws", "suite", "screen", "catch", "monotone"), default="suite")
    parser.add_argument("--trials", type=float, default=1e6)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--finalists", type=int, default=vector_pairs.FINALISTS)
    parser.add_argument("--final-factor", type=int, default=vector_pairs.FINAL_FACTOR)
    args = parser.parse_args(argv)
    trials = int(args.trials)
    start = time.perf_counter()
    if args.mode == "laws":
        rows = law_rows(trials, args.only)
    elif args.mode == "suite":
        rows = suite_rows(trials, args.only, args.seed)
    elif args.mode == "screen":
        rows = screen_rows(trials, args.only, args.seeds, args.finalists, args.final_factor)
    elif args.mode == "catch":
        rows = catch_rows(trials, args.only, args.seeds)
    else:
        rows = monotone_rows(trials, args.only, args.seeds)
    if args.json:
        json.dump({"mode": args.mode, "trials": trials, "seconds": time.perf_counter() - start, "rows": rows},
                  sys.stdout, indent=1, default=lambda v: None if isinstance(v, float) and not math.isfinite(v)
                  else str(v))
        print()
        return 0
    if args.mode == "laws":
        for row in rows:
            print(f"{row['algorithm']:<28} {str(row['pattern']):<18} true {_fmt(row['true_epsilon']):>7} "
                  f"ceiling@{trials:g} {_fmt(row['ceiling']):>7} reach {_fmt(row.get('reach'))}")
    elif args.mode == "suite":
        for row in rows:
            band = "?" if row["ceiling_low"] is None else f"{row['ceiling_low']:.4f}-{row['ceiling_high']:.4f}"
            print(f"{row['name']:<28} claim {row['claimed_epsilon']:.3f} true {_fmt(row['true_epsilon']):>7} "
                  f"ceiling {_fmt(row['ceiling']):>7} band {band:>15} certified {row['epsilon_lower_bound']:.4f} "
                  f"{row['status']:<12} {row['pair']:<18} {row['seconds']:.1f}s (cpu {row['cpu_seconds']:.1f}s)")
        correct = [r for r in rows if not r["violates"] and r["ceiling"]]
        if correct:
            shares = [r["epsilon_lower_bound"] / r["ceiling"] for r in correct]
            short = [r["name"] for r in correct if r["epsilon_lower_bound"] < 0.5 * r["ceiling"]]
            below = [r["name"] for r in correct if r["below_band"]]
            print(f"correct algorithms with a ceiling: certified / ceiling median {np.median(shares):.2f}, "
                  f"min {min(shares):.2f}; below half the ceiling: {', '.join(short) or 'none'}; below the "
                  f"band of the oracle test's bound: {', '.join(below) or 'none'}")
    elif args.mode == "screen":
        for row in rows:
            print(f"{row['algorithm']:<28} seed {row['seed']} {row['pair']:<18} ceiling@{trials:g} "
                  f"{_fmt(row['ceiling'])} {row['seconds']:.1f}s")
        for name in dict.fromkeys(row["algorithm"] for row in rows):
            known = [row["ceiling"] for row in rows if row["algorithm"] == name and row["ceiling"] is not None]
            if known:
                print(f"{name:<28} mean chosen ceiling {np.mean(known):.4f}")
    elif args.mode == "catch":
        for row in rows:
            verdict = "flagged" if row["violates"] else "passed"
            print(f"{row['algorithm']:<28} claim {row['claim']:.3f} {verdict} on {row['right']} of {row['seeds']} "
                  f"seeds at {trials:g}: certified median {statistics.median(row['bounds']):.4f}, "
                  f"min {min(row['bounds']):.4f}, max {max(row['bounds']):.4f}")
    else:
        for row in rows:
            print(f"{row['algorithm']:<28} median {_fmt(row['median_1x'])} at {trials:g}, "
                  f"{_fmt(row['median_10x'])} at {10 * trials:g}; drop beyond error: {row['drop_beyond_error']}")
    print(f"total {time.perf_counter() - start:.1f}s (machine shared: read seconds as ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
