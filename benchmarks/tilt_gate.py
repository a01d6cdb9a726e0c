"""How often the exponential tilt's gate keeps the straight line (``audit.statistics.tilt.fit_tilt``).

Run: ``python benchmarks/tilt_gate.py [--seeds 200]``. For each case, seeded draws of calibration scores
(seeds 0 to ``seeds - 1``, ``numpy.random.default_rng(seed)``) and the share of them for which ``fit_tilt``
returns a tilt (kept), against the cases' truth: a Gaussian shift and a count of independent signs are true
tilts (kept should be near 1; the gate's level is 0.01), a Laplace shift is not (its ratio is flat outside
the shift; kept is the share the gate misses). ``--all-knots`` tests the line inside the spline with every
knot, as before a knot whose tail holds one dataset only was left out (docs/theory.md 7).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dpaudit.auditing.statistics import tilt

SIGNS, SIGN_SHIFT = 20, (1 - math.exp(-1 / 200)) / 2


def _cases(size_small: int, size_large: int):
    yield "gaussian shift 2, 100 per side", lambda rng: (rng.normal(0, 1, size_small), rng.normal(2, 1, size_small))
    yield "gaussian shift 0.05, 50,000 per side", lambda rng: (rng.normal(0, 1, size_large),
                                                              rng.normal(0.05, 1, size_large))
    yield "20 signs shifted 0.0025, 50,000 per side", lambda rng: (
        rng.binomial(SIGNS, 0.5, size_large).astype(float),
        rng.binomial(SIGNS, 0.5 + SIGN_SHIFT, size_large).astype(float))
    yield "laplace shift 1, 100 per side", lambda rng: (rng.laplace(0, 1, size_small), rng.laplace(1, 1, size_small))
    yield "laplace shift 1, 50,000 per side", lambda rng: (rng.laplace(0, 1, size_large), rng.laplace(1, 1, size_large))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--all-knots", action="store_true", help="every knot, as before (for comparison)")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.all_knots:  # every quantile knot, whatever its tail holds
        tilt._informative_knots = lambda centred, labels: tilt._quantile_knots(centred)
    for name, draw in _cases(100, 50_000):
        kept = sum(tilt.fit_tilt(*draw(np.random.default_rng(seed))) is not None for seed in range(args.seeds))
        print(f"{name}: kept {kept}/{args.seeds}", flush=True)


if __name__ == "__main__":
    main()
