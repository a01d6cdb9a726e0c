"""Projected noisy SGD on a model stacked over trials: records in a fixed order, one per step.

References
----------
Feldman, Mironov, Talwar, Thakurta 2018, "Privacy Amplification by Iteration" (projected noisy SGD).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients
from dpaudit.mechanisms.models.training import BLOCK_ELEMENTS, clip_factors, standard_normal

__all__ = ["train_pnsgd"]


def train_pnsgd(stacked: Stacked, records: torch.Tensor, injected: dict[int, torch.Tensor], *, epochs: int,
                eta: float, clip: float, noise_multiplier: float, radius: float | None, trials: int,
                rng: np.random.Generator, iterates: bool = False,
                starts: Callable[[int, np.random.Generator], torch.Tensor] | None = None) -> torch.Tensor:
    """Projected noisy SGD on a model: records in their fixed order, one per step, for ``epochs`` passes.

    Each step subtracts ``eta`` times the record's clipped gradient (or the
    canary's injected one) plus ``N(0, (sigma C)^2 I)``, then projects onto
    the ball of the given radius about the origin (no projection for ``None``).
    Only the final parameters are returned (hidden state). ``starts(count, rng)``: a block's initial
    parameters (``None``: ``stacked.flat`` for every trial).
    """
    features, labels = records[:, :-1], records[:, -1]
    size, steps = stacked.size, epochs * features.shape[0]
    output = torch.empty(trials, size * (steps if iterates else 1), dtype=records.dtype, device=records.device)
    block = max(1, min(trials, BLOCK_ELEMENTS // max(4 * stacked.size, 1)))
    for start in range(0, trials, block):
        count = min(block, trials - start)
        theta = (stacked.flat[:1].expand(count, -1).clone().detach() if starts is None
                 else starts(count, rng).to(stacked.flat.device, records.dtype))
        rows, number = theta.shape[0], 0
        for _ in range(epochs):
            for position in range(features.shape[0]):
                if position in injected:
                    gradient = injected[position].expand(rows, -1)
                else:
                    gradient = per_example_gradients(stacked, theta, features[position].expand(rows, 1, -1),
                                                     labels[position].expand(rows, 1))[:, 0]
                    norms = torch.linalg.vector_norm(gradient, dim=-1, keepdim=True)
                    gradient = gradient * clip_factors(norms, clip)
                noise = standard_normal(rng, (rows, stacked.size), theta.dtype).to(theta.device)
                theta = theta - eta * (gradient + noise_multiplier * clip * noise)
                if radius is not None:
                    norms = torch.linalg.vector_norm(theta, dim=-1, keepdim=True)
                    theta = theta * torch.clamp(radius / torch.clamp(norms, min=1e-300), max=1.0)
                if iterates:
                    output[start:start + rows, number * size:(number + 1) * size] = theta
                number += 1
        output[start:start + rows, -size:] = theta
    return output
