"""Throughput of dp-mf's correlated noise: trials per second against the noise floor (docs/theory.md 12.1).

Run: ``python benchmarks/dp_mf.py [--trials N] [--steps N] [--bands B] [--rounds R] [--json]``.

A banded strategy (the banded square root, ``B`` bands) over ``N`` steps, a
one-dimensional linear-loss model, 10^5 trials per call by default. The floor
is drawing the same normals alone, the way the sampler draws them: blocks of
32 steps per tile, tiles in threads (``mechanisms.tiles``). Three releases:

* ``final``: the last iterate, which reads the summed noise ``<C^{-T} 1, z>``
  (one product per block, no recursion);
* ``iterates``: every iterate: the block forward substitution (two GEMMs per
  block of 32 steps over every trial) and a running sum per block;
* ``final-projected``: the last iterate on a ball, where every step is
  projected: the per-step loop, each step's noise read from the solved block.

Ratios are taken within a round (the mechanism right after its floor) and
reported as the median over rounds with their range, as in
``benchmarks/throughput.py``.

``--mode audits`` instead audits every noisy iterate of the identity, the tree
and the banded square root (4 bands) with 1 and 4 cyclic participations
(64 steps, 64 records, noise multiplier 4) at ``--trials`` per side: the
certified bound, the exact value and the ceiling band, and whether the bound
lies inside the band.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import dpaudit
from dpaudit.mechanisms import tiles

BLOCK = 32


def _floor(trials: int, steps: int, dim: int = 1) -> None:
    """The normals of ``steps`` steps, drawn as the sampler draws them."""
    def tile(rows: int, generator: np.random.Generator) -> None:
        for start in range(0, steps, BLOCK):
            generator.standard_normal((rows * dim, min(BLOCK, steps - start)))

    tiles.run(tile, trials, np.random.default_rng(0))


def _timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=float, default=1e5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--bands", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("throughput", "audits"), default="throughput")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    trials = int(args.trials)
    if args.mode == "audits":
        return _audits(trials, args.json)
    cases = {"final": {}, "iterates": {"output": "iterates"},
             "final-projected": {"domain": "ball", "radius": 1e6}}
    rows = []
    for name, extra in cases.items():
        mech = dpaudit.make("dp-mf", n=args.steps, steps=args.steps, strategy="banded-sqrt", bands=args.bands,
                            noise_multiplier=1.0, **extra)
        mech.sample(trials=64, seed=0)  # the strategy's blocks are built once per process
        ratios, rates = [], []
        for round_ in range(args.rounds):
            floor = _timed(lambda: _floor(trials, args.steps))
            seconds = _timed(lambda: mech.sample(trials=trials, seed=round_))
            ratios.append(floor / seconds)
            rates.append(trials / seconds)
        rows.append({"name": name, "trials": trials, "steps": args.steps, "bands": args.bands,
                     "trials_per_second": statistics.median(rates), "ratio_to_floor": statistics.median(ratios),
                     "ratio_to_floor_range": [min(ratios), max(ratios)]})
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    if args.json:
        json.dump({"machine": machine, "results": rows}, sys.stdout, indent=2)
        print()
        return 0
    print(f"load average {machine['load_average']:.2f}, {machine['cpus']} cpus")
    print(f"{'release':18}{'trials/s':>12}{'ratio to floor':>16}  range")
    for row in rows:
        low, high = row["ratio_to_floor_range"]
        print(f"{row['name']:18}{row['trials_per_second']:12.0f}{row['ratio_to_floor']:16.3f}  [{low:.2f}-{high:.2f}]")
    return 0


def _audits(trials: int, as_json: bool) -> int:
    rows = []
    for strategy, extra in (("identity", {}), ("tree", {}), ("banded-sqrt", {"bands": 4})):
        for epochs in (1, 4):
            mech = dpaudit.make("dp-mf", n=64, steps=64, epochs=epochs, strategy=strategy, noise_multiplier=4.0,
                                output="iterates", **extra)
            start = time.perf_counter()
            result = dpaudit.audit(mech, trials=trials, delta=1e-5, seed=0)
            row = result.per_index[0]
            exact = next(c.epsilon for c in row.claims if c.name == "exact-instance")
            low, high = row.ceiling_band
            rows.append({"strategy": strategy, "epochs": epochs, "index": row.index,
                         "epsilon_lower_bound": result.epsilon_lower_bound, "exact": exact,
                         "ceiling": row.ceiling, "ceiling_band": [low, high],
                         "inside_band": bool(low <= result.epsilon_lower_bound <= high),
                         "score": result.attack["score"], "seconds": time.perf_counter() - start})
    if as_json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'strategy':14}{'k':>3}{'index':>7}{'certified':>11}{'exact':>9}{'ceiling':>9}  band          inside  s")
    for row in rows:
        low, high = row["ceiling_band"]
        print(f"{row['strategy']:14}{row['epochs']:>3}{row['index']:>7}{row['epsilon_lower_bound']:11.3f}"
              f"{row['exact']:9.3f}{row['ceiling']:9.3f}  {low:.3f}-{high:.3f}  {str(row['inside_band']):6}"
              f"{row['seconds']:6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
