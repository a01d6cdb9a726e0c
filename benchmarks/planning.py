"""Seconds to place an audit's test on its calibration scores (``plan_epsilon``, hedged, planned budget).

Every audit runs this once per score after fitting it (``audit.statistics.estimators.plan_epsilon``): the
candidate thresholds' Clopper-Pearson and conditional bounds at each planning level, for the counts' test,
the thin tail's, the wide member's and the exponential tilt's (docs/theory.md 7). The cases are seeded
Laplace scores shifted by ``mu`` (continuous) and the same rounded to 40 values (few-valued, with atoms),
at ``--calibration`` trials per side, planned for seven times as many certification trials.

Run: ``python benchmarks/planning.py [--calibration 20000 200000] [--rounds 3] [--json]``.
The seconds are each case's median over the rounds, measured in one process; compare two versions of the
code with a whole-process timer on the same machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from dpaudit.auditing.statistics.estimators import plan_epsilon


def _scores(kind: str, calibration: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = 0.1  # a log-ratio of the size an epsilon-0.1 audit meets
    a, b = rng.laplace(0.0, 1.0, calibration), rng.laplace(mu, 1.0, calibration)
    if kind == "few-valued":
        a, b = np.clip(np.round(a * 4), -20, 20), np.clip(np.round(b * 4), -20, 20)
    return a, b


def run(calibrations: list[int], rounds: int) -> list[dict]:
    rows = []
    for calibration in calibrations:
        for kind in ("continuous", "few-valued"):
            a, b = _scores(kind, calibration, seed=calibration)
            planned = (7 * calibration, 7 * calibration)
            seconds = []
            for _ in range(rounds):
                start = time.perf_counter()
                plan = plan_epsilon(a, b, delta=0.0, confidence=0.95, planned=planned, seed=0, tail_model="hedged")
                seconds.append(time.perf_counter() - start)
            members = len(getattr(plan, "members", (plan,)))
            rows.append({"case": kind, "calibration": calibration, "seconds": statistics.median(seconds),
                         "members": members})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration", type=float, nargs="+", default=[2e4, 2e5])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run([int(c) for c in args.calibration], args.rounds)
    if args.json:
        print(json.dumps({"rounds": args.rounds, "rows": rows}))
    else:
        print(f"{'case':12s} {'calibration':>12s} {'seconds':>8s} {'tests':>6s}")
        for row in rows:
            print(f"{row['case']:12s} {row['calibration']:12d} {row['seconds']:8.3f} {row['members']:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
