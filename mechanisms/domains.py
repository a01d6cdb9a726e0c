"""Closed convex domains ``K`` and Euclidean projection onto them, batched.

``Pi_K`` is applied to tensors of shape ``(..., dim)``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_real

__all__ = ["Ball", "Box", "Domain", "Whole", "make_domain", "DOMAIN_NAMES"]

DOMAIN_NAMES = ("ball", "box", "whole")


class Domain:
    """A closed convex set with projection, diameter and a centre."""

    name: str = ""

    def project(self, w: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def diameter(self, dim: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def project_(self, w: torch.Tensor) -> torch.Tensor:
        """Project ``w`` in place (rows of a ``(trials, dim)`` tensor) and return it."""
        w.copy_(self.project(w))
        return w

    def projector(self, rows: int, dim: int, dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
        """:meth:`project_` for ``(rows, dim)`` iterates of ``dtype``, its buffers allocated once (step loops).

        The returned function projects in place and returns its argument; it
        computes exactly what :meth:`project_` does, without a temporary array
        per call. One projector per thread: its buffers are not shared.
        """
        return self.project_

    def center(self, dim: int) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def boundary_point(self, dim: int) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def contains(self, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def max_distance_from(self, points_norm: float, dim: int) -> float:
        """Upper bound on ``||w - c||`` over ``w`` in K and ``||c|| <= points_norm``."""
        return self.diameter(dim) if math.isfinite(self.diameter(dim)) else math.inf


@dataclasses.dataclass(frozen=True, slots=True)
class Ball(Domain):
    """Euclidean ball of ``radius`` about the origin."""

    radius: float
    name: str = "ball"

    def project(self, w: torch.Tensor) -> torch.Tensor:
        norms = torch.linalg.vector_norm(w, dim=-1, keepdim=True)
        factor = torch.clamp(self.radius / torch.clamp(norms, min=1e-300), max=1.0)
        return w * factor

    def diameter(self, dim: int) -> float:
        return 2.0 * self.radius

    def project_(self, w: torch.Tensor) -> torch.Tensor:
        # squared norms by a matrix product with ones: for (trials, d) rows with small d this is
        # twice as fast as torch.linalg.vector_norm(w, dim=-1), which reduces along short rows
        squares = w.square() @ torch.ones(w.shape[-1], 1, dtype=w.dtype)
        return w.mul_(squares.clamp_(min=1e-300).rsqrt_().mul_(self.radius).clamp_(max=1.0))

    def projector(self, rows: int, dim: int, dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
        squares = torch.empty((rows, dim), dtype=dtype)
        norms = torch.empty((rows, 1), dtype=dtype)
        ones = torch.ones((dim, 1), dtype=dtype)
        radius = self.radius

        def project_(w: torch.Tensor) -> torch.Tensor:
            # the same operations as project_, into buffers made once; without the lower clamp of the
            # squared norms, which changes no factor (a zero norm gives rsqrt = inf, then the factor 1)
            torch.mm(torch.mul(w, w, out=squares), ones, out=norms)
            return w.mul_(norms.rsqrt_().mul_(radius).clamp_(max=1.0))

        return project_

    def center(self, dim: int) -> torch.Tensor:
        return torch.zeros(dim, dtype=torch.float64)

    def boundary_point(self, dim: int) -> torch.Tensor:
        point = torch.zeros(dim, dtype=torch.float64)
        point[0] = self.radius
        return point

    def contains(self, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        return torch.linalg.vector_norm(w, dim=-1) <= self.radius * (1 + tol) + tol


@dataclasses.dataclass(frozen=True, slots=True)
class Box(Domain):
    """The box ``[low, high]^dim`` (an interval when ``dim == 1``)."""

    low: float
    high: float
    name: str = "box"

    def project(self, w: torch.Tensor) -> torch.Tensor:
        return torch.clamp(w, min=self.low, max=self.high)

    def diameter(self, dim: int) -> float:
        return (self.high - self.low) * math.sqrt(dim)

    def project_(self, w: torch.Tensor) -> torch.Tensor:
        return w.clamp_(min=self.low, max=self.high)

    def center(self, dim: int) -> torch.Tensor:
        return torch.full((dim,), 0.5 * (self.low + self.high), dtype=torch.float64)

    def boundary_point(self, dim: int) -> torch.Tensor:
        return torch.full((dim,), float(self.low), dtype=torch.float64)

    def contains(self, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        return torch.all((w >= self.low - tol) & (w <= self.high + tol), dim=-1)


@dataclasses.dataclass(frozen=True, slots=True)
class Whole(Domain):
    """The whole space: no projection, infinite diameter."""

    name: str = "whole"

    def project(self, w: torch.Tensor) -> torch.Tensor:
        return w

    def diameter(self, dim: int) -> float:
        return math.inf

    def project_(self, w: torch.Tensor) -> torch.Tensor:
        return w

    def center(self, dim: int) -> torch.Tensor:
        return torch.zeros(dim, dtype=torch.float64)

    def boundary_point(self, dim: int) -> torch.Tensor:
        raise ParameterError("init='boundary' needs a bounded domain, got domain='whole'")

    def contains(self, w: torch.Tensor, tol: float = 1e-9) -> torch.Tensor:
        return torch.ones(w.shape[:-1], dtype=torch.bool)


def make_domain(name: str, *, radius: float = 1.0, low: float = -1.0,
                high: float = 1.0) -> Domain:
    """Build a domain from the flat mechanism parameters.

    Raises
    ------
    ParameterError
        For an unknown name, a non-positive radius or ``low >= high``.
    """
    check_choice("domain", name, DOMAIN_NAMES)
    if name == "ball":
        return Ball(check_real("radius", radius, positive=True))
    if name == "box":
        low = check_real("low", low)
        high = check_real("high", high)
        if not low < high:
            raise ParameterError(f"low must be < high, got low={low}, high={high}")
        return Box(low, high)
    return Whole()
