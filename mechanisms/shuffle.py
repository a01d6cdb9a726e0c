"""Shuffled randomized response (docs/theory.md section 1.7).

Each of ``n`` users holds a bit and reports it through ``eps0``-randomized
response (keep with probability ``e^eps0 / (1 + e^eps0)``); the reports are
then uniformly permuted. The output is the permuted report vector.

References
----------
Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.accounting.descriptions import ShuffledRandomizedResponse
from dpaudit.mechanisms.base import Mechanism, param
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.registry import register

__all__ = ["ShuffledRR"]


@register
@dataclasses.dataclass(frozen=True)
class ShuffledRR(Mechanism):
    """``n`` randomized-response reports, uniformly shuffled."""

    name = "shuffled-rr"
    summary = "eps0-randomized response per user followed by a uniform shuffle"

    n: int = param(100, "number of users")
    epsilon0: float = param(1.0, "local privacy parameter eps0 of each report")
    dtype: str = param("float64", "torch dtype of the output: float32 or float64")

    def validate(self) -> None:
        check_int("n", self.n, minimum=1)
        # above 36 the keep probability e^eps0 / (1 + e^eps0) rounds to 1 in float64: no answer is ever flipped
        check_real("epsilon0", self.epsilon0, positive=True, maximum=36.0)
        self.check_dtype()

    @property
    def keep_probability(self) -> float:
        """``P[report = bit] = e^eps0 / (1 + e^eps0)``."""
        return 1.0 / (1.0 + math.exp(-self.epsilon0))

    @property
    def has_positions(self) -> bool:
        return False  # the shuffle erases the users' order

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # a 1-bit in S, a 0-bit in S': the count of 1-reports is larger under S
        return np.array([1.0]), np.array([0.0]), -np.ones(self.n)

    def random_background(self, rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
        return rng.integers(0, 2, shape).astype(float)

    @property
    def privacy_description(self) -> ShuffledRandomizedResponse:
        return ShuffledRandomizedResponse(self.n, self.epsilon0)

    @property
    def output_dim(self) -> int:
        return self.n

    @property
    def record_dim(self) -> int:
        return 1

    def check_dataset(self, data: Dataset) -> None:
        super().check_dataset(data)
        values = data.records[:, 0]
        if not ((values == 0) | (values == 1)).all():
            raise ParameterError("shuffled-rr records must be bits 0 or 1")

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        bits = torch.as_tensor(data.records[:, 0], dtype=torch.bool)
        flip = torch.from_numpy(rng.random((trials, self.n)) >= self.keep_probability)
        reports = torch.logical_xor(bits.unsqueeze(0), flip)
        order = torch.from_numpy(rng.random((trials, self.n)).argsort(axis=1))
        return torch.gather(reports, 1, order).to(dtype)
