"""Throughput: trials per second of ``mech.sample`` against the noise floor and a per-trial loop.

Run: ``python benchmarks/throughput.py [--trials N] [--rounds R] [--json]``. The
mechanism, its floor and its loop run back to back in each of ``R`` rounds;
ratios are taken within a round (absolute times drift on shared machines) and
reported as the median over rounds, with their range:

* ``ratio_to_floor`` = mechanism rate / rate of drawing the same noise alone, the
  way the mechanism draws it (NumPy PCG64, one buffer per tile refilled in
  place each step, tiles in parallel threads; DP-LSSGD also draws its batch
  uniforms); 1 would mean the computation is free.
* ``speedup_over_loop`` = mechanism rate / rate of a straightforward per-trial
  NumPy loop of the same algorithm (the baseline a researcher would write).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time

import numpy as np
import torch

from dpaudit import mechanisms
from dpaudit.mechanisms import noise, tiles


def _floor(rng, trials: int, steps: int, dim: int = 10, uniforms: int = 0) -> None:
    """The noise of ``steps`` steps drawn exactly as the mechanisms draw it: in tiles, in threads.

    ``uniforms`` per trial per step are drawn too (batch membership of DP-LSSGD).
    """
    def tile(rows: int, generator: np.random.Generator) -> None:
        source = noise.StepNoise("gaussian", (rows, dim), generator, torch.float64)
        for _ in range(steps):
            source.next()
            if uniforms:
                generator.random((rows, uniforms))

    tiles.run(tile, trials, rng)


def timed_rounds(functions: dict, rounds: int) -> list[dict[str, float]]:
    """Wall times of each function in ``rounds`` rounds; in a round the functions run back to back.

    On a shared machine absolute speed drifts within seconds (the per-trial loop
    alone varied from 885 to 1,134 trials/s over eight consecutive runs), so
    ratios are taken within a round, where all functions saw the same machine,
    and summarised by their median over rounds.
    """
    times = []
    for _ in range(rounds):
        row = {}
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            row[name] = time.perf_counter() - start
        times.append(row)
    return times


def _loop_pnsgd(trials, n, dim, eta, sigma, radius, loss, rng, epochs=1):
    records = np.zeros((n, dim + (1 if loss == "logistic" else 0)))
    records[-1, 0] = 1.0  # the canary e_1 (label 0 counts as +1)
    out = np.empty((trials, dim))
    for trial in range(trials):
        w = np.zeros(dim)
        for _ in range(epochs):
            for t in range(n):
                if loss == "logistic":
                    x, y = records[t, :dim], (1.0 if records[t, dim] >= 0 else -1.0)
                    grad = -y * x / (1 + math.exp(y * float(x @ w)))
                else:
                    grad = records[t]
                w = w - eta * (grad + sigma * rng.standard_normal(dim))
                norm = np.linalg.norm(w)
                if norm > radius:
                    w = w * (radius / norm)
        out[trial] = w
    return out


def _loop_kernel(trials, n, dim, sigma, radius, rng):
    out = np.empty((trials, dim))
    for trial in range(trials):
        x = np.zeros(dim)
        for _ in range(n):
            x = x + sigma * rng.standard_normal(dim)
            norm = np.linalg.norm(x)
            if norm > radius:
                x = x * (radius / norm)
        out[trial] = x
    return out


def _loop_lssgd(trials, n, dim, batch, steps, eta, noise_std, smoothing, rng):
    k = np.arange(dim)
    denominator = 1 + 2 * smoothing - 2 * smoothing * np.cos(2 * np.pi * k / dim)
    records = np.zeros((n, dim))
    records[-1, 0] = 1.0
    out = np.empty((trials, dim))
    for trial in range(trials):
        theta = np.zeros(dim)
        for _ in range(steps):
            batch_idx = rng.choice(n, batch, replace=False)
            g = records[batch_idx].mean(0) + noise_std * rng.standard_normal(dim)
            theta = theta - eta * np.real(np.fft.ifft(np.fft.fft(g) / denominator))
        out[trial] = theta
    return out


CASES = {
    "pnsgd-linear-ball": dict(mech=dict(name="pnsgd", n=100, dim=10, eta=0.1, sigma=1.0, loss="linear"),
                              noise=lambda rng, t: _floor(rng, t, 100),
                              loop=lambda rng, t: _loop_pnsgd(t, 100, 10, 0.1, 1.0, 1.0, "linear", rng)),
    "pnsgd-logistic-ball": dict(mech=dict(name="pnsgd", n=100, dim=10, eta=0.1, sigma=1.0, loss="logistic"),
                                noise=lambda rng, t: _floor(rng, t, 100),
                                loop=lambda rng, t: _loop_pnsgd(t, 100, 10, 0.1, 1.0, 1.0, "logistic", rng)),
    "multi-epoch-pnsgd": dict(mech=dict(name="multi-epoch-pnsgd", n=100, dim=10, eta=0.1, sigma=1.0, epochs=3),
                              noise=lambda rng, t: _floor(rng, t, 300),
                              loop=lambda rng, t: _loop_pnsgd(t, 100, 10, 0.1, 1.0, 1.0, "linear", rng, 3)),
    "dp-lssgd": dict(mech=dict(name="dp-lssgd", n=100, dim=10, batch_size=10, steps=100, noise_std=1.0),
                     # one record with a non-zero gradient: the mechanism draws its batch membership only
                     noise=lambda rng, t: _floor(rng, t, 100, uniforms=1),
                     loop=lambda rng, t: _loop_lssgd(t, 100, 10, 10, 100, 0.1, 1.0, 1.0, rng)),
    "projected-kernel": dict(mech=dict(name="projected-kernel", n=100, dim=10, sigma=0.1),
                             noise=lambda rng, t: _floor(rng, t, 100),
                             loop=lambda rng, t: _loop_kernel(t, 100, 10, 0.1, 1.0, rng)),
}


def measure(trials: int, loop_trials: int, rounds: int = 5) -> list[dict]:
    rows = []
    for name, case in CASES.items():
        params = dict(case["mech"])
        mech = mechanisms.make(params.pop("name"), **params)
        data = mech.default_dataset()
        if name != "projected-kernel":  # as in the loops: zero records and a canary e_1 last
            records = data.records.copy()
            records[-1, 0] = 1.0
            data = mechanisms.Dataset(records)
        mech.sample(data, trials=100, seed=0)  # warm up
        times = timed_rounds({
            "mechanism": lambda: mech.sample(data, trials=trials, seed=1),
            "floor": lambda: case["noise"](np.random.default_rng(2), trials),
            "loop": lambda: case["loop"](np.random.default_rng(3), loop_trials),
        }, rounds)
        rate = np.array([trials / row["mechanism"] for row in times])
        floor_rate = np.array([trials / row["floor"] for row in times])
        loop_rate = np.array([loop_trials / row["loop"] for row in times])
        to_floor, over_loop = rate / floor_rate, rate / loop_rate
        rows.append({"name": name, "trials": trials, "loop_trials": loop_trials, "rounds": rounds,
                     "trials_per_second": float(np.median(rate)),
                     "floor_trials_per_second": float(np.median(floor_rate)),
                     "loop_trials_per_second": float(np.median(loop_rate)),
                     "ratio_to_floor": float(np.median(to_floor)),
                     "ratio_to_floor_range": [float(to_floor.min()), float(to_floor.max())],
                     "speedup_over_loop": float(np.median(over_loop)),
                     "speedup_over_loop_range": [float(over_loop.min()), float(over_loop.max())]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50_000)
    parser.add_argument("--loop-trials", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.trials, args.loop_trials, args.rounds)
    machine = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
               "torch_threads": torch.get_num_threads(), "tile_threads": tiles.threads(),
               "tile_trials": tiles.TILE_TRIALS, "cpus": __import__("os").cpu_count()}
    if args.json:
        json.dump({"benchmark": "throughput", "machine": machine, "results": rows}, sys.stdout, indent=2)
        print()
        return 0
    print(f"median of {args.rounds} rounds (range over rounds in brackets)")
    print(f"{'case':<22} {'trials/s':>10} {'floor/s':>10} {'loop/s':>8} {'vs floor':>17} {'vs loop':>16}")
    for r in rows:
        low, high = r["ratio_to_floor_range"]
        slow, fast = r["speedup_over_loop_range"]
        print(f"{r['name']:<22} {r['trials_per_second']:>10.0f} {r['floor_trials_per_second']:>10.0f} "
              f"{r['loop_trials_per_second']:>8.0f} {r['ratio_to_floor']:>5.2f} [{low:.2f}-{high:.2f}] "
              f"{r['speedup_over_loop']:>5.0f}x [{slow:.0f}-{fast:.0f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
