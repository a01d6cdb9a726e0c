"""DP Laplacian-smoothing SGD (DP-LSSGD), docs/theory.md section 1.6.

``w <- w - eta * A_s^{-1}(g + n)`` with ``A_s = I - s L``, ``L`` the 1-D
discrete Laplacian with periodic boundary. ``A_s`` is circulant, so its
inverse is diagonal in the Fourier basis::

    A_s^{-1} v = ifft( fft(v) / (1 + 2 s - 2 s cos(2 pi k / d)) ),  k = 0..d-1

``s = smoothing`` (never called sigma here). Smoothing is post-processing of
the noisy gradient: the privacy of the iterates is that of DP-SGD.

The solve takes the cheapest exact form for the size: up to
:data:`DENSE_MAX_DIM` coordinates, one matrix product with the dense inverse
(a symmetric circulant computed once per ``(d, s)``; ``d^2`` multiplications
per row in a single BLAS call), above it the real FFT pair (``O(d log d)``,
the spectrum scaled in place by the reciprocal denominator). Both are the
same linear map; they differ by float rounding only, far below the release
grid.

References
----------
Wang, Gu, Boedihardjo, Barekat, Osher, "DP-LSSGD: A Stochastic Optimization
Method to Lift the Utility in Privacy-Preserving ERM", 2019, eq. (3).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import torch

from dpaudit.mechanisms.base import param, register
from dpaudit.mechanisms.dpsgd import DPSGD
from dpaudit.core.validation import check_real

__all__ = ["DENSE_MAX_DIM", "DPLSSGD", "laplacian_smooth", "smoothing_denominator", "smoothing_matrix"]

#: Dimensions up to which ``A_s^{-1}`` is applied as a dense product. Measured on the 2-core development
#: machine, rows of 81,920 coordinates: d = 10 dense 0.1 ms, FFT 0.4 ms; d = 64 0.23 ms against 0.39 ms;
#: d = 128 about equal; d = 256 dense 0.88 ms, FFT 0.44 ms.
DENSE_MAX_DIM = 64


def smoothing_denominator(dim: int, smoothing: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``1 + 2s - 2s cos(2 pi k / d)`` for ``k = 0..d//2`` (the rfft frequencies)."""
    k = torch.arange(dim // 2 + 1, dtype=torch.float64)
    return (1.0 + 2.0 * smoothing - 2.0 * smoothing * torch.cos(2.0 * math.pi * k / dim)).to(dtype)


@functools.lru_cache(maxsize=64)
def _reciprocal(dim: int, smoothing: float, dtype: torch.dtype) -> torch.Tensor:
    """``1 / smoothing_denominator`` as a ``(d//2 + 1, 1)`` column, to scale a spectrum viewed as real pairs."""
    return (1.0 / smoothing_denominator(dim, smoothing)).to(dtype).unsqueeze(-1)


def _fourier_smooth(v: torch.Tensor, smoothing: float) -> torch.Tensor:
    dim = v.shape[-1]
    spectrum = torch.fft.rfft(v, dim=-1)
    # a real factor per frequency: scale the (real, imaginary) pairs in place, no complex division
    torch.view_as_real(spectrum).mul_(_reciprocal(dim, smoothing, v.dtype).to(v.device))
    return torch.fft.irfft(spectrum, n=dim, dim=-1)


@functools.lru_cache(maxsize=64)
def smoothing_matrix(dim: int, smoothing: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The dense ``A_s^{-1}`` (``d x d``, symmetric circulant), its columns ``A_s^{-1} e_j`` in float64.

    Cached: one matrix per ``(d, s, dtype)``. Read-only by convention (shared between calls and threads).
    """
    return _fourier_smooth(torch.eye(dim, dtype=torch.float64), smoothing).T.to(dtype).contiguous()


@functools.lru_cache(maxsize=64)
def _right_factor(dim: int, smoothing: float, dtype: torch.dtype) -> np.ndarray:
    """``A_s^{-T}`` as a C-contiguous array: rows times it are the smoothed rows (NumPy's BLAS path needs
    both operands contiguous; a transposed view sends it to a loop many times slower)."""
    return np.ascontiguousarray(smoothing_matrix(dim, smoothing, dtype).numpy().T)


def laplacian_smooth(v: torch.Tensor, smoothing: float) -> torch.Tensor:
    """``A_s^{-1} v`` along the last axis (dense product for ``d <= DENSE_MAX_DIM`` on CPU, else the real FFT).

    The dense product of CPU tensors outside autograd is NumPy's (one
    OpenBLAS call, rows times ``A_s^{-T}``): for tall, narrow operands it takes
    about a third of the time of ``torch.mm`` with this build's MKL, and it
    writes a contiguous result, which the step then reads in one pass.
    """
    dim = v.shape[-1]
    if smoothing == 0.0 or dim == 1:
        return v
    if dim > DENSE_MAX_DIM or v.dtype not in (torch.float32, torch.float64):
        return _fourier_smooth(v, smoothing)
    if v.device.type == "cpu" and not v.requires_grad:
        rows = np.ascontiguousarray(v.detach().numpy().reshape(-1, dim))
        return torch.from_numpy(np.matmul(rows, _right_factor(dim, float(smoothing), v.dtype))).reshape(v.shape)
    return v @ smoothing_matrix(dim, float(smoothing), v.dtype).to(v.device).T


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

    def _update_is_the_packages(self) -> bool:
        """Whether this class samples as dp-sgd and smooths as dp-lssgd (the exact laws cover both)."""
        return type(self)._sample is DPSGD._sample and type(self).direction is DPLSSGD.direction

    def undo_direction(self, update: np.ndarray) -> np.ndarray:
        """``A_s`` applied along the last axis: the spectrum times the smoothing denominator."""
        if self.smoothing <= 0 or self.dim == 1:
            return update
        denominator = smoothing_denominator(self.dim, float(self.smoothing)).numpy()
        return np.fft.irfft(np.fft.rfft(update, axis=-1) * denominator, n=self.dim, axis=-1)
