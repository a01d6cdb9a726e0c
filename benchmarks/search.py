"""Neighbour search and assert_private on DP-Auditorium's test mechanisms, with default settings.

``--mode search`` (default): ``dpaudit.search`` of every case of ``audit/checks/zoo/auditorium.py`` (NumPy
re-implementations of DP-Auditorium's classes, releases on a 2^-12 grid) at its claim, with default
settings (no background, ``min_records`` 1, the default screen and portfolio) and ``--trials`` per side;
per case and seed: the claim, the certified bound, the pair found and its exact epsilon, the score that
certified, the screening rounds and the seconds. A buggy case is ``caught`` when the bound exceeds the
claim, a correct one ``passed`` when it does not.

``--mode assert``: the gradient-descent case on its replace-one pair ``[-1]`` against ``[1]``:
``assert_private`` at its default chunk size and at 10^4, and ``dpaudit.audit`` with the same seed and
trials; per seed: whether ``assert_private`` flagged it, its figure and score, the audit's figure and score.

Run: ``python benchmarks/search.py [--mode search|assert] [--trials 1e5] [--seeds 1] [--only NAME ...]
[--json]``.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import dpaudit
from dpaudit.auditing.checks.search import search
from dpaudit.auditing.checks.zoo.auditorium import CASES, exact_epsilon


def search_rows(trials: int, seeds: int, only: list[str]) -> list[dict]:
    rows = []
    for case in CASES:
        if only and case.name not in only:
            continue
        for seed in range(seeds):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                found = search(case.mechanism(), epsilon=case.claimed, trials=trials, seed=seed)
            seconds = time.perf_counter() - start
            chosen = found.chosen
            flagged = found.violation
            rows.append({
                "case": case.name, "buggy": case.buggy, "seed": seed, "claimed_epsilon": case.claimed,
                "epsilon_lower_bound": found.epsilon_lower_bound, "violation": flagged,
                "verdict": ("caught" if flagged else "missed") if case.buggy else (
                    "false-alarm" if flagged else "passed"),
                "pair": chosen["name"], "relation": chosen["relation"], "S": chosen["S"], "S_prime": chosen["S_prime"],
                "exact_epsilon": exact_epsilon(case, chosen["S"], chosen["S_prime"]), "score": chosen["score"],
                "rounds": list(found.rounds), "trials": trials, "seconds": seconds})
    return rows


def assert_rows(trials: int, seeds: int) -> list[dict]:
    case = next(c for c in CASES if c.name == "gd-one-step")
    mechanism, pair = case.mechanism(), (np.array([[-1.0]]), np.array([[1.0]]))
    rows = []
    for seed in range(seeds):
        audited = dpaudit.audit(mechanism, dataset_pair=pair, trials=trials, seed=seed)
        for chunk in (None, 10_000):
            start = time.perf_counter()
            try:
                summary = dpaudit.assert_private(mechanism, epsilon=case.claimed, delta=1e-5, dataset_pair=pair,
                                                 trials=trials, seed=seed, chunk_size=chunk)
                row = {"flagged": False, "epsilon_lower_bound": summary["epsilon_lower_bound"],
                       "score": summary["score"], "trials_used": summary["trials_used"]}
            except dpaudit.PrivacyViolation as violation:
                result = violation.result
                row = {"flagged": True, "epsilon_lower_bound": result.epsilon_lower_bound,
                       "score": result.attack["score"], "trials_used": result.sequential["trials_used"]}
            rows.append({"seed": seed, "chunk_size": chunk, **row, "seconds": time.perf_counter() - start,
                         "audit_epsilon_lower_bound": audited.epsilon_lower_bound,
                         "audit_score": audited.attack["score"], "claimed_epsilon": case.claimed})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("search", "assert"), default="search")
    parser.add_argument("--trials", type=float, default=1e5)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    trials = int(args.trials)
    rows = search_rows(trials, args.seeds, args.only) if args.mode == "search" else assert_rows(trials, args.seeds)
    if args.json:
        print(json.dumps({"mode": args.mode, "trials": trials, "rows": rows}, indent=2))
        return
    for row in rows:
        if args.mode == "search":
            exact = "?" if row["exact_epsilon"] is None else f"{row['exact_epsilon']:.3f}"
            print(f"{row['case']:<22} seed {row['seed']} claim {row['claimed_epsilon']:.3f} certified "
                  f"{row['epsilon_lower_bound']:.3f} {row['verdict']:<11} exact {exact:>6} score {row['score']!s:<10} "
                  f"{row['seconds']:6.1f} s  {row['relation']}: {row['pair']}")
        else:
            chunk = "default" if row["chunk_size"] is None else row["chunk_size"]
            print(f"seed {row['seed']} chunk {chunk!s:<8} assert_private {'FLAGGED' if row['flagged'] else 'passed'} "
                  f"{row['epsilon_lower_bound']:.3f} ({row['score']}, {row['trials_used']} trials, "
                  f"{row['seconds']:.1f} s); audit {row['audit_epsilon_lower_bound']:.3f} ({row['audit_score']}); "
                  f"claim {row['claimed_epsilon']:.3f}")


if __name__ == "__main__":
    main()
