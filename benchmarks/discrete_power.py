"""Power of the default audit on few-valued and mixed outputs at small epsilon (docs/theory.md 7).

For each algorithm of ``tests/discrete_algorithms.py`` at its claim: the certified epsilon of the default
audit (portfolio ``auto``), the exact epsilon of the pair, the ceiling at the certification budget (tests
that may split an atom, expected counts) and the seconds of the audit and of the portfolio's choice.

    python benchmarks/discrete_power.py --trials 500000 [--epsilon 0.1] [--seed 0] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import time

import pathlib
import sys

import dpaudit
from dpaudit.auditing.statistics import portfolio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tests import discrete_algorithms as algorithms  # noqa: E402

MAKERS = {
    "randomized-response": lambda eps: algorithms.randomized_response(eps),
    "noisy-max-index": algorithms.noisy_max_index,
    "svt1-booleans": algorithms.svt_booleans,
    "sentinel-or-value": algorithms.sentinel_or_value,
    "svt-no-cutoff": lambda eps: algorithms.svt_booleans(eps, cutoff=False, queries=10),
    "svt-noisy-answers": algorithms.svt_noisy_answers,
}


def _timed_choice():
    """Wrap ``portfolio.choose_score`` to add up its seconds."""
    spent = [0.0]
    original = portfolio.choose_score

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - start
    return spent, original, timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500_000)
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--score", default=None)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    from dpaudit.auditing.jobs import runner

    # one-time costs of the process (torch's optimiser modules load on the first classifier fit) are
    # paid before any timing, so the choice's share is that of an audit in a warm process
    import numpy as np
    from dpaudit.attacks.classifiers import fit_logistic
    fit_logistic(np.zeros((4, 1)), np.ones((4, 1)), seed=0)
    rows = []
    for name, make in MAKERS.items():
        if args.only and name not in args.only:
            continue
        algorithm = make(args.epsilon)
        spent, original, timed = _timed_choice()
        runner.choose_score = timed
        start = time.perf_counter()
        try:
            result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=args.trials, delta=0.0,
                                   seed=args.seed, score=args.score)
        finally:
            runner.choose_score = original
        seconds = time.perf_counter() - start
        certified_trials = result.empirical.epsilon["trials"]["a"]
        ceiling = algorithm.ceiling(certified_trials)
        rows.append({"algorithm": name, "claim": algorithm.claim, "exact": algorithm.exact,
                     "certified": result.epsilon_lower_bound, "ceiling": ceiling,
                     "score": result.attack["score"], "method": result.empirical.method,
                     "tie_fraction": result.empirical.epsilon.get("tie_fraction"),
                     "seconds": round(seconds, 2), "choice_share": round(spent[0] / seconds, 3)})
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
