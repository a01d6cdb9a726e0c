"""Gaussian and Laplace mechanisms on clipped sum queries: exact-privacy baselines.

THEORY.md section 1.1. Records are clipped to norm ``sensitivity`` (L2 for
Gaussian, L1 for Laplace), so the sum has sensitivity ``sensitivity`` between
add/remove neighbours and ``2 * sensitivity`` between replace-one neighbours.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from mechanisms import noise
from mechanisms.base import Mechanism, param, register
from mechanisms.dataset import Dataset
from mechanisms.validation import check_int, check_real

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


@register
@dataclasses.dataclass(frozen=True)
class GaussianMechanism(Mechanism):
    """Sum of L2-clipped records plus ``N(0, sigma^2 I)`` noise.

    References
    ----------
    Balle & Wang, "Improving the Gaussian Mechanism for Differential
    Privacy", ICML 2018, Thm 8 (exact profile).
    """

    name = "gaussian"
    summary = "clipped sum plus Gaussian noise (exact privacy known)"

    dim: int = param(1, "output dimension (columns of a record)")
    sensitivity: float = param(1.0, "L2 clipping norm of a record (add/remove sensitivity)")
    sigma: float = param(1.0, "standard deviation of the Gaussian noise")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")

    def validate(self) -> None:
        check_int("dim", self.dim, minimum=1)
        check_real("sensitivity", self.sensitivity, positive=True)
        check_real("sigma", self.sigma, positive=True)
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

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        total = _clip(_records(data, dtype), self.sensitivity, 2).sum(0)
        return noise.gaussian((trials, self.dim), self.sigma, rng, dtype).add_(total)

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_B(x) - log p_A(x)``: the optimal distinguisher (Neyman-Pearson)."""
        mean_a, mean_b = (_clip(_records(d, torch.float64), self.sensitivity, 2).sum(0).numpy()
                          for d in (dataset_a, dataset_b))
        x = np.asarray(outputs, dtype=float)
        return (((x - mean_a) ** 2).sum(1) - ((x - mean_b) ** 2).sum(1)) / (2 * self.sigma**2)


@register
@dataclasses.dataclass(frozen=True)
class LaplaceMechanism(Mechanism):
    """Sum of L1-clipped records plus ``Lap(0, scale)`` noise per coordinate."""

    name = "laplace"
    summary = "clipped sum plus Laplace noise (exact privacy known)"

    dim: int = param(1, "output dimension (columns of a record)")
    sensitivity: float = param(1.0, "L1 clipping norm of a record (add/remove sensitivity)")
    scale: float = param(1.0, "scale b of the Laplace noise")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")

    def validate(self) -> None:
        check_int("dim", self.dim, minimum=1)
        check_real("sensitivity", self.sensitivity, positive=True)
        check_real("scale", self.scale, positive=True)
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

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        total = _clip(_records(data, dtype), self.sensitivity, 1).sum(0)
        return noise.laplace((trials, self.dim), self.scale, rng, dtype).add_(total)

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_B(x) - log p_A(x)``: the optimal distinguisher (Neyman-Pearson)."""
        mean_a, mean_b = (_clip(_records(d, torch.float64), self.sensitivity, 1).sum(0).numpy()
                          for d in (dataset_a, dataset_b))
        x = np.asarray(outputs, dtype=float)
        return (np.abs(x - mean_a).sum(1) - np.abs(x - mean_b).sum(1)) / self.scale
