"""Broken mechanisms: each a realistic implementation bug in a subclass of a correct one.

They are plain classes: importing this module registers nothing, so the
zoo never changes what ``dpaudit.mechanisms.make`` knows.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from dpaudit.mechanisms import noise
from dpaudit.mechanisms.base import param
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import NotExact
from dpaudit.mechanisms.iterative import injected_rows
from dpaudit.mechanisms.kernels import ProjectedKernel
from dpaudit.mechanisms.losses import _clip_rows
from dpaudit.mechanisms.sgd import PNSGD
from dpaudit.mechanisms.shuffle import ShuffledRR

class _Bug:
    """Mixin: a buggy variant has no exact accountant (its parent's steps are not what it samples)."""

    def exact_steps(self, data: Dataset):
        raise NotExact(f"{type(self).__name__} is a zoo bug: the exact accountant describes its correct parent")


__all__ = ["NoiselessLastStepKernel", "UnclippedPNSGD", "DeterministicStopPNSGD", "UnshuffledRR", "WrongFlipRR"]


@dataclasses.dataclass(frozen=True)
class NoiselessLastStepKernel(_Bug, ProjectedKernel):
    """Bug: the last step forgets its noise (``X_n = Pi_K(psi_n(X_{n-1}) + u_n)``)."""

    name = "zoo-kernel-noiseless-last-step"
    summary = "zoo bug: projected kernel whose last step adds no noise"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        noisy = dataclasses.replace(self, n=self.n - 1) if self.n > 1 else None
        x = (ProjectedKernel._sample(noisy, Dataset(data.records[:-1], {k: v for k, v in data.injected.items()
                                                                         if k < self.n}), trials, rng, dtype)
             if noisy is not None else self.start(trials, dtype))
        shift = _clip_rows(torch.as_tensor(data.records[-1, : self.dim], dtype=dtype), self.shift)
        return self.domain_set.project(x + shift)


@dataclasses.dataclass(frozen=True)
class UnclippedPNSGD(_Bug, PNSGD):
    """Bug: records are not clipped, so the linear loss is not ``L``-Lipschitz for large records."""

    name = "zoo-pnsgd-unclipped"
    summary = "zoo bug: PNSGD without clipping (loss not L-Lipschitz)"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        records = torch.as_tensor(data.records, dtype=dtype)
        injected = injected_rows(data, self.dim, dtype)
        w = self.start(trials, dtype)
        for step in range(self.n):
            gradient = injected.get(step, records[step])  # linear loss: the raw record is the gradient
            z = noise.draw(self.noise, (trials, self.dim), self.eta * self.noise_spread, rng, dtype)
            w = self.domain_set.project(w - self.eta * gradient - z)
        return w


@dataclasses.dataclass(frozen=True)
class DeterministicStopPNSGD(_Bug, PNSGD):
    """Bug: under the Stop-PNSGD claim, the stopping time is always ``n`` (not random)."""

    name = "zoo-pnsgd-fixed-stop"
    summary = "zoo bug: Stop-PNSGD whose stopping time is always n"

    def active_window(self, trials: int, rng: np.random.Generator):
        first, last = super().active_window(trials, rng)
        return first, torch.full_like(last, self.n)


@dataclasses.dataclass(frozen=True)
class UnshuffledRR(_Bug, ShuffledRR):
    """Bug: the 'shuffle' keeps the users' order."""

    name = "zoo-rr-unshuffled"
    summary = "zoo bug: randomized response whose shuffle does not shuffle"

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        bits = torch.as_tensor(data.records[:, 0], dtype=torch.bool)
        flip = torch.from_numpy(rng.random((trials, self.n)) >= self.keep_probability)
        return torch.logical_xor(bits.unsqueeze(0), flip).to(dtype)


@dataclasses.dataclass(frozen=True)
class WrongFlipRR(_Bug, ShuffledRR):
    """Bug: the keep probability uses ``2 * eps0`` (``e^{2 eps0} / (1 + e^{2 eps0})``)."""

    name = "zoo-rr-wrong-flip"
    summary = "zoo bug: randomized response with the flip probability of 2*eps0"

    wrong_factor: float = param(2.0, "factor applied to eps0 by mistake")

    @property
    def keep_probability(self) -> float:
        return 1.0 / (1.0 + math.exp(-self.wrong_factor * self.epsilon0))
