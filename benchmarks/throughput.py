"""Throughput: trials per second of ``mech.sample`` against the noise floor and a per-trial loop.

Run: ``python benchmarks/throughput.py [--trials N] [--json]``. Ratios are measured in
one run, since absolute times drift on shared machines:

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

import mechanisms
from mechanisms import noise, tiles


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


def best_times(functions: dict, repeats: int = 3) -> dict[str, float]:
    """Best of ``repeats`` wall times of each function, the functions taking turns.

    Taking turns spreads any slow period of a shared machine over all of them,
    so their ratios are fair even when absolute times drift.
    """
    best = {name: math.inf for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


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


def measure(trials: int, loop_trials: int) -> list[dict]:
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
        times = best_times({
            "mechanism": lambda: mech.sample(data, trials=trials, seed=1),
            "floor": lambda: case["noise"](np.random.default_rng(2), trials),
            "loop": lambda: case["loop"](np.random.default_rng(3), loop_trials),
        })
        mech_time, floor_time, loop_time = times["mechanism"], times["floor"], times["loop"]
        rate, floor_rate, loop_rate = trials / mech_time, trials / floor_time, loop_trials / loop_time
        rows.append({"name": name, "trials": trials, "trials_per_second": rate,
                     "floor_trials_per_second": floor_rate, "loop_trials_per_second": loop_rate,
                     "ratio_to_floor": rate / floor_rate, "speedup_over_loop": rate / loop_rate})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50_000)
    parser.add_argument("--loop-trials", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.trials, args.loop_trials)
    machine = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
               "torch_threads": torch.get_num_threads(), "cpus": __import__("os").cpu_count()}
    if args.json:
        json.dump({"benchmark": "throughput", "machine": machine, "results": rows}, sys.stdout, indent=2)
        print()
        return 0
    print(f"{'case':<22} {'trials/s':>12} {'floor/s':>12} {'loop/s':>10} {'vs floor':>9} {'vs loop':>9}")
    for r in rows:
        print(f"{r['name']:<22} {r['trials_per_second']:>12.0f} {r['floor_trials_per_second']:>12.0f} "
              f"{r['loop_trials_per_second']:>10.0f} {r['ratio_to_floor']:>9.2f} {r['speedup_over_loop']:>8.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
