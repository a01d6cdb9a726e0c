"""Stop at the first certified violation: a float leak in user code against its correct twin.

The README's regression test, written with default settings: ``assert_private`` of a user function
``clip(x).sum() + rng.laplace(0, 1)`` (S sums to 0, S' to 1; claim epsilon 1, 10^5 trials per side)
released in plain floats (it leaks through its low bits: Mironov 2012), and of its twin whose output is
rounded to a 2^-12 grid (correct). Reports, per seed, the wall time until ``PrivacyViolation`` is raised
for the leak and until the twin passes (wall and this process's CPU time: on a shared machine the CPU
ratio is the steadier figure), the trials each used and the score that certified.
Run: ``python benchmarks/early_stop.py [--seeds 3] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import dpaudit

PAIR = (np.array([[0.0]]), np.array([[1.0]]))


def leaky(records, rng):
    """Plain-float Laplace sum: the low bits of the release depend on the dataset."""
    return [np.clip(records[:, 0], 0.0, 1.0).sum() + rng.laplace(0.0, 1.0)]


def twin(records, rng):
    """The same release rounded to multiples of 2^-12 (post-processing of the ideal mechanism)."""
    return [np.round((np.clip(records[:, 0], 0.0, 1.0).sum() + rng.laplace(0.0, 1.0)) * 4096.0) / 4096.0]


def run(fn, seed: int, trials: int) -> dict:
    mechanism = dpaudit.from_callable(fn, output_dim=1)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        summary = dpaudit.assert_private(mechanism, epsilon=1.0, delta=1e-5, dataset_pair=PAIR, trials=trials,
                                         seed=seed)
        outcome = {"outcome": "passed", "epsilon_lower_bound": summary["epsilon_lower_bound"],
                   "trials_used": summary["trials_used"], "score": summary["score"]}
    except dpaudit.PrivacyViolation as violation:
        outcome = {"outcome": "violation", "message": str(violation)}
    outcome["seconds"] = time.perf_counter() - start
    outcome["cpu_seconds"] = time.process_time() - cpu  # this process's CPU (workers=1: every trial runs here)
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    run(twin, 0, 2_000)  # imports and first-call costs outside the timings
    rows = []
    for seed in range(args.seeds):
        rows.append({"seed": seed, "leaky": run(leaky, seed, args.trials), "twin": run(twin, seed, args.trials)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        leak, correct = row["leaky"], row["twin"]
        print(f"seed {row['seed']}: leaky {leak['outcome']} in {leak['seconds']:.2f} s wall, {leak['cpu_seconds']:.2f} s "
              f"CPU; twin {correct['outcome']} (eps >= {correct.get('epsilon_lower_bound', float('nan')):.3f}, "
              f"{correct.get('trials_used')} trials) in {correct['seconds']:.2f} s wall, {correct['cpu_seconds']:.2f} s "
              f"CPU; ratio {leak['seconds'] / correct['seconds']:.3f} wall, "
              f"{leak['cpu_seconds'] / correct['cpu_seconds']:.3f} CPU")
        if leak["outcome"] == "violation":
            print("   ", leak["message"])


if __name__ == "__main__":
    main()
