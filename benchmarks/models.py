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

A third part trains own torch modules (issues 35 and 61) on scikit-learn's
digits (1,797 records, 64 features, 10 classes), 50 DP-SGD steps with
Poisson batches of expected size 64, clip 1, noise 1, float32, each model
written as an ``nn.Sequential`` and as a module with a ``forward`` of its own:

- ``cnn``, ``cnn-own``: a 3x3 convolution with 4 channels, tanh, 2x2 average
  pooling and a linear layer (690 parameters); ``cnn-functional`` is
  ``cnn-own`` with tanh and pooling written as functions;
- ``mlp``, ``mlp-own``: 64 -> 128 -> 10 with tanh (9,610 parameters);

each batched over trials by the mechanism (per-example gradients layer by
layer, ``mechanisms/models/grad_sample``) against the plain loop a user
writes (``plain_loop``: one model at a time, per-sample gradients by
``vmap(grad(...))`` on each Poisson batch, clipped, noised; its first
training, which sets ``torch.func`` up, is not timed), alternated for a few
rounds in the same run on the same threads (one: run it under ``taskset -c
1``, the machine may be shared); the ratio is the median of the rounds'.
Rates come by wall time and by the process's CPU time: on a shared core
the second counts only what each side ran, and is the steadier of the two.
The floor beside them is the arithmetic of a training (``training_flops``)
at the machine's measured matrix-multiply rate (``matmul_gflops``): what no
implementation on this core can beat.
``--device cuda`` runs the same cases on a GPU and prints trainings per
second and the speed-up over the CPU.

Run: ``python benchmarks/models.py [--trials N] [--dtype float32|float64] [--cases logistic,cnn,...]
[--own-trials N] [--own-loop-trials N] [--rounds N] [--device cpu|cuda] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

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


def cnn(features: int, classes: int) -> nn.Module:
    """The issues' CNN as a Sequential: 3x3 convolution with 4 channels, tanh, 2x2 average pooling, a linear
    layer (690 parameters on the digits)."""
    side = int(round(features ** 0.5))
    return nn.Sequential(nn.Unflatten(1, (1, side, side)), nn.Conv2d(1, 4, 3, padding=1), nn.Tanh(),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(4 * (side // 2) ** 2, classes))


class OwnCNN(nn.Module):
    """The same CNN as a user's module: its layers as attributes, a ``forward`` of its own."""

    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.side = int(round(features ** 0.5))
        self.conv, self.act, self.pool = nn.Conv2d(1, 4, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2)
        self.out = nn.Linear(4 * (self.side // 2) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.act(self.conv(x.reshape(-1, 1, self.side, self.side))))
        return self.out(x.flatten(1))


class FunctionalCNN(nn.Module):
    """The same again with tanh and pooling written as functions (``torch.tanh``, ``F.avg_pool2d``): they run
    as written, torch's pooling kernel included."""

    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.side = int(round(features ** 0.5))
        self.conv, self.out = nn.Conv2d(1, 4, 3, padding=1), nn.Linear(4 * (self.side // 2) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(torch.tanh(self.conv(x.reshape(-1, 1, self.side, self.side))), 2)
        return self.out(x.flatten(1))


def mlp(features: int, classes: int) -> nn.Module:
    """A multilayer perceptron of about 10^4 parameters (9,610 on the digits)."""
    return nn.Sequential(nn.Linear(features, 128), nn.Tanh(), nn.Linear(128, classes))


class OwnMLP(nn.Module):
    """The same MLP as a user's module."""

    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(features, 128), nn.Linear(128, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.hidden(x)))


#: case -> (label, factory)
OWN_MODELS = {"cnn": ("Sequential", cnn), "cnn-own": ("own forward", OwnCNN),
              "cnn-functional": ("own forward, functional tanh and pooling", FunctionalCNN),
              "mlp": ("Sequential", mlp), "mlp-own": ("own forward", OwnMLP)}


def plain_loop(factory, records: np.ndarray, dtype: torch.dtype, device: str) -> Callable[[int], tuple[float, float]]:
    """The shortest correct DP-SGD loop a user writes: one model at a time, per-sample gradients by
    ``vmap(grad(...))`` on each Poisson batch, clipped, summed, noised. Returns ``run(trainings)``, the
    wall and CPU seconds per training of that many; one training, which sets ``torch.func`` up, runs here,
    untimed."""
    x = torch.as_tensor(np.array(records[:, :-1]), dtype=dtype, device=device)
    y = torch.as_tensor(np.array(records[:, -1]), dtype=torch.long, device=device)
    n = x.shape[0]
    torch.manual_seed(0)
    model = factory(x.shape[1], int(y.max()) + 1).to(device, dtype)
    start = {name: value.detach().clone() for name, value in model.named_parameters()}

    def loss(params, example, label):
        return F.cross_entropy(functional_call(model, params, (example.unsqueeze(0),)), label.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))

    def train_one() -> None:
        params = dict(start)
        for _ in range(DIGITS_STEPS):
            batch = (torch.rand(n, device=device) < BATCH / n).nonzero()[:, 0]
            grads = per_sample(params, x[batch], y[batch])
            norms = torch.cat([g.flatten(start_dim=1) for g in grads.values()], dim=1).norm(dim=1)
            factor = (CLIP / norms).clamp(max=1.0)
            params = {name: value - ETA * (torch.einsum("b,b...->...", factor, grads[name])
                                           + SIGMA * CLIP * torch.randn_like(value)) / BATCH
                      for name, value in params.items()}

    def run(trainings: int) -> tuple[float, float]:
        _synchronize(device)
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(trainings):
            train_one()
        _synchronize(device)
        return (time.perf_counter() - started) / trainings, (time.process_time() - cpu) / trainings

    train_one()
    return run


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def batched_trainings(factory, dtype: str,
                      device: str) -> tuple[Callable[[int, int], tuple[float, float]], list[str]]:
    """The mechanism on ``factory`` (warmed up on 64 trials): ``run(trials, seed)``, the wall and CPU seconds
    per training of ``trials`` trainings batched, and its layers' paths."""
    mech = dpaudit.make("model", model=factory, data="digits", steps=DIGITS_STEPS, batch_size=BATCH, clip=CLIP,
                        noise_multiplier=SIGMA, eta=ETA, dtype=dtype, device=device)
    mech.sample(trials=64, seed=1)

    def run(trials: int, seed: int) -> tuple[float, float]:
        started, cpu = time.perf_counter(), time.process_time()
        mech.sample(trials=trials, seed=seed)
        return (time.perf_counter() - started) / trials, (time.process_time() - cpu) / trials

    return run, mech.gradient_paths


def training_flops(factory) -> float:
    """Floating-point operations one training needs at least: per example and step, each linear or
    convolution layer's multiply-adds three times (forward pass, the gradient of its input, its per-example
    weight gradient; the first layer's input gradient is not needed), two operations each; times the
    expected batch and the steps. Activations, pooling, norms and noise are left out (a floor)."""
    model = factory(64, 10)
    counts: list[tuple[int, bool]] = []

    def count(layer: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        weight = layer.weight
        positions = output[0, 0].numel() if isinstance(layer, nn.Conv2d) else 1
        counts.append((weight.numel() * positions, len(counts) == 0))

    hooks = [layer.register_forward_hook(count) for layer in model.modules()
             if isinstance(layer, (nn.Linear, nn.Conv2d))]
    with torch.no_grad():
        model(torch.zeros(1, 64))
    for hook in hooks:
        hook.remove()
    per_example = sum(2 * macs * (2 if first else 3) for macs, first in counts)
    return per_example * BATCH * DIGITS_STEPS


def matmul_gflops(dtype: torch.dtype = torch.float32, size: int = 512, rounds: int = 20) -> float:
    """The machine's measured matrix-multiply rate (GFLOP/s) on the threads torch has: ``size``-square
    products, the best of ``rounds``."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - started)
    return 2 * size ** 3 / best / 1e9


def own_models(cases: list[str], trials: int, loop_trials: int, device: str, rounds: int = 3) -> list[dict]:
    """Trainings per second of each own model, batched and in the plain loop, alternated for ``rounds``
    rounds on the same threads (the ratio is taken within each round: load from other processes slows both
    alike there; medians over rounds, ranges beside them), and the floor: the arithmetic of a training at
    the measured matrix-multiply rate."""
    from dpaudit.mechanisms import tiles

    records = load_records("digits", None)
    rows = []
    threads = tiles.threads()
    if device == "cpu":  # one core each: tiles in one thread, torch in one thread (the mechanism sets that)
        tiles.set_threads(1)
        torch.set_num_threads(1)
    rate = matmul_gflops() if device == "cpu" else None
    for case in cases:
        form, factory = OWN_MODELS[case]
        batched, paths = batched_trainings(factory, "float32", device)
        loop = plain_loop(factory, records, torch.float32, device)
        timed = [(batched(trials, number), loop(loop_trials)) for number in range(rounds)]
        ratios = sorted(looped[0] / batch[0] for batch, looped in timed)
        cpu_ratios = sorted(looped[1] / batch[1] for batch, looped in timed)
        flops = training_flops(factory)
        row = {"case": case, "form": form, "device": device, "trials": trials, "loop_trials": loop_trials,
               "rounds": rounds, "parameters": sum(p.numel() for p in factory(64, 10).parameters()),
               "batched_per_second": statistics.median(1 / batch[0] for batch, _ in timed),
               "loop_per_second": statistics.median(1 / looped[0] for _, looped in timed),
               "speedup_over_loop": statistics.median(ratios), "speedup_range": [ratios[0], ratios[-1]],
               "mflop_per_training": flops / 1e6, "paths": paths}
        if device == "cpu":  # CPU time: what each used of the core, whatever else the machine ran meanwhile
            row.update(batched_per_cpu_second=statistics.median(1 / batch[1] for batch, _ in timed),
                       loop_per_cpu_second=statistics.median(1 / looped[1] for _, looped in timed),
                       speedup_over_loop_cpu=statistics.median(cpu_ratios),
                       speedup_range_cpu=[cpu_ratios[0], cpu_ratios[-1]])
        if rate is not None:
            row["matmul_gflops"], row["floor_per_second"] = rate, rate * 1e9 / flops
        if device == "cuda":  # the same batched training on the CPU, for the speed-up over it
            cpu, _ = batched_trainings(factory, "float32", "cpu")
            seconds = cpu(max(trials // 16, 64), 0)[0]
            row["cpu_per_second"], row["speedup_over_cpu"] = 1 / seconds, seconds * row["batched_per_second"]
        rows.append(row)
    tiles.set_threads(threads)
    return rows


def _own_line(row: dict) -> str:
    line = (f"{row['case']} ({row['form']}, {row['parameters']} parameters, {DIGITS_STEPS} steps, float32, "
            f"{row['device']}): batched {row['batched_per_second']:.1f} trainings/s ({row['trials']} trials), "
            f"plain loop {row['loop_per_second']:.2f}/s ({row['loop_trials']} trials): "
            f"{row['speedup_over_loop']:.1f}x (medians of {row['rounds']} rounds; ratios "
            f"{row['speedup_range'][0]:.1f}-{row['speedup_range'][1]:.1f}x)")
    if "speedup_over_loop_cpu" in row:
        line += (f"; by CPU time {row['batched_per_cpu_second']:.1f} against {row['loop_per_cpu_second']:.2f}: "
                 f"{row['speedup_over_loop_cpu']:.1f}x ({row['speedup_range_cpu'][0]:.1f}-"
                 f"{row['speedup_range_cpu'][1]:.1f}x)")
    if "floor_per_second" in row:
        line += (f"; floor {row['floor_per_second']:.0f}/s ({row['mflop_per_training']:.0f} MFLOP a training at "
                 f"{row['matmul_gflops']:.0f} GFLOP/s)")
    if "cpu_per_second" in row:
        line += f"; {row['speedup_over_cpu']:.1f}x the CPU's {row['cpu_per_second']:.1f}/s"
    return line + f"\n  paths: {'; '.join(row['paths'])}"


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
    parser.add_argument("--cases", default="logistic," + ",".join(OWN_MODELS),
                        help="comma-separated: logistic (issue 18's workload), " + ", ".join(OWN_MODELS)
                             + " (own modules on the digits)")
    parser.add_argument("--own-trials", type=int, default=1024, help="trainings of each own model, batched")
    parser.add_argument("--own-loop-trials", type=int, default=8,
                        help="trainings of each own model in the loop, each round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of batched and loop trainings, alternated")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory child")
    args = parser.parse_args(argv)
    cases = [case for case in args.cases.split(",") if case]
    own = own_models([c for c in cases if c in OWN_MODELS], args.own_trials, args.own_loop_trials, args.device,
                     args.rounds)
    for row in own:
        if not args.json:
            print(_own_line(row))
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
