"""The exact accountant's time against grid size and number of steps.

Run: ``python benchmarks/exact.py [--json]``. Each timing includes the
half-grid rerun that estimates the discretisation error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from dpaudit.mechanisms.accounting.exact1d import Step, exact_profile


def measure() -> list[dict]:
    rows = []
    for steps in (10, 100, 1000):
        for cells in (1024, 4096, 16384):
            def instance(sign):
                return [Step(0.0, 1.0, 0.2)] * (steps - 1) + [Step(-0.1 * sign, 1.0, 0.2)]
            started = time.perf_counter()
            result = exact_profile(instance(1), instance(-1), [1.0], low=0.0, high=1.0, start=0.5, cells=cells)
            rows.append({"steps": steps, "cells": cells, "seconds": time.perf_counter() - started,
                         "delta_at_eps_1": float(result["delta"][0]), "grid_error": float(result["grid_error"][0])})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure()
    if args.json:
        json.dump({"benchmark": "exact", "results": rows}, sys.stdout, indent=2)
        print()
        return 0
    for r in rows:
        print(f"{r['steps']:>5} steps, {r['cells']:>6} cells: {r['seconds']:.3f} s, delta(1) = {r['delta_at_eps_1']:.6g} "
              f"(grid error {r['grid_error']:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
