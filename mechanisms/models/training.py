"""DP-SGD and DP-LSSGD on a model stacked over trials: one batched computation per step.

Every trial draws its own batch (Poisson sampling with rate ``m / n``,
``m`` records without replacement, or the next ``m`` records of a uniform
permutation drawn each epoch, or once, for shuffled batches), takes the gradient of every example's
loss (``networks.per_example_gradients``, or in closed form for linear
models, where only the clipped sum is formed), clips each to norm ``C``,
replaces the canary's gradient where the canary is in the batch, sums, adds
``N(0, (sigma C)^2 I)`` and steps by ``eta`` times the sum over ``m`` (the
expected batch size), after Laplacian smoothing for DP-LSSGD. Trials are
processed in blocks so that the per-example gradients of a block stay
within about 64 MB.

References
----------
Abadi et al. 2016, "Deep Learning with Differential Privacy" (DP-SGD);
Wang et al. 2019 (DP-LSSGD), eq. (3).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from dpaudit.core.kinds import SHUFFLED
from dpaudit.mechanisms.lssgd import laplacian_smooth
from dpaudit.mechanisms.models.device import train_on_device
from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients
from dpaudit.mechanisms.models.progress import training_bar

__all__ = ["BLOCK_ELEMENTS", "Injected", "LAYERED_BLOCK_TRIALS", "LinearBuffers", "Schedule", "clip_factors",
           "gather_rows", "linear_clipped_sum", "members", "membership", "standard_normal", "train"]

BLOCK_ELEMENTS = 8 * 2**20  #: per-example gradient entries per block of trials (64 MB in float64)
#: most trials in a block of a model trained layer by layer: past 32-48 the padded batch (the largest of
#: more Poisson batches) widens and a block's activations leave the caches; below, the fixed cost of a step
#: (about 1 ms of small operations) is shared by fewer trials. Digits CNN, one core, time per example against
#: the best: 16 trials 1.23, 24 1.08, 32 and 48 1.0, 64 1.05 (the MLP: 1.13, 1.05, 1.03, 1.0, 1.07)
LAYERED_BLOCK_TRIALS = 32


@dataclasses.dataclass(frozen=True, slots=True)
class Schedule:
    """The training's public parameters.

    ``rate``: the Poisson sampling rate, fixed before any trial (``m / n`` of the configured ``n``), so
    that the datasets of an add/remove pair (``n`` and ``n - 1`` records) are sampled alike; ``None``:
    ``m`` over the records given.
    """

    steps: int
    batch_size: int
    sampling: str
    clip: float
    noise_multiplier: float
    eta: float
    smoothing: float
    rate: float | None = None

    def poisson_rate(self, n: int) -> float:
        """Each record's chance to join a batch under Poisson sampling (at most 1)."""
        return min(1.0, self.rate if self.rate is not None else self.batch_size / n)


def _batch(trials: int, n: int, schedule: Schedule, rng: np.random.Generator,
           device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Record indices ``(trials, K)`` of each trial's batch (:func:`members`), in record order and padded
    with record 0, ``K`` the largest batch of the block, and a mask of the entries that are members."""
    if schedule.sampling == "poisson":  # each row's positions ascend: its members are a prefix
        positions, inside = _poisson_positions(trials, n, schedule.poisson_rate(n), rng)
        width = max(int(inside.sum(axis=1).max()), 1)
        indices = np.where(inside[:, :width], positions[:, :width], 0.0).astype(np.int64)
        return torch.from_numpy(indices).to(device), torch.from_numpy(inside[:, :width].copy()).to(device)
    rows, cols = members(trials, n, schedule, rng)  # row-major: each row's members in record order
    counts = torch.bincount(rows, minlength=trials)
    width = max(int(counts.max()), 1) if rows.numel() else 1
    starts = torch.cumsum(counts, dim=0) - counts
    indices = torch.zeros(trials, width, dtype=torch.long)
    indices[rows, torch.arange(rows.numel()) - starts[rows]] = cols
    member = torch.arange(width).unsqueeze(0) < counts.unsqueeze(1)
    return indices.to(device), member.to(device)


class Injected:
    """Gradients that replace some records' gradients (gradient canaries), looked up without a loop.

    ``slot[i]`` is the row of ``vectors`` for record ``i`` (``-1``: a normal record).
    """

    def __init__(self, injected: dict[int, torch.Tensor], n: int, size: int, dtype: torch.dtype,
                 device: torch.device | str = "cpu") -> None:
        self.positions = torch.tensor(sorted(injected), dtype=torch.long, device=device)
        self.vectors = (torch.stack([injected[p] for p in sorted(injected)]).to(device, dtype) if injected
                        else torch.zeros(0, size, dtype=dtype, device=device))
        self.slot = torch.full((n,), -1, dtype=torch.long, device=device)
        self.slot[self.positions] = torch.arange(len(injected), device=device)

    def __bool__(self) -> bool:
        return self.positions.numel() > 0


def clip_factors(norms: torch.Tensor, clip: float) -> torch.Tensor:
    return torch.clamp(clip / torch.clamp(norms, min=1e-300), max=1.0)


def gather_rows(values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``values[indices]`` for a ``(trials, K)`` index: one ``index_select`` (advanced indexing takes about
    three times as long on this many small rows)."""
    return values.index_select(0, indices.reshape(-1)).reshape(*indices.shape, *values.shape[1:])


def standard_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Standard normal draws from NumPy's ziggurat (exact tails), in float32 directly for a float32 training
    (the float64 draw rounded to float32 has the same law up to that rounding, and takes longer)."""
    if dtype == torch.float32:
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))
    return torch.from_numpy(rng.standard_normal(shape)).to(dtype)


def _finish(total: torch.Tensor, theta: torch.Tensor, schedule: Schedule, rng: np.random.Generator) -> torch.Tensor:
    """Add the noise, average over the expected batch, smooth (DP-LSSGD) and step (``total`` is consumed)."""
    noise = standard_normal(rng, tuple(total.shape), total.dtype).to(total.device)
    total.add_(noise, alpha=schedule.noise_multiplier * schedule.clip)
    if schedule.smoothing > 0:
        return theta - schedule.eta * laplacian_smooth(total / schedule.batch_size, schedule.smoothing)
    return theta.add(total, alpha=-schedule.eta / schedule.batch_size)


def _gathered_step(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                   injected: Injected, schedule: Schedule, rng: np.random.Generator,
                   batch: torch.Tensor | None = None, buffers: None = None) -> torch.Tensor:
    """Any model: gather each trial's batch, per-example gradients by ``torch.func``.

    ``batch``: the record indices ``(trials, m)`` of shuffled batches (else drawn here)."""
    if batch is None:
        indices, member = _batch(theta.shape[0], features.shape[0], schedule, rng, theta.device)
    else:
        indices, member = batch.to(theta.device), torch.ones(batch.shape, dtype=torch.bool, device=theta.device)
    gradients = per_example_gradients(stacked, theta, gather_rows(features, indices), gather_rows(labels, indices),
                                      closed_form=False)
    gradients = gradients * clip_factors(torch.linalg.vector_norm(gradients, dim=-1, keepdim=True), schedule.clip)
    if injected:
        slots = injected.slot[indices]  # (T, K): the canary row of each batch entry, or -1
        hit = slots >= 0
        gradients[hit] = injected.vectors[slots[hit]]
    return _finish((gradients * member.unsqueeze(-1)).sum(dim=1), theta, schedule, rng)


def _layered_step(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                  injected: Injected, schedule: Schedule, rng: np.random.Generator,
                  batch: torch.Tensor | None = None, buffers: None = None) -> torch.Tensor:
    """A sequence of layers (``grad_sample``): each example's gradient norm from its layers' closed forms
    (ghost norms where cheaper), then the clipped sum as one weighted product per layer, without forming
    every per-example gradient of the model.

    ``batch``: the record indices ``(trials, m)`` of shuffled batches (else drawn here)."""
    if batch is None:
        indices, member = _batch(theta.shape[0], features.shape[0], schedule, rng, theta.device)
    else:
        indices, member = batch.to(theta.device), torch.ones(batch.shape, dtype=torch.bool, device=theta.device)
    squared, weighted_sum = stacked.plan.clip_parts(stacked.unflatten, stacked.names, theta,
                                                    gather_rows(features, indices), gather_rows(labels, indices))
    weights = clip_factors(torch.sqrt(squared), schedule.clip) * member
    if injected:
        slots = injected.slot[indices]  # (T, K): the canary row of each batch entry, or -1
        canary = (slots >= 0) & member
        weights = torch.where(canary, 0.0, weights)  # a canary's gradient is replaced by its injected one
        total = weighted_sum(weights)
        included = torch.zeros(theta.shape[0], injected.positions.numel(), dtype=total.dtype, device=total.device)
        included[canary.nonzero(as_tuple=True)[0], slots[canary]] = 1.0
        total = total + included @ injected.vectors
    else:
        total = weighted_sum(weights)
    return _finish(total, theta, schedule, rng)


def members(trials: int, n: int, schedule: Schedule, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Each trial's batch as ``(rows, cols)`` index pairs, row-major: Poisson with rate ``m / n``, or ``m``
    records without replacement (the ``m`` smallest of independent float64 uniform keys: a uniform subset)."""
    if schedule.sampling == "poisson":
        return _poisson_members(trials, n, schedule.poisson_rate(n), rng)
    keys = torch.from_numpy(rng.random((trials, n)))
    cut = torch.kthvalue(keys, schedule.batch_size, dim=1).values.unsqueeze(1)
    return (keys <= cut).nonzero(as_tuple=True)


def membership(trials: int, n: int, schedule: Schedule, rng: np.random.Generator) -> torch.Tensor:
    """:func:`members` as a boolean ``(trials, n)`` mask."""
    rows, cols = members(trials, n, schedule, rng)
    mask = torch.zeros(trials, n, dtype=torch.bool)
    mask[rows, cols] = True
    return mask


def _poisson_members(trials: int, n: int, rate: float, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Each record in each trial's batch independently with probability ``rate`` (:func:`_poisson_positions`),
    as ``(rows, cols)`` index pairs, row-major."""
    positions, inside = _poisson_positions(trials, n, rate, rng)
    rows = np.repeat(np.arange(trials), inside.sum(axis=1))
    return torch.from_numpy(rows), torch.from_numpy(positions[inside].astype(np.int64))


def _poisson_positions(trials: int, n: int, rate: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each record in each trial's batch independently with probability ``rate``, by geometric skipping:
    ascending positions ``(trials, W)`` (float64 integers) and which of them are records (``< n``).

    The gaps between successive members of a Bernoulli(rate) sequence are
    independent Geometric(rate) variables: positions are the running sums of
    gaps. A gap is drawn as ``floor(E / lambda) + 1`` with ``E`` standard
    exponential and ``lambda = -log(1 - rate)``, which is Geometric(rate)
    exactly (``P(gap > k) = exp(-k lambda) = (1 - rate)^k``) and costs a
    ziggurat draw instead of a logarithm. Columns of gaps are drawn until
    every row has passed record ``n``, so the result is exact (no cap on the
    batch size); the first draw covers the mean plus eight standard deviations.
    """
    mean = n * rate
    width = int(mean + 8 * math.sqrt(mean * (1 - rate)) + 8)
    scale = -math.log1p(-rate) if rate < 1 else math.inf  # rate 1: every gap is 1

    def positions_after(start: np.ndarray | float) -> np.ndarray:
        gaps = rng.standard_exponential((trials, width))
        gaps /= scale
        np.floor(gaps, out=gaps)
        gaps += 1.0
        np.cumsum(gaps, axis=1, out=gaps)  # integers below 2^53: exact in float64
        gaps += start
        return gaps

    positions = positions_after(-1.0)
    while (positions[:, -1] < n).any():  # a row still inside the records: draw more gaps for every row
        positions = np.concatenate([positions, positions_after(positions[:, -1:])], axis=1)
    return positions, positions < n


class LinearBuffers:
    """What a block of linear-model steps reuses: the logits ``(T C, n)`` (written in place by each
    step's product, sparing an allocation of ``T n C`` floats and the page faults of touching it),
    the records with a column of ones ``(n, F + 1)`` (a product with them gives a weight's and a
    bias's gradient at once) and the records' gradient scales ``|(x, 1)|``."""

    def __init__(self, trials: int, classes: int, features: torch.Tensor) -> None:
        n = features.shape[0]
        self.logits = torch.empty(trials * classes, n, dtype=features.dtype, device=features.device)
        self.augmented = torch.cat([features, features.new_ones(n, 1)], dim=1)
        self.scale = torch.sqrt(features.square().sum(dim=1) + 1.0)


def _sparse_rows(trials: int, n: int, rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The ``(trials, n)`` matrix with ``values`` at ``(rows, cols)``, in compressed sparse rows.

    ``rows`` must be sorted (row-major pairs, as :func:`members` gives them).
    A batch holds about ``m`` of ``n`` records, so a product with this matrix
    costs ``m / n`` of the dense one's (four times less here at ``m / n = 0.11``).
    """
    crow = torch.zeros(trials + 1, dtype=torch.long, device=values.device)
    torch.cumsum(torch.bincount(rows, minlength=trials), dim=0, out=crow[1:])
    return torch.sparse_csr_tensor(crow, cols, values, size=(trials, n), check_invariants=False)


with warnings.catch_warnings():  # torch warns once per process that sparse CSR is in beta: let it do so here, quietly
    warnings.simplefilter("ignore")
    _sparse_rows(1, 1, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long), torch.ones(1)) @ torch.ones(1, 1)


def linear_clipped_sum(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                       batch: tuple[torch.Tensor, torch.Tensor], clip: float, injected: Injected,
                       buffers: LinearBuffers | None = None) -> torch.Tensor:
    """The sum of clipped per-example gradients of a linear model over each trial's batch, ``(trials, P)``.

    A linear model's per-example gradient is ``r (x, 1)`` with ``r`` the
    residual of the cross-entropy, so its norm is ``|r| sqrt(|x|^2 + 1)`` and
    the clipped sum is a product of the weighted residuals with the records.
    Logits come from one product of every trial with every record; residuals
    and clipping factors are computed for the batch members only (``batch``
    is ``(rows, cols)`` from :func:`members`, row-major), and the sum is a
    sparse product over them, one per class; nothing of size trials x batch
    x P is formed. ``buffers``: arrays reused between the steps of a block
    (:class:`LinearBuffers`; made here if not given).
    """
    params = stacked.unflatten(theta)
    weight, bias = params["weight"], params["bias"]  # (T, C, F), (T, C)
    trials, classes, width = weight.shape
    n = features.shape[0]
    if buffers is None:
        buffers = LinearBuffers(trials, classes, features)
    logits = torch.mm(weight.reshape(trials * classes, width), features.T, out=buffers.logits)
    rows, cols = batch
    picked = logits.reshape(trials, classes, n).transpose(1, 2)[rows, cols] + bias[rows]  # (M, C): batch members
    if classes == 1:
        residual = torch.sigmoid(picked) - labels[cols].unsqueeze(-1)
    else:
        residual = torch.softmax(picked, dim=-1) - nn.functional.one_hot(labels[cols].long(), classes).to(picked.dtype)
    factor = clip_factors(torch.linalg.vector_norm(residual, dim=-1) * buffers.scale[cols], clip)
    if injected:
        factor = torch.where(injected.slot[cols] >= 0, 0.0, factor)  # canaries' gradients are replaced below
    weighted = residual * factor.unsqueeze(-1)  # (M, C)
    sums = torch.stack([_sparse_rows(trials, n, rows, cols, weighted[:, c].contiguous()) @ buffers.augmented
                        for c in range(classes)], dim=1)  # (T, C, F + 1): weight gradients, then the bias's
    total = torch.cat([sums[:, :, :width].reshape(trials, classes * width), sums[:, :, width]], dim=1)
    if injected:
        canary = injected.slot[cols] >= 0  # batch entries that are canaries: add their injected gradients
        included = torch.zeros(trials, injected.positions.numel(), dtype=total.dtype, device=total.device)
        included[rows[canary], injected.slot[cols[canary]]] = 1.0
        total = total + included @ injected.vectors
    return total


def _dense_linear_step(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                       injected: Injected, schedule: Schedule, rng: np.random.Generator,
                       batch: torch.Tensor | None = None, buffers: LinearBuffers | None = None) -> torch.Tensor:
    if batch is None:
        rows, cols = members(theta.shape[0], features.shape[0], schedule, rng)
    else:  # shuffled: the record indices (trials, m) of this step's batch
        rows = torch.arange(batch.shape[0]).repeat_interleave(batch.shape[1])
        cols = batch.sort(dim=1).values.reshape(-1)
    total = linear_clipped_sum(stacked, theta, features, labels, (rows.to(theta.device), cols.to(theta.device)),
                               schedule.clip, injected, buffers)
    return _finish(total, theta, schedule, rng)


def train(stacked: Stacked, records: torch.Tensor, injected: dict[int, torch.Tensor], schedule: Schedule,
          trials: int, rng: np.random.Generator, *, iterates: bool = False,
          starts: Callable[[int, np.random.Generator], torch.Tensor] | None = None) -> torch.Tensor:
    """Final parameters ``(trials, P)`` of ``trials`` independent trainings on ``records``.

    ``injected`` maps a 0-based record position to the gradient that record
    contributes whenever it is sampled (a gradient canary). ``starts(count,
    rng)``: the initial parameters ``(count, P)`` of a block of trials, drawn
    before its batches (``None``: every trial starts at ``stacked.flat``).
    """
    features, labels = records[:, :-1], records[:, -1]
    n = features.shape[0]
    injected = Injected(injected, n, stacked.size, records.dtype, records.device)
    if records.device.type == "cuda":  # every step on the device (device.py)

        return train_on_device(stacked, records, injected, schedule, trials, rng, iterates=iterates, starts=starts)
    if stacked.linear:  # logits of every record: (trials, classes, n) per step
        step, per_trial = _dense_linear_step, 3 * n * (stacked.size // max(features.shape[1] + 1, 1) + 1)
    elif stacked.plan.layered:  # gathered batches: (trials, K) examples' activations and norms
        width = 2 * schedule.batch_size if schedule.sampling == "poisson" else schedule.batch_size
        elements = stacked.plan.example_elements(stacked.unflatten, stacked.flat, features.unsqueeze(0))
        step, per_trial = _layered_step, width * elements + 4 * stacked.size
    else:  # gathered batches: (trials, K, P) per-example gradients
        width = 2 * schedule.batch_size if schedule.sampling == "poisson" else schedule.batch_size
        step, per_trial = _gathered_step, width * stacked.size
    # about 64 MB of working arrays per block in either dtype
    block = max(1, min(trials, BLOCK_ELEMENTS * 8 // (records.element_size() * max(per_trial, 1))))
    if step is _layered_step:
        block = min(block, LAYERED_BLOCK_TRIALS)
    size = stacked.size
    output = torch.empty(trials, size * (schedule.steps if iterates else 1), dtype=records.dtype,
                         device=records.device)
    for start in range(0, trials, block):  # blocks of trials, each trained in one batched computation
        count = min(block, trials - start)
        theta = (stacked.flat[:1].expand(count, -1).clone().detach() if starts is None
                 else starts(count, rng).to(stacked.flat.device, records.dtype))
        rows = slice(start, start + theta.shape[0])
        order = None
        buffers = (LinearBuffers(theta.shape[0], stacked.size // (features.shape[1] + 1), features)
                   if stacked.linear else None)
        bar = training_bar(schedule.steps, f"training {theta.shape[0]} models")
        for number in range(schedule.steps):
            bar.update(1)
            batch = None
            if schedule.sampling in SHUFFLED:  # a uniform permutation, cut into batches of m
                slot = number % (n // schedule.batch_size)
                if order is None or (slot == 0 and schedule.sampling == "shuffle"):
                    order = torch.argsort(torch.from_numpy(rng.random((theta.shape[0], n))), dim=1)
                batch = order[:, slot * schedule.batch_size:(slot + 1) * schedule.batch_size]
            theta = step(stacked, theta, features, labels, injected, schedule, rng, batch, buffers)
            if iterates:
                output[rows, number * size:(number + 1) * size] = theta
        bar.close()
        output[rows, -size:] = theta
    return output
