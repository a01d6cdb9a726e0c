"""Iterated projected Gaussian / Laplace kernels: a contractive noisy iteration.

docs/theory.md sections 1.2 and 4. Each record ``x_t = (u_t, r_t)`` holds a shift
``u_t`` (clipped to norm ``shift``) and a reset flag ``r_t`` in {0, 1}::

    psi_t(X) = c + rho * (X - c)   (translation: rho = 1; contraction: rho = contraction)
    psi_t(X) = c                   (reset: if r_t = 1 or step = 'reset')
    X_t = Pi_K(psi_t(X_{t-1}) + u_t + N_t),  N_t ~ N(0, sigma^2 I) or Lap(0, scale)^d

``c`` is the centre of ``K``. Every ``psi_t`` is 1-Lipschitz, so this is a
contractive noisy iteration; the reset flag is part of the public structure
(neighbouring datasets share it and differ in ``u`` only).

References
----------
Feldman et al., "Privacy Amplification by Iteration", FOCS 2018, Def. 19 (CNI).
Asoodeh, Diaz, Calmon, "Contraction of E_gamma-divergence and its
applications to privacy", Prop. 1 (projected Gaussian kernel).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from dpaudit.mechanisms import noise
from dpaudit.mechanisms.base import param, register
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.iterative import IterativeMechanism, injected_rows
from dpaudit.mechanisms.losses import _clip_rows
from dpaudit.core.validation import check_choice, check_real

__all__ = ["ProjectedKernel", "STEPS"]

STEPS = ("translation", "contraction", "reset")


@register
@dataclasses.dataclass(frozen=True)
class ProjectedKernel(IterativeMechanism):
    """Contractive noisy iteration ``X <- Pi_K(psi_t(X) + u_t + noise)``."""

    name = "projected-kernel"
    summary = "iterated projected Gaussian/Laplace kernel with data-dependent shifts (a CNI)"

    noise: str = param("gaussian", "'gaussian' or 'laplace' (coordinate-wise)")
    sigma: float | None = param(1.0, "std of the Gaussian noise of each step")
    scale: float | None = param(None, "scale of the Laplace noise of each step")
    step: str = param("translation", "map of each step: 'translation', 'contraction' or 'reset'")
    contraction: float = param(1.0, "factor rho of step='contraction', in [0, 1)")
    shift: float = param(1.0, "bound on ||u_t||: record shifts are clipped to it")

    def validate(self) -> None:
        super().validate()
        check_choice("step", self.step, STEPS)
        check_real("shift", self.shift, positive=True)
        self.check_noise()
        factor = check_real("contraction", self.contraction, minimum=0.0, maximum=1.0)
        if self.step == "contraction" and factor >= 1.0:
            raise ParameterError(
                f"step='contraction' needs contraction in [0, 1), got contraction={factor}")

    canary_kinds = ("reset", "input", "gradient", "boundary")

    def inapplicable(self) -> dict[str, str]:
        unused = super().inapplicable()
        if self.step != "contraction":
            unused["contraction"] = f"step={self.step!r} does not contract"
        return unused

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # a record is (shift, reset flag); the flag is public, shared by both datasets
        flag = 1.0 if reset else 0.0
        return np.append(self.shift * u, flag), np.append(-self.shift * u, flag), -u

    def gradient_canary(self) -> tuple[float, float]:
        return float(self.shift), -1.0  # kernels add their shift: larger along -u under S'

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.kernel import kernel_claims

        return kernel_claims(self, index)

    def exact_steps(self, data: Dataset) -> tuple[list, dict]:
        """Affine steps ``X <- Pi_K(rho X + offset + N)`` of a one-dimensional kernel (docs/theory.md 5)."""
        from dpaudit.mechanisms.accounting.exact1d import Step

        options = self.exact_options()
        low, high = options["low"], options["high"]
        center = 0.5 * (low + high) if math.isfinite(low) else 0.0
        steps = []
        for t in range(self.n):
            u = data.injected.get(t + 1, data.records[t, :1])[0]
            u = float(np.clip(u, -self.shift, self.shift))
            reset = data.records[t, 1] != 0 or self.rho == 0.0
            rho = 0.0 if reset else self.rho
            steps.append(Step(offset=center * (1 - rho) + u, rho=rho, spread=self.noise_spread))
        return steps, options

    @property
    def rho(self) -> float:
        """Lipschitz factor of the non-reset steps."""
        return {"translation": 1.0, "contraction": float(self.contraction), "reset": 0.0}[self.step]

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return self.dim + 1

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_B(x) - log p_A(x)`` for one-dimensional instances (``exact1d``)."""
        from dpaudit.mechanisms.accounting.instances import log_likelihood_ratio

        return log_likelihood_ratio(self, outputs, dataset_a, dataset_b)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        domain = self.domain_set
        center = domain.center(self.dim).to(dtype)
        records = torch.as_tensor(data.records, dtype=dtype)
        shifts = _clip_rows(records[:, : self.dim], self.shift)
        for position, vector in injected_rows(data, self.dim, dtype).items():
            shifts[position] = _clip_rows(vector, self.shift)
        resets = (records[:, self.dim] != 0).tolist()
        moves = shifts.any(dim=1).tolist()  # zero shifts (most, in an audit) need no pass
        x = self.start(trials, dtype)
        spread = self.noise_spread
        source = noise.StepNoise(self.noise, (trials, self.dim), rng, dtype)
        project_ = domain.projector(trials, self.dim, dtype)  # buffers made once, not per step
        for t in range(self.n):
            z = source.next()
            if resets[t] or self.rho == 0.0:
                x = torch.add(center, z, alpha=spread)
            elif self.rho == 1.0:
                x.add_(z, alpha=spread)
            else:
                x = (x - center).mul_(self.rho).add_(center).add_(z, alpha=spread)
            project_(x.add_(shifts[t]) if moves[t] else x)
        return x
