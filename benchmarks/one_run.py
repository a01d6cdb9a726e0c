"""One-run estimators side by side: each one's certified bound on the same canary scores.

* Ideal Gaussian scores: 10^4 canaries, N(2, 1) when included and N(0, 1) otherwise (mu = 2 per canary,
  epsilon 10.0 at delta 1e-5), the project's own comparison (docs/theory.md 3.3, 9), over seeds.
* The CNN's canaries: one training run of ``examples/models/cnn/one_run.toml`` (1,000 gradient canaries),
  every estimator on its scores, and the model-based Gaussian-pair estimate beside them.

Every bound is certified at confidence 0.95 with the guess count chosen on calibration canaries
(``calibrate``) or by a union bound over 16 counts (``union``). Run:
``python benchmarks/one_run.py [--seeds K] [--json]`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dpaudit.auditing.statistics.one_run_fdp import METHODS, one_run_audit

DELTA = 1e-5
RULES = ("calibrate", "union")
ROOT = Path(__file__).resolve().parents[1]


def gaussian_rows(seeds: int) -> list[dict]:
    rows = []
    for method in METHODS:
        for rule in RULES:
            bounds = []
            for seed in range(seeds):
                rng = np.random.default_rng(seed)
                included = rng.integers(0, 2, 10_000)
                scores = rng.standard_normal(10_000) + 2.0 * included
                bounds.append(one_run_audit(scores, included, delta=DELTA, method=method,
                                            guesses=rule).epsilon_lower_bound)
            rows.append({"case": "ideal gaussian (truth 10.0)", "method": method, "guesses": rule,
                         "epsilon_min": min(bounds), "epsilon_mean": float(np.mean(bounds)),
                         "epsilon_max": max(bounds)})
    return rows


def cnn_rows() -> list[dict]:
    from dpaudit.auditing.jobs.config import load_configs
    from dpaudit.auditing.jobs.one_run_design import draw_canaries
    from dpaudit.auditing.jobs.one_run_result import run_one_run
    from dpaudit.auditing.jobs.store import Store

    job = load_configs([ROOT / "examples" / "models" / "cnn" / "one_run.toml"])[0].job()
    with Store(":memory:") as store:
        result = run_one_run(job, store)
        scores = store.get_chunks(result.audit_id, 0, "a", "cert")
    included = draw_canaries(job, 0).included
    rows = [{"case": "cnn, 1000 gradient canaries", "method": method, "guesses": rule,
             "epsilon": one_run_audit(scores, included, delta=DELTA, method=method, guesses=rule).epsilon_lower_bound}
            for method in METHODS for rule in RULES]
    rows.append({"case": "cnn, 1000 gradient canaries", "method": "gaussian-pair (model-based, not certified)",
                 "guesses": "-", "epsilon": result.empirical.model_based_epsilon})
    claims = {c.name: c.epsilon for c in result.claims if c.applicable and c.epsilon is not None}
    rows.append({"case": "cnn claims", "method": ", ".join(f"{k} {v:.3f}" for k, v in claims.items()),
                 "guesses": "-", "epsilon": None})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = gaussian_rows(args.seeds) + cnn_rows()
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for row in rows:
        values = (f"{row['epsilon_min']:.3f} / {row['epsilon_mean']:.3f} / {row['epsilon_max']:.3f} (min/mean/max)"
                  if "epsilon_min" in row else ("" if row["epsilon"] is None else f"{row['epsilon']:.3f}"))
        print(f"{row['case']:<30} {row['method']:<45} {row['guesses']:<10} {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
