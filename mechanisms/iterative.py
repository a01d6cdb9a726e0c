"""Shared parameters of the iterative mechanisms: size, domain, start point."""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np
import torch

from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.core.kinds import NoiseKind, check_enum
from dpaudit.core.validation import check_int, check_real
from dpaudit.mechanisms.accounting.descriptions import ConvexSet, LossTerms
from dpaudit.mechanisms.base import Mechanism, param, snap
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.domains import Domain, make_domain
from dpaudit.mechanisms.losses import NONCONVEX_LOSSES, Loss, clip_rows, make_loss

__all__ = ["ITERATIVE_CANARIES", "IterateRelease", "IterativeMechanism", "LossIteration", "injected_rows"]

#: Canary kinds of the iterative mechanisms, the tightest first.
ITERATIVE_CANARIES = ("gradient", "input", "boundary")


@dataclasses.dataclass(frozen=True)
class IterativeMechanism(Mechanism):
    """Base of iterations over ``n`` records in a fixed, public order.

    ``init`` is ``"center"`` (the centre of ``K``), ``"boundary"`` (a point
    on the boundary of a bounded ``K``: ``radius * e_1`` for a ball, the low
    corner of a box) or a list of ``dim`` numbers.
    """

    n: int = param(100, "number of records (steps of one pass)")
    dim: int = param(1, "model dimension d")
    domain: str = param("ball", "convex set K: 'ball', 'box' or 'whole' (no projection)")
    radius: float = param(1.0, "radius of K when domain='ball'")
    low: float = param(-1.0, "lower end of every coordinate when domain='box'")
    high: float = param(1.0, "upper end of every coordinate when domain='box'")
    init: str | tuple = param("center", "start point: 'center', 'boundary' or a list of d numbers")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")

    def validate(self) -> None:
        check_int("n", self.n, minimum=1)
        check_int("dim", self.dim, minimum=1)
        self.check_dtype()
        domain = self.domain_set
        if isinstance(self.init, numbers.Real) and not isinstance(self.init, bool) and self.dim == 1:
            object.__setattr__(self, "init", (self.init,))  # a scalar start point of a one-dimensional model
        if isinstance(self.init, (list, tuple)):
            if len(self.init) != self.dim or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                                     for v in self.init):
                raise ParameterError(f"init must be 'center', 'boundary' or {self.dim} finite numbers, "
                                     f"got a list of {len(self.init)} items")
            values = tuple(float(v) for v in self.init)
            if not all(math.isfinite(v) for v in values):
                raise ParameterError(
                    f"init must be 'center', 'boundary' or {self.dim} finite numbers, "
                    f"got init={list(self.init)!r}")
            object.__setattr__(self, "init", values)
            point = torch.tensor(values, dtype=torch.float64)
            if not bool(domain.contains(point)):
                raise ParameterError(f"init must lie in K, got init={list(values)}")
        elif self.init not in ("center", "boundary"):
            raise ParameterError(
                f"init must be 'center', 'boundary' or a list of numbers, got init={self.init!r}")
        elif self.init == "boundary":
            domain.boundary_point(self.dim)

    canary_kinds = ITERATIVE_CANARIES

    @property
    def user_loss(self):
        """The gradient function of a loss named ``FILE.py:NAME`` (``None`` for a built-in loss or none)."""
        loss = self.loss_function
        return None if loss is None else loss.function

    @property
    def user_function(self):
        """A user's loss is fingerprinted with the audit (its source: a changed file changes the audit id)."""
        loss = self.user_loss
        return loss if loss is not None else super().user_function

    def inapplicable(self) -> dict[str, str]:
        unused = {}
        if self.domain != "ball":
            unused["radius"] = f"domain={self.domain!r} has no radius"
        if self.domain != "box":
            unused["low"] = unused["high"] = f"domain={self.domain!r} has no coordinate ends"
        noise = getattr(self, "noise", None)
        if noise == "gaussian" and hasattr(self, "scale"):
            unused["scale"] = "noise='gaussian' takes sigma"
        if noise == "laplace" and hasattr(self, "sigma"):
            unused["sigma"] = "noise='laplace' takes scale"
        loss = getattr(self, "loss", None)
        if loss is not None and loss not in ("quadratic", "concave"):
            unused["smoothness"] = (f"loss={loss!r} has its own smoothness; only loss='quadratic' and "
                                    f"loss='concave' take one")
        return unused

    @property
    def canary_dim(self) -> int:
        return self.dim

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        record_a, record_b, sign = self.loss_function.extreme_records(u)
        return record_a, record_b, sign * u

    def gradient_canary(self) -> tuple[float, float]:
        # the step subtracts the gradient: w is larger along +u when S' holds -L u
        return float(self.loss_function.lipschitz), 1.0

    def with_boundary_start(self) -> "IterativeMechanism":
        if self.domain == "whole":
            raise ParameterError("canary kind 'boundary' needs a bounded domain, got domain='whole'")
        return dataclasses.replace(self, init="boundary")

    def release(self, outputs: np.ndarray, *, inplace: bool = False) -> np.ndarray:
        """Snap to the release grid without leaving ``K`` (docs/theory.md 1.9).

        On a ball about the origin coordinates are rounded toward zero (the
        norm can only shrink); on a box they are rounded to nearest and
        clipped to its public ends.
        """
        grid = self.release_grid
        if grid is None:
            return outputs
        if self.domain == "ball":
            return snap(outputs, grid, toward_zero=True, inplace=inplace)
        snapped = snap(outputs, grid, inplace=inplace)
        if self.domain != "box":
            return snapped
        return np.clip(snapped, self.low, self.high, out=snapped if inplace and snapped is outputs else None)

    def exact_options(self) -> dict:
        """Interval, start point and noise of a one-dimensional instance (for ``exact_steps``)."""
        if self.dim != 1:
            raise NotExact(f"the exact accountant is one-dimensional, got dim={self.dim}")
        if self.domain == "box":
            low, high = float(self.low), float(self.high)
        elif self.domain == "ball":
            low, high = -float(self.radius), float(self.radius)
        else:
            low, high = -math.inf, math.inf
        start = float(self.start(1, torch.float64)[0, 0])
        return {"low": low, "high": high, "start": start, "noise": self.noise, "stop": False}

    def check_noise(self) -> None:
        """Validate ``noise`` and its parameter (``sigma`` for Gaussian, ``scale`` for Laplace)."""
        object.__setattr__(self, "noise", check_enum("noise", self.noise, NoiseKind))
        name = "sigma" if self.noise == "gaussian" else "scale"
        value = getattr(self, name)
        if value is None:
            raise ParameterError(f"noise={self.noise!r} needs {name}, got {name}=None")
        check_real(name, value, positive=True)

    @property
    def noise_spread(self) -> float:
        """``sigma`` for Gaussian noise, ``scale`` for Laplace noise."""
        return float(self.sigma if self.noise == "gaussian" else self.scale)

    @property
    def domain_set(self) -> Domain:
        """The convex set ``K``."""
        return make_domain(self.domain, radius=self.radius, low=self.low, high=self.high)

    @property
    def region(self) -> ConvexSet:
        """``K`` as the claim builders see it: its kind, diameter and (for a box) its ends."""
        box = self.domain == "box"
        return ConvexSet(self.domain, self.domain_set.diameter(self.dim), low=float(self.low) if box else -math.inf,
                         high=float(self.high) if box else math.inf)

    @property
    def loss_terms(self) -> LossTerms:
        """The loss as the claim builders see it (:attr:`loss_function`'s constants and shape)."""
        loss = self.loss_function
        return LossTerms(loss.name, str(self.loss), loss.lipschitz, loss.smoothness, loss.strong_convexity,
                         convex=loss.name not in NONCONVEX_LOSSES)

    @property
    def noise_parameter(self) -> float:
        """``sigma`` (Gaussian noise) or ``scale`` (Laplace noise), as given."""
        return self.sigma if self.noise == "gaussian" else self.scale

    @property
    def loss_function(self) -> "Loss | None":
        """The per-record loss with its constants on ``K`` (``None``: the steps are not a loss's gradients)."""
        return None

    def clipped_record_gradients(self, data: Dataset) -> np.ndarray:
        """Each record's gradient at the start point, clipped to the loss's Lipschitz bound (see
        :meth:`Mechanism.clipped_record_gradients`)."""
        loss = self.loss_function
        if loss is None:
            return super().clipped_record_gradients(data)
        records = loss.prepare(torch.as_tensor(np.array(data.records), dtype=torch.float64))
        gradients = loss.gradient(self.start(1, torch.float64)[0], records).double().numpy()
        return clip_to_norm(gradients.reshape(len(records), -1), float(loss.lipschitz))

    def gradient_table(self, data: Dataset) -> np.ndarray:
        """Every record's gradient at the origin, its injected gradient clipped to ``L`` in its place, shape
        ``(n, dim)``: the constant step of each record for the exact laws of ``accounting`` (linear loss)."""
        loss = self.loss_function
        records = loss.prepare(torch.as_tensor(data.records, dtype=torch.float64))
        table = loss.gradient(torch.zeros(self.dim, dtype=torch.float64), records).clone()
        for position, vector in injected_rows(data, self.dim, torch.float64).items():
            table[position] = clip_rows(vector, loss.lipschitz)
        return table.numpy()

    def start(self, trials: int, dtype: torch.dtype) -> torch.Tensor:
        """The start point repeated for every trial, shape ``(trials, dim)``."""
        if self.init == "center":
            point = self.domain_set.center(self.dim)
        elif self.init == "boundary":
            point = self.domain_set.boundary_point(self.dim)
        else:
            point = torch.tensor(self.init, dtype=torch.float64)
        return point.to(dtype).expand(trials, self.dim).clone()


class LossIteration(IterativeMechanism):
    """Base of the iterations that step along a per-record loss's gradient (``pnsgd``, ``dp-sgd``): subclasses
    declare the fields ``loss``, ``lipschitz`` and ``smoothness``."""

    @property
    def loss_function(self) -> Loss:
        """The loss with its constants ``L``, ``beta``, ``lambda`` on ``K``."""
        return make_loss(self.loss, dim=self.dim, lipschitz=self.lipschitz,
                         domain=self.domain_set, smoothness=self.smoothness)

    @property
    def canary_kinds(self) -> tuple[str, ...]:
        """Gradient canaries only for a user's loss (its extreme records are unknown)."""
        return ("gradient",) if self.user_loss is not None else ITERATIVE_CANARIES


class IterateRelease:
    """A training of ``steps`` steps that releases its last iterate (``output = "final"``) or every one
    (``"iterates"``, one block of ``dim`` columns per step); subclasses declare ``output`` and ``steps`` (or
    :attr:`iterate_count`)."""

    @property
    def iterate_count(self) -> int:
        """The iterates an ``"iterates"`` output lists: one per step."""
        return self.steps

    def output_direction(self, direction: np.ndarray) -> np.ndarray:
        """A model-space direction in output space: every released iterate moves along it."""
        return np.tile(direction, self.iterate_count) if self.output == "iterates" else direction

    @property
    def released_steps(self) -> int:
        return self.iterate_count if self.output == "iterates" else 1

    @property
    def releases_iterates(self) -> bool:
        return self.output == "iterates"


def injected_rows(data: Dataset, dim: int, dtype: torch.dtype) -> dict[int, torch.Tensor]:
    """Injected gradients as tensors keyed by 0-based step."""
    return {position - 1: torch.as_tensor(vector, dtype=dtype)
            for position, vector in data.injected.items()}


def clip_to_norm(gradients: np.ndarray, clip: float) -> np.ndarray:
    """Rows of ``gradients`` scaled down to norm at most ``clip`` (unchanged for an infinite ``clip``)."""
    if not np.isfinite(clip):
        return gradients
    norms = np.linalg.norm(gradients, axis=1, keepdims=True)
    return gradients * np.minimum(1.0, clip / np.maximum(norms, 1e-300))
