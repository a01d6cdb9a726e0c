"""The first audit of a process against its second: what a one-test CI job pays.

Each round starts a fresh Python process that makes a ``pnsgd`` mechanism
(``n=100, dim=10, eta=0.1, sigma=1, domain="ball", radius=1``; making it
imports numpy and torch, which any audit of a built-in mechanism needs),
then times two ``dpaudit.audit`` calls of 2 x 10^4 trials per side with
different seeds (default settings: every applicable score is tried). The
first pays for the imports and caches of the audit path; the second does
not. It also records which heavy modules the process holds after the
audits (``torch._dynamo`` should not be among them: no score of a model-free
audit needs it). The ratio first / second is the figure to compare (target
at most 1.5); on a shared machine absolute seconds drift with the load, the
ratio within one process much less.
Run: ``python benchmarks/first_audit.py [--rounds 5] [--trials 20000] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import dpaudit
mechanism = dpaudit.make("pnsgd", n=100, dim=10, eta=0.1, sigma=1.0, domain="ball", radius=1.0)
trials = int(sys.argv[1])
seconds = []
for seed in (0, 1):
    start = time.perf_counter()
    dpaudit.audit(mechanism, trials=trials, delta=1e-5, seed=seed)
    seconds.append(time.perf_counter() - start)
heavy = ["torch._dynamo", "statsmodels", "pandas", "scipy.stats", "scipy.signal", "sklearn"]
print(json.dumps({"first": seconds[0], "second": seconds[1], "loaded": [m for m in heavy if m in sys.modules]}))
"""


def one_round(trials: int) -> dict:
    """Two audits in a fresh process: their wall times and the heavy modules then loaded."""
    result = subprocess.run([sys.executable, "-c", CHILD, str(trials)], capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes (default 5)")
    parser.add_argument("--trials", type=int, default=20_000, help="trials per side of each audit")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    rounds = [one_round(args.trials) for _ in range(args.rounds)]
    ratios = [r["first"] / r["second"] for r in rounds]
    summary = {"trials": args.trials, "load_average": os.getloadavg()[0], "rounds": rounds,
               "ratio_median": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)]}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"first / second dpaudit.audit of pnsgd, {args.trials} trials per side, fresh processes "
          f"(load {summary['load_average']:.1f})")
    print("round  first s  second s  ratio  heavy modules loaded")
    for number, (r, ratio) in enumerate(zip(rounds, ratios), 1):
        print(f"{number:5d}  {r['first']:7.2f}  {r['second']:8.2f}  {ratio:5.2f}  {', '.join(r['loaded']) or '-'}")
    print(f"median ratio {summary['ratio_median']:.2f} [{summary['ratio_range'][0]:.2f}-{summary['ratio_range'][1]:.2f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
