"""Training many private models at once: the ``model`` mechanism against a per-trial loop and plain products.

Workload (issue 18): 10^4 independent logistic-regression models on 30
features (scikit-learn's breast-cancer data, 569 records), 100 DP-SGD steps
with Poisson batches of expected size 64, per-example clipping.

- ``batched``: ``dpaudit.make("model", ...).sample(trials=10^4)``;
- ``loop``: the same training for one model at a time in torch (the same
  closed-form per-example gradients, batch drawn per step), timed on a few
  hundred trials and scaled to 10^4;
- ``products``: the same arithmetic written directly as batched matrix
  products over all trials at once, without the mechanism (no tiles, no
  canary, no snapping): the floor the mechanism is compared with.

A second part measures the peak memory of training 10^4 models of about
10^4 parameters (softmax regression on 64 features and 10 classes x a
wider input: the digits data, 650 parameters, is widened to 10,250 by
repeating features) with psutil in a child process.

Run: ``python benchmarks/models.py [--trials N] [--dtype float32|float64] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
import torch

import dpaudit
from dpaudit.mechanisms.models.data import load_records

STEPS, BATCH, CLIP, SIGMA, ETA = 100, 64, 1.0, 1.0, 0.5


def _setup(records: np.ndarray, dtype: torch.dtype):
    """Features, labels, per-record gradient scale ``|(x, 1)|`` and a seeded generator."""
    x = torch.as_tensor(np.array(records[:, :-1]), dtype=dtype)
    y = torch.as_tensor(np.array(records[:, -1]), dtype=dtype)
    return x, y, torch.sqrt(x.square().sum(dim=1) + 1.0), torch.Generator().manual_seed(0)


def _loop(records: np.ndarray, trials: int, dtype: torch.dtype) -> float:
    """Seconds per trial of the same training, one model at a time."""
    x, y, scale, generator = _setup(records, dtype)
    n, width = x.shape
    started = time.perf_counter()
    for _ in range(trials):
        w, b = torch.zeros(width, dtype=dtype), torch.zeros(1, dtype=dtype)
        for _ in range(STEPS):
            member = torch.rand(n, generator=generator, dtype=torch.float64) < BATCH / n
            xb, yb, sb = x[member], y[member], scale[member]
            residual = torch.sigmoid(xb @ w + b) - yb
            factor = torch.clamp(CLIP / (residual.abs() * sb).clamp_min(1e-300), max=1.0) * residual
            grad_w = factor @ xb + SIGMA * CLIP * torch.randn(width, generator=generator, dtype=dtype)
            grad_b = factor.sum() + SIGMA * CLIP * torch.randn(1, generator=generator, dtype=dtype)
            w = w - ETA * grad_w / BATCH
            b = b - ETA * grad_b / BATCH
    return (time.perf_counter() - started) / trials


def _products(records: np.ndarray, trials: int, dtype: torch.dtype) -> float:
    """Seconds of the same training as batched products over all trials at once."""
    x, y, scale, generator = _setup(records, dtype)
    n, width = x.shape
    started = time.perf_counter()
    w, b = torch.zeros(trials, width, dtype=dtype), torch.zeros(trials, 1, dtype=dtype)
    for _ in range(STEPS):
        member = (torch.rand(trials, n, generator=generator, dtype=torch.float64) < BATCH / n).to(dtype)
        residual = torch.sigmoid(w @ x.T + b) - y
        weights = residual * member * torch.clamp(CLIP / (residual.abs() * scale).clamp_min(1e-300), max=1.0)
        grad_w = weights @ x + SIGMA * CLIP * torch.randn(trials, width, generator=generator, dtype=dtype)
        grad_b = weights.sum(dim=1, keepdim=True) + SIGMA * CLIP * torch.randn(trials, 1, generator=generator,
                                                                                dtype=dtype)
        w = w - ETA * grad_w / BATCH
        b = b - ETA * grad_b / BATCH
    return time.perf_counter() - started


MEMORY_CHILD = """
import json, resource, sys, numpy as np
import dpaudit
from dpaudit.mechanisms.models.data import load_records
records = load_records("digits", None)
wide = np.hstack([np.tile(records[:, :-1], (1, 16)) / 4.0, records[:, -1:]])
np.save(sys.argv[1], wide)
mech = dpaudit.make("model", model="softmax", data=sys.argv[1], steps=int(sys.argv[3]), batch_size=64,
                    dtype=sys.argv[2])
out = mech.sample(trials=10_000, seed=0)
print(json.dumps({"parameters": mech.output_dim, "trials": out.shape[0],
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--loop-trials", type=int, default=200)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float64")
    parser.add_argument("--memory-steps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    records = load_records("breast_cancer", None)
    mech = dpaudit.make("model", model="logistic", data="breast_cancer", steps=STEPS, batch_size=BATCH, clip=CLIP,
                        noise_multiplier=SIGMA, eta=ETA, dtype=args.dtype)
    mech.sample(trials=100, seed=1)  # warm-up
    started = time.perf_counter()
    mech.sample(trials=args.trials, seed=0)
    batched = time.perf_counter() - started
    torch.set_num_threads(1)
    loop = _loop(records, args.loop_trials, dtype) * args.trials
    torch.set_num_threads(2)
    products = _products(records, args.trials, dtype)
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        child = subprocess.run([sys.executable, "-c", MEMORY_CHILD, f"{directory}/wide.npy", args.dtype,
                                str(args.memory_steps)], capture_output=True, text=True)
    memory = json.loads(child.stdout) if child.returncode == 0 else {"error": child.stderr[-500:]}
    row = {"benchmark": "models", "trials": args.trials, "steps": STEPS, "dtype": args.dtype,
           "batched_seconds": batched, "loop_seconds_scaled": loop, "products_seconds": products,
           "speedup_over_loop": loop / batched, "cost_over_products": batched / products, "memory": memory}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"{args.trials} logistic models x {STEPS} DP-SGD steps ({args.dtype}): batched {batched:.1f} s, "
              f"per-trial loop {loop:.0f} s (scaled from {args.loop_trials}), plain products {products:.1f} s; "
              f"speed-up {loop / batched:.1f}x, cost {batched / products:.2f}x the products")
        print(f"memory: {memory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
