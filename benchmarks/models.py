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

A third part trains own torch modules (issue 35) on scikit-learn's digits
(1,797 records, 64 features, 10 classes), 50 DP-SGD steps with Poisson
batches of expected size 64, clip 1, noise 1, float32:

- ``cnn``: a 3x3 convolution with 4 channels, 2x2 average pooling and a
  linear layer (690 parameters);
- ``mlp``: 64 -> 128 -> 10 with tanh (9,610 parameters);

each batched over trials by the mechanism (per-example gradients layer by
layer, ``mechanisms/models/grad_sample``) against a plain loop that trains
one model at a time with per-sample gradients from ``torch.func``
(``vmap(grad(...))`` over the batch), measured in the same run with the
same number of cores (one: the machine may be shared). ``--device cuda`` runs the same cases on a GPU
and prints trainings per second and the speed-up over the CPU.

Run: ``python benchmarks/models.py [--trials N] [--dtype float32|float64] [--cases logistic,cnn,mlp]
[--device cpu|cuda] [--json]``.
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


DIGITS_STEPS = 50


def cnn(features: int, classes: int) -> torch.nn.Module:
    """The issue's CNN: 3x3 convolution with 4 channels, average pooling, a linear layer (690 parameters)."""
    side = int(round(features ** 0.5))
    return torch.nn.Sequential(torch.nn.Unflatten(1, (1, side, side)), torch.nn.Conv2d(1, 4, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.AvgPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(4 * (side // 2) ** 2, classes))


def mlp(features: int, classes: int) -> torch.nn.Module:
    """A multilayer perceptron of about 10^4 parameters (9,610 on the digits)."""
    return torch.nn.Sequential(torch.nn.Linear(features, 128), torch.nn.Tanh(), torch.nn.Linear(128, classes))


OWN_MODELS = {"cnn": cnn, "mlp": mlp}


def _torch_func_loop(factory, records: np.ndarray, trials: int, dtype: torch.dtype, device: str) -> float:
    """Seconds per training of one model at a time, per-sample gradients from ``torch.func``."""
    from torch.func import functional_call, grad, vmap

    x = torch.as_tensor(np.array(records[:, :-1]), dtype=dtype, device=device)
    y = torch.as_tensor(np.array(records[:, -1]), dtype=torch.long, device=device)
    n = x.shape[0]
    torch.manual_seed(0)
    model = factory(x.shape[1], int(y.max()) + 1).to(device, dtype)
    initial = {name: value.detach().clone() for name, value in model.named_parameters()}

    def loss(params, example, label):
        return torch.nn.functional.cross_entropy(functional_call(model, params, (example.unsqueeze(0),)),
                                                 label.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    generator = torch.Generator(device=device).manual_seed(0)
    started = time.perf_counter()
    for _ in range(trials):
        params = {name: value.clone() for name, value in initial.items()}
        for _ in range(DIGITS_STEPS):
            member = torch.rand(n, generator=generator, device=device) < BATCH / n
            grads = per_sample(params, x[member], y[member])
            norms = torch.sqrt(sum(g.flatten(start_dim=1).square().sum(dim=1) for g in grads.values()))
            factor = torch.clamp(CLIP / norms.clamp_min(1e-12), max=1.0)
            for name, g in grads.items():
                noise = torch.randn(g.shape[1:], generator=generator, dtype=dtype, device=device)
                total = torch.einsum("b,b...->...", factor, g) + SIGMA * CLIP * noise
                params[name] = params[name] - ETA * total / BATCH
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / trials


def _batched(factory, trials: int, dtype: str, device: str) -> tuple[float, list[str]]:
    """Seconds per training batched over ``trials`` by the mechanism, and its layers' paths."""
    mech = dpaudit.make("model", model=factory, data="digits", steps=DIGITS_STEPS, batch_size=BATCH, clip=CLIP,
                        noise_multiplier=SIGMA, eta=ETA, dtype=dtype, device=device)
    mech.sample(trials=min(trials, 64), seed=1)  # warm-up
    started = time.perf_counter()
    mech.sample(trials=trials, seed=0)
    return (time.perf_counter() - started) / trials, getattr(mech, "gradient_paths", ["(not reported)"])


def own_models(cases: list[str], trials: int, loop_trials: int, device: str) -> list[dict]:
    """Trainings per second of each own model, batched and in a one-model-at-a-time loop (same run)."""
    from dpaudit.mechanisms import tiles

    records = load_records("digits", None)
    rows = []
    threads = tiles.threads()
    if device == "cpu":  # one core each: tiles in one thread, torch in one thread (the mechanism sets that)
        tiles.set_threads(1)
        torch.set_num_threads(1)
    for case in cases:
        batched, paths = _batched(OWN_MODELS[case], trials, "float32", device)
        loop = _torch_func_loop(OWN_MODELS[case], records, loop_trials, torch.float32, device)
        row = {"case": case, "device": device, "trials": trials, "loop_trials": loop_trials,
               "parameters": sum(p.numel() for p in OWN_MODELS[case](64, 10).parameters()),
               "batched_per_second": 1 / batched, "loop_per_second": 1 / loop, "speedup_over_loop": loop / batched,
               "paths": paths}
        if device == "cuda":  # the same batched training on the CPU, for the speed-up over it
            cpu, _ = _batched(OWN_MODELS[case], max(trials // 16, 64), "float32", "cpu")
            row["cpu_per_second"], row["speedup_over_cpu"] = 1 / cpu, cpu / batched
        rows.append(row)
    tiles.set_threads(threads)
    return rows


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
    parser.add_argument("--cases", default="logistic,cnn,mlp",
                        help="comma-separated: logistic (issue 18's workload), cnn, mlp (own modules on the digits)")
    parser.add_argument("--own-trials", type=int, default=1024, help="trainings of each own model, batched")
    parser.add_argument("--own-loop-trials", type=int, default=8, help="trainings of each own model in the loop")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child")
    args = parser.parse_args(argv)
    cases = [case for case in args.cases.split(",") if case]
    own = own_models([c for c in cases if c in OWN_MODELS], args.own_trials, args.own_loop_trials, args.device)
    for row in own:
        if not args.json:
            print(f"{row['case']} ({row['parameters']} parameters, {DIGITS_STEPS} steps, float32, {row['device']}): "
                  f"batched {row['batched_per_second']:.1f} trainings/s ({row['trials']} trials), one model at a "
                  f"time with torch.func {row['loop_per_second']:.2f}/s ({row['loop_trials']} trials): "
                  f"{row['speedup_over_loop']:.1f}x" + (f"; {row['speedup_over_cpu']:.1f}x the CPU's "
                                                        f"{row['cpu_per_second']:.1f}/s" if "cpu_per_second" in row
                                                        else ""))
            print(f"  paths: {'; '.join(row['paths'])}")
    if "logistic" not in cases:
        if args.json:
            print(json.dumps(own, indent=2))
        return 0
    if args.device == "cuda":
        return _logistic_cuda(args, own)
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

    memory: dict = {"skipped": True}
    if not args.no_memory:
        with tempfile.TemporaryDirectory() as directory:
            child = subprocess.run([sys.executable, "-c", MEMORY_CHILD, f"{directory}/wide.npy", args.dtype,
                                    str(args.memory_steps)], capture_output=True, text=True)
        memory = json.loads(child.stdout) if child.returncode == 0 else {"error": child.stderr[-500:]}
    row = {"benchmark": "models", "trials": args.trials, "steps": STEPS, "dtype": args.dtype,
           "batched_seconds": batched, "loop_seconds_scaled": loop, "products_seconds": products,
           "speedup_over_loop": loop / batched, "cost_over_products": batched / products, "memory": memory,
           "own_models": own}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"{args.trials} logistic models x {STEPS} DP-SGD steps ({args.dtype}): batched {batched:.1f} s, "
              f"per-trial loop {loop:.0f} s (scaled from {args.loop_trials}), plain products {products:.1f} s; "
              f"speed-up {loop / batched:.1f}x, cost {batched / products:.2f}x the products")
        print(f"memory: {memory}")
    return 0


def _logistic_cuda(args: argparse.Namespace, own: list[dict]) -> int:
    """The logistic workload on the GPU (float32 there by default) and on the CPU: trainings per second."""
    rates = {}
    for device, trials in (("cuda", args.trials), ("cpu", max(args.trials // 8, 100))):
        mech = dpaudit.make("model", model="logistic", data="breast_cancer", steps=STEPS, batch_size=BATCH,
                            clip=CLIP, noise_multiplier=SIGMA, eta=ETA, dtype=args.dtype, device=device)
        mech.sample(trials=100, seed=1)  # warm-up
        started = time.perf_counter()
        mech.sample(trials=trials, seed=0)
        rates[device] = trials / (time.perf_counter() - started)
    row = {"benchmark": "models", "case": "logistic", "device": "cuda", "dtype": args.dtype,
           "cuda_per_second": rates["cuda"], "cpu_per_second": rates["cpu"],
           "speedup_over_cpu": rates["cuda"] / rates["cpu"], "own_models": own}
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(f"logistic ({STEPS} steps, {args.dtype}): {rates['cuda']:.0f} trainings/s on the GPU, "
              f"{rates['cpu']:.0f}/s on the CPU: {rates['cuda'] / rates['cpu']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
