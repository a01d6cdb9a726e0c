"""Statistical efficiency: certified epsilon and mu as a fraction of what is achievable.

* Gaussian mechanism (mu = 1), 10^4..10^6 trials per side: certified epsilon /
  oracle ceiling (docs/theory.md 3.4) and certified mu, over several seeds.
* Reset canary in ``projected-kernel``: certified mu / exact mu by canary index.

Run: ``python benchmarks/tightness.py [--seeds K] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.statistics.ceiling import gaussian_ceiling
from dpaudit.auditing.jobs.api import audit
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound


def gaussian_rows(seeds: int) -> list[dict]:
    rows = []
    for trials in (10**4, 10**5, 10**6):
        ceiling = gaussian_ceiling(1.0, trials=trials, delta=1e-5)
        ratios, mus = [], []
        for seed in range(seeds):
            rng = np.random.default_rng(1000 + seed)
            a, b = rng.standard_normal(trials), rng.standard_normal(trials) + 1.0
            ratios.append(epsilon_lower_bound(a, b, delta=1e-5, seed=seed).epsilon_lower_bound / ceiling)
            mus.append(gdp_lower_bound(a, b, seed=seed).mu_lower_bound)
        rows.append({"case": "gaussian mu=1", "trials": trials, "ceiling": ceiling,
                     "epsilon_over_ceiling_mean": float(np.mean(ratios)), "epsilon_over_ceiling_min": float(np.min(ratios)),
                     "mu_mean": float(np.mean(mus)), "mu_min": float(np.min(mus))})
    return rows


def kernel_rows(trials: int) -> list[dict]:
    mech = mechanisms.make("projected-kernel", n=10, sigma=0.5, shift=1.0, domain="whole")
    rows = []
    for t in (1, 4, 7, 10):
        exact = 2 / (0.5 * math.sqrt(10 - t + 1))
        mu = audit(pair=CanarySpec(kind="reset").build(mech, t), trials=trials, delta=1e-5, seed=t).empirical.mu_lower_bound
        rows.append({"case": "reset canary", "index": t, "trials": trials, "exact_mu": exact, "certified_mu": mu,
                     "ratio": mu / exact})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--kernel-trials", type=int, default=200_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    gaussian, kernel = gaussian_rows(args.seeds), kernel_rows(args.kernel_trials)
    if args.json:
        json.dump({"benchmark": "tightness", "gaussian": gaussian, "kernel": kernel}, sys.stdout, indent=2)
        print()
        return 0
    for r in gaussian:
        print(f"gaussian mu=1, {r['trials']:>8} trials: eps/ceiling mean {r['epsilon_over_ceiling_mean']:.3f} "
              f"(min {r['epsilon_over_ceiling_min']:.3f}), mu mean {r['mu_mean']:.3f} (min {r['mu_min']:.3f})")
    for r in kernel:
        print(f"reset canary t={r['index']:>2}: certified mu {r['certified_mu']:.4f} / exact {r['exact_mu']:.4f} "
              f"= {r['ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
