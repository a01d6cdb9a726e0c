"""What the audit's statistics certify on an exact Gaussian pair at ``mu = 2``: docs/guide.md's yardstick for the
full-batch model audits ("Auditing models on real data").

Run: ``python benchmarks/records/doc_figures/ideal_gaussian_pair.py`` (about 20 s on one core). For 1,000 and
500 trials per side (the digits MLP's and the iris block's), 40 seeded audits (seeds 0-39) of dpaudit's
``gaussian`` mechanism at ``sigma = 1`` on its replace-one canary (the sum moves by 2: ``mu = 2``), with the
default design (a tenth of the trials calibrates the test), ``delta = 1e-5``, confidence 0.95. Prints the
median certified bound, its 10% and 90% quantiles (``numpy.quantile``, linear), the share of seeds at or above
3.0, and the share below the iris block's band (``[2.22, 3.52]``, its printed ceiling band). Then, for 1,000
trials per side, the same for raw ``N(0, 1)`` against ``N(2, 1)`` scores (``numpy.random.default_rng(seed)``,
seeds 0-39) certified by ``epsilon_lower_bound`` with the test placed by the calibration counts and by the
exponential tilt (``tail_model="tilt"``, as a full-batch training's ``projection`` is placed). The output is kept
in ``ideal_gaussian_pair.txt`` beside this file, which ``tests/package/test_doc_figures.py`` reads.
"""

from __future__ import annotations

import numpy as np

import dpaudit
from dpaudit.auditing.statistics.estimators import epsilon_lower_bound

SEEDS, DELTA, IRIS_BAND_LOW = 40, 1e-5, 2.22


def _summary(bounds: np.ndarray) -> str:
    low, high = np.quantile(bounds, [0.1, 0.9])
    return (f"median {np.median(bounds):.4f}, 10% below {low:.4f}, 10% above {high:.4f}; at or above 3.0: "
            f"{np.mean(bounds >= 3.0):.0%}; below {IRIS_BAND_LOW}: {np.mean(bounds < IRIS_BAND_LOW):.0%}")


def _raw_pair(seed: int, tail_model: str) -> float:
    rng = np.random.default_rng(seed)
    scores_a, scores_b = rng.normal(0.0, 1.0, 1_000), rng.normal(2.0, 1.0, 1_000)
    return epsilon_lower_bound(scores_a, scores_b, delta=DELTA, seed=seed, tail_model=tail_model).epsilon_lower_bound


def main() -> None:
    mechanism = dpaudit.make("gaussian", sigma=1.0)
    for trials in (1_000, 500):
        bounds = np.array([dpaudit.audit(mechanism, trials=trials, delta=DELTA, seed=seed).epsilon_lower_bound
                           for seed in range(SEEDS)])
        print(f"{trials} trials per side, {SEEDS} seeds: {_summary(bounds)}", flush=True)
    for tail_model in ("calibration", "tilt"):
        bounds = np.array([_raw_pair(seed, tail_model) for seed in range(SEEDS)])
        print(f"raw scores, 1000 per side, placed by {tail_model}, {SEEDS} seeds: {_summary(bounds)}", flush=True)


if __name__ == "__main__":
    main()
