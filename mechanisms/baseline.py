"""Gaussian and Laplace mechanisms on clipped sum queries: exact-privacy baselines.

docs/theory.md section 1.1. Records are clipped to norm ``sensitivity`` (L2 for
Gaussian, L1 for Laplace), so the sum has sensitivity ``sensitivity`` between
add/remove neighbours and ``2 * sensitivity`` between replace-one neighbours.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np
import torch

from dpaudit.mechanisms import noise
from dpaudit.mechanisms.base import Mechanism, param, register
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.validation import check_int, check_real

__all__ = ["GaussianMechanism", "LaplaceMechanism"]


def _records(data: Dataset, dtype: torch.dtype) -> torch.Tensor:
    """Records with injected vectors in their rows (both are clipped alike)."""
    records = torch.as_tensor(data.records, dtype=dtype).clone()
    for position, vector in data.injected.items():
        records[position - 1] = torch.as_tensor(vector, dtype=dtype)
    return records


def _clip(records: torch.Tensor, bound: float, order: int) -> torch.Tensor:
    norms = torch.linalg.vector_norm(records, ord=order, dim=-1, keepdim=True)
    return records * torch.clamp(bound / torch.clamp(norms, min=1e-300), max=1.0)


class _SumQuery(Mechanism):
    """A clipped sum plus noise; subclasses name the norm, the noise and its parameter."""

    norm_order: ClassVar[int]
    noise_kind: ClassVar[str]
    spread_name: ClassVar[str]

    @property
    def spread(self) -> float:
        return float(getattr(self, self.spread_name))

    def validate(self) -> None:
        check_int("dim", self.dim, minimum=1)
        check_real("sensitivity", self.sensitivity, positive=True)
        check_real(self.spread_name, getattr(self, self.spread_name), positive=True)
        self.check_dtype()

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return self.dim

    @property
    def n_records(self) -> None:
        return None

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # records of norm `sensitivity` in the clipping norm, +u in S and -u in S'
        unit = u / np.linalg.norm(u, ord=self.norm_order)
        return self.sensitivity * unit, -self.sensitivity * unit, -u

    def total(self, data: Dataset, dtype: torch.dtype) -> torch.Tensor:
        """The clipped sum (injected vectors are clipped like records)."""
        return _clip(_records(data, dtype), self.sensitivity, self.norm_order).sum(0)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        return noise.draw(self.noise_kind, (trials, self.dim), self.spread, rng, dtype).add_(self.total(data, dtype))

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_B(x) - log p_A(x)``: the optimal distinguisher (Neyman-Pearson)."""
        mean_a, mean_b = (self.total(d, torch.float64).numpy() for d in (dataset_a, dataset_b))
        x = np.asarray(outputs, dtype=float)
        if self.norm_order == 2:  # Gaussian: squared distances over 2 sigma^2
            return (((x - mean_a) ** 2).sum(1) - ((x - mean_b) ** 2).sum(1)) / (2 * self.spread**2)
        # Laplace: |x - a|_1 - |x - b|_1 lies in [-|a - b|_1, |a - b|_1]; clip so that rounding in the
        # sums can never put a score outside that range (a value only one dataset could produce)
        reach = float(np.abs(mean_a - mean_b).sum())
        return np.clip(np.abs(x - mean_a).sum(1) - np.abs(x - mean_b).sum(1), -reach, reach) / self.spread


@register
@dataclasses.dataclass(frozen=True)
class GaussianMechanism(_SumQuery):
    """Sum of L2-clipped records plus ``N(0, sigma^2 I)`` noise.

    References
    ----------
    Balle & Wang, "Improving the Gaussian Mechanism for Differential
    Privacy", ICML 2018, Thm 8 (exact profile).
    """

    name = "gaussian"
    summary = "clipped sum plus Gaussian noise (exact privacy known)"
    norm_order, noise_kind, spread_name = 2, "gaussian", "sigma"

    dim: int = param(1, "output dimension (columns of a record)")
    sensitivity: float = param(1.0, "L2 clipping norm of a record (add/remove sensitivity)")
    sigma: float = param(1.0, "standard deviation of the Gaussian noise")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.baseline import gaussian_claims

        return gaussian_claims(self, index)


@register
@dataclasses.dataclass(frozen=True)
class LaplaceMechanism(_SumQuery):
    """Sum of L1-clipped records plus ``Lap(0, scale)`` noise per coordinate."""

    name = "laplace"
    summary = "clipped sum plus Laplace noise (exact privacy known)"
    norm_order, noise_kind, spread_name = 1, "laplace", "scale"

    dim: int = param(1, "output dimension (columns of a record)")
    sensitivity: float = param(1.0, "L1 clipping norm of a record (add/remove sensitivity)")
    scale: float = param(1.0, "scale b of the Laplace noise")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.baseline import laplace_claims

        return laplace_claims(self, index)
