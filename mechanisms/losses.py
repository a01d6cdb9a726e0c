"""Convex losses with batched gradients and their constants on a domain.

Record layouts (one dataset row per record, ``d`` the model dimension):

========== ============== ============================================ ============ ==============
loss       record         f(w, record)                                 L on K       beta (smooth)
========== ============== ============================================ ============ ==============
linear     ``x`` (d)      ``<w, x>``                                   ``L``        0
logistic   ``x, y`` (d+1) ``log(1 + exp(-y <x, w>))``, ``y = +-1``     ``L``        ``L^2 / 4``
quadratic  ``c`` (d)      ``(beta/2) ||w - c||^2``                     ``beta D``   ``beta``
huber      ``x, y`` (d+1) ``h(<w, x> - y)``, ``h`` Huber with knot 1   ``L``        ``L^2``
concave    ``x`` (d)      ``<w, x> - (beta/2) ||w||^2`` (not convex)   ``L`` [*]    ``beta``
========== ============== ============================================ ============ ==============

[*] ``concave`` is the non-convex construction of docs/theory.md 10: its
records' part is linear (``L``-Lipschitz after clipping); its concave part
is a public regulariser, the same for every record, which DP-SGD applies
once per step (PNSGD, one record per step, with that record). Two records' gradients differ by at most ``2L``, which is all
composition bounds use; a step multiplies ``w`` by ``1 + eta beta > 1``, so
steps expand and amplification by iteration does not apply.

``x`` is clipped to the ball of radius ``L`` (input clipping) so that the
loss is ``L``-Lipschitz for any record; ``c`` is projected onto ``K`` so the
quadratic loss is ``beta * diam(K)``-Lipschitz on ``K`` (``D = diam(K)``).
The logistic smoothness is ``L^2/4`` (Hessian ``x x^T s(1-s)``, ``s(1-s) <=
1/4``); docs/theory.md section 1.8 corrects the lecture notes' ``L0/4``.

References
----------
Feldman, Mironov, Talwar, Thakurta, "Privacy Amplification by Iteration",
FOCS 2018, Prop. 18 (1-Lipschitz gradient steps for ``eta <= 2/beta``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_real
from dpaudit.mechanisms.domains import Domain
from dpaudit.mechanisms.user_loss import USER_LOSS, is_user_loss, load_gradient, user_gradients

__all__ = ["LOSS_NAMES", "NONCONVEX_LOSSES", "Loss", "clip_rows", "make_loss"]

LOSS_NAMES = ("linear", "logistic", "quadratic", "huber", "concave")
#: Losses whose gradient steps are not contractions (amplification by iteration does not apply).
NONCONVEX_LOSSES = ("concave",)


def clip_rows(x: torch.Tensor, bound: float) -> torch.Tensor:
    norms = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x * torch.clamp(bound / torch.clamp(norms, min=1e-300), max=1.0)


@dataclasses.dataclass(frozen=True, slots=True)
class Loss:
    """A convex loss and its constants on a domain.

    Attributes
    ----------
    name : str
        One of ``LOSS_NAMES``.
    dim : int
        Model dimension ``d``.
    lipschitz : float
        ``L``, the Lipschitz constant on ``K`` (``inf`` if unbounded).
    smoothness : float
        ``beta``, the Lipschitz constant of the gradient.
    strong_convexity : float
        ``lambda`` (``beta`` for the quadratic loss, else 0).
    domain : Domain
        The set ``K`` the constants hold on.
    function : callable, optional
        The user's ``gradient(w, record)`` of a loss named ``FILE.py:NAME``
        (``name`` is then ``"user"``; ``mechanisms.user_loss``).
    """

    name: str
    dim: int
    lipschitz: float
    smoothness: float
    strong_convexity: float
    domain: Domain
    function: Callable | None = None

    def extreme_records(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Records ``(x, x')`` whose gradients pull ``w`` furthest apart along ``u``.

        Returns the two records and the sign ``s`` such that the iterate is
        larger along ``s * u`` under ``x'``.
        """
        if self.name == USER_LOSS:
            raise ParameterError("canary kind 'input' needs the extreme records of the loss, which a loss of "
                                 "your own does not give; use canary kind 'gradient'")
        if self.name in ("linear", "concave"):  # gradient x: the step moves w along -x
            return self.lipschitz * u, -self.lipschitz * u, 1.0
        if self.name == "quadratic":  # the step pulls w towards the centre c
            radius = self.domain.diameter(self.dim) / 2
            return radius * u, -radius * u, -1.0
        if self.name == "logistic":  # label +1 pulls w along +x
            return np.append(self.lipschitz * u, 1.0), np.append(self.lipschitz * u, -1.0), -1.0
        big = 1e6  # huber: a huge label saturates the derivative at -1 (pulls w along +x)
        return np.append(self.lipschitz * u, big), np.append(self.lipschitz * u, -big), -1.0

    @property
    def record_dim(self) -> int:
        """Columns of one record (see the module table)."""
        return self.dim + 1 if self.name in ("logistic", "huber") else self.dim

    def prepare(self, records: torch.Tensor) -> torch.Tensor:
        """Clip or project records so the constants hold for any input."""
        if self.name == "quadratic":
            return self.domain.project(records)
        if self.name in ("linear", "concave"):
            return clip_rows(records, self.lipschitz)
        if self.name == USER_LOSS:  # its gradients are clipped instead
            return records
        features = clip_rows(records[..., : self.dim], self.lipschitz)
        labels = records[..., self.dim:]
        if self.name == "logistic":
            labels = torch.where(labels < 0, -1.0, 1.0).to(records.dtype)
        return torch.cat([features, labels], dim=-1)

    def gradient(self, w: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
        """``grad_w f(w, record)``, broadcasting ``w (..., d)`` against ``records (..., r)``.

        Records must have gone through :meth:`prepare`.
        """
        if self.name == "linear":
            return torch.broadcast_to(records, torch.broadcast_shapes(w.shape, records.shape))
        if self.name == "quadratic":
            return self.smoothness * (w - records)
        if self.name == "concave":
            return records - self.smoothness * w
        if self.name == USER_LOSS:  # a start point (d,) against records (n, d): clipped gradients (n, d)
            return user_gradients(self.function, w.reshape(1, -1), records.reshape(-1, self.dim),
                                  self.lipschitz)[0]
        x = records[..., : self.dim]
        return self._coefficient(w, records).unsqueeze(-1) * x

    def _coefficient(self, w: torch.Tensor, records: torch.Tensor) -> torch.Tensor:
        """``c`` with ``grad f(w, (x, y)) = c x`` for the logistic and Huber losses."""
        x, y = records[..., : self.dim], records[..., self.dim]
        # one record against (trials, d) iterates: a matrix-vector product, much faster than
        # reducing along rows of d entries
        margin = w @ x if x.dim() == 1 else (w * x).sum(-1)
        if self.name == "logistic":
            # d/dw log(1 + exp(-y <x, w>)) = -y x sigmoid(-y <x, w>)
            return -y * torch.sigmoid(-y * margin)
        return torch.clamp(margin - y, -1.0, 1.0)  # Huber derivative, knot 1

    def descend_(self, w: torch.Tensor, record: torch.Tensor, scale: float) -> torch.Tensor:
        """``w <- w - scale * grad f(w, record)`` in place, for ``(trials, d)`` iterates and one record.

        The same as ``w.sub_(self.gradient(w, record), alpha=scale)`` (the gradient
        at the old ``w``) without building the ``(trials, d)`` gradient: a rank-one
        update for the logistic and Huber losses.
        """
        if self.name == "linear":
            return w.sub_(record, alpha=scale)
        if self.name == "quadratic":
            factor = scale * self.smoothness
            return w.mul_(1.0 - factor).add_(record, alpha=factor)
        if self.name == "concave":
            return w.mul_(1.0 + scale * self.smoothness).sub_(record, alpha=scale)
        if self.name == USER_LOSS:  # the user's gradient at the old w, clipped to L
            return w.sub_(user_gradients(self.function, w, record.unsqueeze(0), self.lipschitz)[:, 0], alpha=scale)
        # a rank-one product: addmm_ with a column and a row runs about three times faster than addr_
        return w.addmm_(self._coefficient(w, record).unsqueeze(-1), record[: self.dim].unsqueeze(0), alpha=-scale)

    def stepper(self, records: torch.Tensor, rows: int) -> Callable[[torch.Tensor, int, float], torch.Tensor]:
        """``step_(w, position, scale)``: :meth:`descend_` on the record at ``position`` of ``records``.

        For ``(rows, d)`` iterates, with the records split once into features
        and labels and the margins computed into one buffer: no temporary
        array per step. The results are bit-identical to :meth:`descend_`
        (the same products; negating a factor of +-1 is exact).
        """
        if self.name not in ("logistic", "huber"):
            return lambda w, position, scale: self.descend_(w, records[position], scale)
        features = [records[position, : self.dim] for position in range(records.shape[0])]
        rows_of = [x.unsqueeze(0) for x in features]
        labels = records[:, self.dim].tolist()
        margins = torch.empty(rows, dtype=records.dtype)
        column = margins.unsqueeze(-1)
        logistic = self.name == "logistic"

        def step_(w: torch.Tensor, position: int, scale: float) -> torch.Tensor:
            y = labels[position]
            torch.mv(w, features[position], out=margins)
            if logistic:  # c = -y sigmoid(-y <x, w>); w - scale c x = w + (scale y) sigmoid(-y <x, w>) x
                margins.mul_(-y).sigmoid_()
                return w.addmm_(column, rows_of[position], alpha=scale * y)
            margins.sub_(y).clamp_(-1.0, 1.0)  # Huber derivative, knot 1
            return w.addmm_(column, rows_of[position], alpha=-scale)

        return step_


def make_loss(name: str, *, dim: int, lipschitz: float, domain: Domain,
              smoothness: float | None = None) -> Loss:
    """Build a loss with its constants on ``domain``.

    Parameters
    ----------
    name : {"linear", "logistic", "quadratic", "huber", "concave"} or "FILE.py:NAME"
    dim : int
        Model dimension.
    lipschitz : float
        ``L`` for linear, logistic and huber (records are clipped to it);
        the quadratic loss derives its own, ``smoothness * diam(K)``.
    domain : Domain
    smoothness : float, optional
        ``beta`` of the quadratic and concave losses (default 1); derived for the others.
    """
    if is_user_loss(name):
        lipschitz = check_real("lipschitz", lipschitz, positive=True)
        return Loss(USER_LOSS, dim, lipschitz, math.inf, 0.0, domain, function=load_gradient(name, dim))
    check_choice("loss", name, LOSS_NAMES)
    lipschitz = check_real("lipschitz", lipschitz, positive=True)
    if name == "quadratic":
        beta = 1.0 if smoothness is None else check_real("smoothness", smoothness, positive=True)
        diameter = domain.diameter(dim)
        return Loss(name, dim, beta * diameter if math.isfinite(diameter) else math.inf,
                    beta, beta, domain)
    if name == "concave":
        beta = 1.0 if smoothness is None else check_real("smoothness", smoothness, positive=True)
        return Loss(name, dim, lipschitz, beta, -beta, domain)
    if name == "linear":
        return Loss(name, dim, lipschitz, 0.0, 0.0, domain)
    beta = lipschitz * lipschitz / (4.0 if name == "logistic" else 1.0)  # a float product: inf, never an error
    if not math.isfinite(beta):
        raise ParameterError(f"lipschitz is too large for the {name} loss, whose smoothness L^2 overflows a float, "
                             f"got lipschitz={lipschitz!r}")
    return Loss(name, dim, lipschitz, beta, 0.0, domain)
