"""The exact epsilon of DP-SGD's last iterate (a mixture over the canary's participation count) against steps and
sampling rate: the values the gallery's hidden-state map and the reports' exact-value column compute.

Run: ``python benchmarks/last_iterate.py [--json]``. Each row times one ``exact_epsilon`` (the root searches of
``mechanisms/accounting/last_iterate.py``) on the instances of ``dpaudit/gallery/maps.py``: a gradient canary
against nothing, Poisson batches, noise multiplier 1, delta 1e-5.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms.accounting.instances import exact_epsilon

DELTA = 1e-5
BASE = dict(n=100, dim=1, eta=0.5, noise_std=0.1, sampling="poisson", batch_size=10)
INSTANCES = ([("steps", steps, {"steps": steps}) for steps in (5, 20, 50, 200)]
             + [("rate", rate, {"steps": 50, "batch_size": round(100 * rate), "noise_std": 1.0 / round(100 * rate)})
                for rate in (0.02, 0.3, 1.0)])


def measure() -> list[dict]:
    rows = []
    for axis, value, changes in INSTANCES:
        mech = mechanisms.make("dp-sgd", **{**BASE, **changes})
        pair = CanarySpec(kind="gradient", pair="zero").build(mech, 100)
        started = time.perf_counter()
        epsilon = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
        rows.append({axis: value, "epsilon": epsilon, "seconds": time.perf_counter() - started})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure()
    if args.json:
        json.dump({"benchmark": "last_iterate", "results": rows}, sys.stdout, indent=2)
        print()
        return 0
    for row in rows:
        axis = "steps" if "steps" in row else "rate"
        print(f"{axis} {row[axis]:>6}: epsilon {row['epsilon']:.9f} in {row['seconds']:.3f} s")
    print(f"total {sum(row['seconds'] for row in rows):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
