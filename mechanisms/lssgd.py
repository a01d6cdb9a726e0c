"""DP Laplacian-smoothing SGD (DP-LSSGD), docs/theory.md section 1.6.

``w <- w - eta * A_s^{-1}(g + n)`` with ``A_s = I - s L``, ``L`` the 1-D
discrete Laplacian with periodic boundary, applied in ``O(d log d)``::

    A_s^{-1} v = ifft( fft(v) / (1 + 2 s - 2 s cos(2 pi k / d)) ),  k = 0..d-1

``s = smoothing`` (never called sigma here). Smoothing is post-processing of
the noisy gradient: the privacy of the iterates is that of DP-SGD.

References
----------
Wang, Gu, Boedihardjo, Barekat, Osher, "DP-LSSGD: A Stochastic Optimization
Method to Lift the Utility in Privacy-Preserving ERM", 2019, eq. (3).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from dpaudit.mechanisms.base import param, register
from dpaudit.mechanisms.dpsgd import DPSGD
from dpaudit.mechanisms.validation import check_real

__all__ = ["DPLSSGD", "smoothing_denominator", "laplacian_smooth"]


def smoothing_denominator(dim: int, smoothing: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``1 + 2s - 2s cos(2 pi k / d)`` for ``k = 0..d//2`` (the rfft frequencies)."""
    k = torch.arange(dim // 2 + 1, dtype=torch.float64)
    return (1.0 + 2.0 * smoothing - 2.0 * smoothing * torch.cos(2.0 * math.pi * k / dim)).to(dtype)


def laplacian_smooth(v: torch.Tensor, smoothing: float) -> torch.Tensor:
    """``A_s^{-1} v`` along the last axis through the real FFT."""
    dim = v.shape[-1]
    if smoothing == 0.0 or dim == 1:
        return v
    spectrum = torch.fft.rfft(v, dim=-1) / smoothing_denominator(dim, smoothing, v.dtype)
    return torch.fft.irfft(spectrum, n=dim, dim=-1)


@register
@dataclasses.dataclass(frozen=True)
class DPLSSGD(DPSGD):
    """DP-SGD whose noisy gradient is smoothed by ``A_s^{-1}`` before the step."""

    name = "dp-lssgd"
    summary = "DP Laplacian-smoothing SGD: DP-SGD with the noisy gradient smoothed by A_s^-1"

    smoothing: float = param(1.0, "Laplacian smoothing constant s >= 0 (s = 0 is DP-SGD)")

    def validate(self) -> None:
        super().validate()
        check_real("smoothing", self.smoothing, nonnegative=True)

    @property
    def utility_gamma(self) -> float:
        """``gamma = (1/d) sum_i 1 / (1 + 2s - 2s cos(2 pi i / d))`` (docs/theory.md 1.6)."""
        i = torch.arange(1, self.dim + 1, dtype=torch.float64)
        terms = 1.0 / (1.0 + 2 * self.smoothing - 2 * self.smoothing * torch.cos(2 * math.pi * i / self.dim))
        return float(terms.mean())

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.sgd import lssgd_claims

        return lssgd_claims(self, index)

    def direction(self, gradient: torch.Tensor) -> torch.Tensor:
        return laplacian_smooth(gradient, float(self.smoothing))

    def undo_direction(self, update: np.ndarray) -> np.ndarray:
        """``A_s`` applied along the last axis: the spectrum times the smoothing denominator."""
        if self.smoothing <= 0 or self.dim == 1:
            return update
        denominator = smoothing_denominator(self.dim, float(self.smoothing)).numpy()
        return np.fft.irfft(np.fft.rfft(update, axis=-1) * denominator, n=self.dim, axis=-1)
