"""DP-SGD and DP-LSSGD on a GPU: every step stays on the device, randomness from a device generator.

On a CPU (``training.train``) batches and noise come from the tile's NumPy
generator and batches are gathered from the drawn members. On a GPU that
would copy the batch membership to the device at every step and wait for
it; here a ``torch.Generator`` on the device, seeded once per tile from the
tile's NumPy generator, draws membership masks and noise, and no step reads
anything back to the host:

- linear models use dense masked products over every record (the logits of
  all records, residuals weighted by the clipping factors and the mask, one
  product with the records): no gather, no sort, no synchronisation;
- other models gather a fixed number of records per trial (the mean batch
  plus ten standard deviations: a larger Poisson batch has probability
  below ``1e-20``), and a flag on the device records whether any batch ever
  held more. The flag is read once, at the end of the tile; if it is set,
  the tile is trained again from the same seed with room for every record,
  which gives exactly what an uncapped gather gives.

Results are reproducible from the seed on a given device; they are not the
CPU's bit for bit (other generators), but follow the same law.

References
----------
Abadi et al. 2016, "Deep Learning with Differential Privacy" (DP-SGD);
Wang et al. 2019 (DP-LSSGD), eq. (3).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from dpaudit.mechanisms.lssgd import DENSE_MAX_DIM, laplacian_smooth, smoothing_matrix
from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients
from dpaudit.mechanisms.models.progress import training_bar

__all__ = ["MEMORY_FRACTION", "device_block", "gather_width", "train_on_device"]

#: share of the device's free memory one block of trials may use
MEMORY_FRACTION = 0.25


def device_block(trials: int, per_trial_elements: int, dtype: torch.dtype, device: torch.device) -> int:
    """Trials per block so that a block's working arrays fit in :data:`MEMORY_FRACTION` of the free memory."""
    free, _ = torch.cuda.mem_get_info(device)
    element = torch.finfo(dtype).bits // 8
    return max(1, min(trials, int(MEMORY_FRACTION * free) // max(per_trial_elements * element, 1)))


class _Draws:
    """Membership and noise of one block of trials from a device generator."""

    def __init__(self, seed: int, device: torch.device, trials: int, n: int, schedule) -> None:
        self.generator = torch.Generator(device=device).manual_seed(seed)
        self.device, self.trials, self.n, self.schedule = device, trials, n, schedule
        self.order: torch.Tensor | None = None

    def mask(self, number: int) -> torch.Tensor:
        """The boolean ``(trials, n)`` membership of step ``number``."""
        schedule, trials, n = self.schedule, self.trials, self.n
        uniforms = torch.rand(trials, n, generator=self.generator, device=self.device, dtype=torch.float64)
        if schedule.sampling == "poisson":
            return uniforms < schedule.poisson_rate(n)
        if schedule.sampling == "without-replacement":  # the m smallest of n uniform keys: a uniform subset
            cut = torch.kthvalue(uniforms, schedule.batch_size, dim=1).values.unsqueeze(1)
            return uniforms <= cut
        slot = number % (n // schedule.batch_size)  # shuffled: a permutation cut into batches of m
        if self.order is None or (slot == 0 and schedule.sampling == "shuffle"):
            self.order = torch.argsort(uniforms, dim=1)
        mask = torch.zeros(trials, n, dtype=torch.bool, device=self.device)
        mask.scatter_(1, self.order[:, slot * schedule.batch_size:(slot + 1) * schedule.batch_size], True)
        return mask

    def noise(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, device=self.device, dtype=dtype)


def gather_width(schedule, n: int) -> int:
    """Records gathered per trial and step: the batch size, plus ten standard deviations for Poisson batches
    (``P(batch > mean + 10 sd + 10)`` is below ``1e-20``), at most ``n``."""
    rate = schedule.poisson_rate(n) if schedule.sampling == "poisson" else schedule.batch_size / n
    mean = n * rate
    spread = math.sqrt(mean * max(1 - rate, 0.0)) if schedule.sampling == "poisson" else 0.0
    return min(n, int(mean + 10 * spread + 10))


def _clip_factors(norms: torch.Tensor, clip: float) -> torch.Tensor:
    return torch.clamp(clip / torch.clamp(norms, min=torch.finfo(norms.dtype).tiny), max=1.0)


def _dense_linear_sum(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                      augmented: torch.Tensor, scale: torch.Tensor, mask: torch.Tensor, clip: float,
                      injected) -> torch.Tensor:
    """The clipped sum of a linear model over each trial's batch by dense masked products over all records."""
    params = stacked.unflatten(theta)
    weight, bias = params["weight"], params["bias"]  # (T, C, F), (T, C)
    trials, classes, width = weight.shape
    logits = torch.matmul(weight, features.T) + bias.unsqueeze(-1)  # (T, C, n)
    if classes == 1:
        residual = torch.sigmoid(logits) - labels
    else:
        residual = torch.softmax(logits, dim=1) - nn.functional.one_hot(labels.long(), classes).T.to(logits.dtype)
    factor = _clip_factors(torch.linalg.vector_norm(residual, dim=1) * scale, clip) * mask  # (T, n)
    if injected:
        factor = torch.where(injected.slot >= 0, 0.0, factor)
    sums = torch.matmul(residual * factor.unsqueeze(1), augmented)  # (T, C, F + 1)
    total = torch.cat([sums[:, :, :width].reshape(trials, classes * width), sums[:, :, width]], dim=1)
    if injected:
        total = total + mask[:, injected.positions].to(total.dtype) @ injected.vectors
    return total


def _gathered_sum(stacked: Stacked, theta: torch.Tensor, features: torch.Tensor, labels: torch.Tensor,
                  mask: torch.Tensor, width: int, clip: float, injected) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped sum over the first ``width`` members of each batch, and whether a batch held more."""
    counts = mask.sum(dim=1)
    indices = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)[:, :width]  # members first, in order
    member = torch.arange(width, device=mask.device).unsqueeze(0) < counts.unsqueeze(1)
    if stacked.plan.layered:
        squared, weighted_sum = stacked.plan.clip_parts(stacked.unflatten, stacked.names, theta, features[indices],
                                                        labels[indices])
        weights = _clip_factors(torch.sqrt(squared), clip) * member
    else:
        gradients = per_example_gradients(stacked, theta, features[indices], labels[indices], closed_form=False)
        weights = _clip_factors(torch.linalg.vector_norm(gradients, dim=-1), clip) * member

        def weighted_sum(w: torch.Tensor) -> torch.Tensor:
            return torch.einsum("tk,tkp->tp", w, gradients)
    if injected:
        slots = injected.slot[indices]
        canary = (slots >= 0) & member
        weights = torch.where(canary, 0.0, weights)
        included = torch.zeros(theta.shape[0], injected.positions.numel() + 1, dtype=theta.dtype, device=theta.device)
        included.scatter_add_(1, torch.where(canary, slots, injected.positions.numel()), canary.to(theta.dtype))
        total = weighted_sum(weights) + included[:, :-1] @ injected.vectors
    else:
        total = weighted_sum(weights)
    return total, (counts > width).any()


def train_on_device(stacked: Stacked, records: torch.Tensor, injected, schedule, trials: int,
                    rng: np.random.Generator, *, iterates: bool = False, starts=None) -> torch.Tensor:
    """:func:`training.train` on a GPU: the same training, every step on the device (module docstring);
    ``starts(count, rng)`` draws a block's initial parameters from the tile's NumPy generator (``None``: the
    template's)."""
    features, labels = records[:, :-1], records[:, -1]
    n, device, dtype = features.shape[0], records.device, records.dtype
    seed = int(rng.integers(2**63 - 1))
    width = gather_width(schedule, n)
    if stacked.linear:
        per_trial = 4 * n * (stacked.size // (features.shape[1] + 1) + 1) + 4 * stacked.size
    elif stacked.plan.layered:
        per_trial = width * 3 * stacked.plan.example_elements(stacked.unflatten, stacked.flat,
                                                              features.unsqueeze(0)) + 4 * stacked.size
    else:
        per_trial = width * 2 * stacked.size
    block = device_block(trials, per_trial, dtype, device)
    size = stacked.size
    output = torch.empty(trials, size * (schedule.steps if iterates else 1), dtype=dtype, device=device)
    augmented = torch.cat([features, features.new_ones(n, 1)], dim=1)
    scale = torch.sqrt(features.square().sum(dim=1) + 1.0)
    smoother = None  # DP-LSSGD's A_s^{-T}, copied to the device once (else the FFT, on the device)
    if schedule.smoothing > 0 and 1 < size <= DENSE_MAX_DIM:
        smoother = smoothing_matrix(size, float(schedule.smoothing), dtype).to(device).T
    for start in range(0, trials, block):
        rows = slice(start, min(trials, start + block))
        count = rows.stop - rows.start
        first = (stacked.flat[:1].expand(count, -1) if starts is None
                 else starts(count, rng).to(device, dtype))  # drawn once: a second pass starts alike
        for attempt_width in (width, n):  # the second pass only if a batch outgrew the first's gather
            draws = _Draws((seed + start) % 2**63, device, count, n, schedule)
            theta = first.clone()
            overflow = torch.zeros((), dtype=torch.bool, device=device)
            with training_bar(schedule.steps, f"training {count} models") as bar:
                for number in range(schedule.steps):
                    mask = draws.mask(number)
                    if stacked.linear:
                        total = _dense_linear_sum(stacked, theta, features, labels, augmented, scale, mask,
                                                  schedule.clip, injected)
                    else:
                        total, outgrown = _gathered_sum(stacked, theta, features, labels, mask, attempt_width,
                                                        schedule.clip, injected)
                        overflow |= outgrown
                    update = total + schedule.noise_multiplier * schedule.clip * draws.noise(tuple(total.shape), dtype)
                    update = update / schedule.batch_size
                    if smoother is not None:
                        update = update @ smoother
                    elif schedule.smoothing > 0:
                        update = laplacian_smooth(update, schedule.smoothing)
                    theta = theta - schedule.eta * update
                    if iterates:
                        output[rows, number * size:(number + 1) * size] = theta
                    bar.update(1)
            if stacked.linear or attempt_width == n or not bool(overflow):  # one read-back per block
                break
        output[rows, -size:] = theta
    return output
