"""Projected noisy SGD (PNSGD) and its multi-epoch version, batched over trials.

docs/theory.md sections 1.3 and 1.4. One pass over ``S = (x_1..x_n)`` in a fixed
public order; only the last iterate is released::

    v_{t+1} = w_t - eta * (grad f(w_t, x_{t+1}) + Z),  Z ~ N(0, sigma^2 I) or Lap(0, scale)^d
    w_{t+1} = Pi_K(v_{t+1})

References
----------
Feldman, Mironov, Talwar, Thakurta, "Privacy Amplification by Iteration",
FOCS 2018, Algorithm 1 (PNSGD, Skip-PNSGD, Stop-PNSGD) and Appendix B,
Algorithm 2 (multiple epochs).
Asoodeh, Diaz, Calmon, "Contraction of E_gamma-divergence and its
applications to privacy", Thm 3 (Laplace noise on an interval).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

from dpaudit.mechanisms import noise
from dpaudit.mechanisms.base import param, register
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.mechanisms.iterative import ITERATIVE_CANARIES, IterativeMechanism, injected_rows
from dpaudit.mechanisms.losses import Loss, _clip_rows, make_loss
from dpaudit.core.validation import check_choice, check_int, check_real

__all__ = ["MultiEpochPNSGD", "PNSGD", "VARIANTS"]

VARIANTS = ("plain", "skip", "stop")


@register
@dataclasses.dataclass(frozen=True)
class PNSGD(IterativeMechanism):
    """Projected noisy SGD releasing only its last iterate (Feldman et al. Alg. 1).

    ``variant="skip"`` skips the first ``t0 ~ U{0..floor(n/2)}`` records;
    ``variant="stop"`` stops after ``T ~ U{1..n}`` steps and returns ``w_T``.
    Both are drawn independently per trial.
    """

    name = "pnsgd"
    summary = "projected noisy SGD, one pass, last iterate (Feldman et al. Alg. 1)"

    eta: float = param(0.1, "step size")
    sigma: float | None = param(1.0, "std of the gradient noise Z (noise='gaussian'); the step adds eta*Z")
    scale: float | None = param(None, "scale of Laplace gradient noise Z (noise='laplace')")
    noise: str = param("gaussian", "'gaussian' or 'laplace' (coordinate-wise)")
    variant: str = param("plain", "'plain', 'skip' (random start) or 'stop' (random stop)")
    loss: str = param("linear", "'linear', 'logistic', 'quadratic', 'huber', 'concave' (not convex: steps "
                                "expand) or 'FILE.py:NAME' (a loss of your own)")
    lipschitz: float = param(1.0, "L: records are clipped so the loss is L-Lipschitz")
    smoothness: float | None = param(None, "beta of the quadratic or concave loss (default 1)")

    def validate(self) -> None:
        super().validate()
        check_real("eta", self.eta, positive=True)
        check_choice("variant", self.variant, VARIANTS)
        self.check_noise()
        self.loss_function  # validates loss, lipschitz, smoothness

    @property
    def loss_function(self) -> Loss:
        """The loss with its constants ``L``, ``beta``, ``lambda`` on ``K``."""
        return make_loss(self.loss, dim=self.dim, lipschitz=self.lipschitz,
                         domain=self.domain_set, smoothness=self.smoothness)

    @property
    def canary_kinds(self) -> tuple[str, ...]:
        """Gradient canaries only for a user's loss (its extreme records are unknown)."""
        return ("gradient",) if self.user_loss is not None else ITERATIVE_CANARIES

    @property
    def steps(self) -> int:
        """Total number of gradient steps."""
        return self.n

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return self.loss_function.record_dim

    def positions(self) -> list[int]:
        """0-based record position of every step, in order."""
        return [k % self.n for k in range(self.steps)]

    def active_window(self, trials: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-trial first and last active step (1-based, inclusive)."""
        first = torch.ones(trials, dtype=torch.long)
        last = torch.full((trials,), self.steps, dtype=torch.long)
        if self.variant == "skip":
            first = torch.from_numpy(rng.integers(0, self.n // 2 + 1, trials)) + 1
        elif self.variant == "stop":
            last = torch.from_numpy(rng.integers(1, self.n + 1, trials))
        return first, last

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.iterative import pnsgd_claims

        return pnsgd_claims(self, index)

    def exact_steps(self, data: Dataset) -> tuple[list, dict]:
        """Affine steps of a one-dimensional run: gradient canaries and linear records translate,
        quadratic records contract (docs/theory.md 5)."""
        from dpaudit.mechanisms.accounting.exact1d import Step

        options = self.exact_options()
        if self.variant == "skip":
            raise NotExact("variant='skip' is not covered by the exact accountant")
        options["stop"] = self.variant == "stop"
        loss = self.loss_function
        spread = self.eta * self.noise_spread
        steps = []
        for step in range(self.steps):
            position = step % self.n
            injected = data.injected.get(position + 1)
            if injected is not None or loss.name == "linear":
                gradient = float(injected[0]) if injected is not None else float(data.records[position, 0])
                gradient = float(np.clip(gradient, -loss.lipschitz, loss.lipschitz))
                steps.append(Step(offset=-self.eta * gradient, rho=1.0, spread=spread))
            elif loss.name == "quadratic":
                centre = float(np.clip(data.records[position, 0], options["low"], options["high"]))
                rho = 1 - self.eta * loss.smoothness
                if not 0 <= rho <= 1:
                    raise NotExact(f"eta * beta must be in [0, 1] for an affine quadratic step, "
                                   f"got {self.eta * loss.smoothness}")
                steps.append(Step(offset=self.eta * loss.smoothness * centre, rho=rho, spread=spread))
            else:
                raise NotExact(f"the {loss.name} loss gives non-affine steps")
        return steps, options

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_B(x) - log p_A(x)`` for one-dimensional affine instances (``exact1d``)."""
        from dpaudit.mechanisms.accounting.instances import log_likelihood_ratio

        return log_likelihood_ratio(self, outputs, dataset_a, dataset_b)

    def exact_output_laws(self, data_a: Dataset, data_b: Dataset):
        """Exact laws of a multi-dimensional whole-space linear-loss run (``accounting.training_laws``) or of a
        whole-space concave-loss run (``accounting.scheduled``); other one-dimensional runs are propagated from
        :meth:`exact_steps` (``None``)."""
        from dpaudit.mechanisms.accounting.scheduled import expanding_pnsgd_laws
        from dpaudit.mechanisms.accounting.training_laws import pnsgd_laws

        concave = self.loss_function.name == "concave"
        if self.dim == 1 and not concave:
            return None
        if type(self).exact_steps is not PNSGD.exact_steps or type(self)._sample is not PNSGD._sample:
            raise NotExact(f"{type(self).__name__} samples in its own way; the exact laws describe pnsgd")
        if concave:  # expanding steps: Gaussian in any dimension (docs/theory.md 10.4)
            return expanding_pnsgd_laws(self, data_a, data_b)
        try:
            return pnsgd_laws(self, data_a, data_b)
        except NotExact as reason:
            raise NotExact(f"the exact accountant is one-dimensional, got dim={self.dim}, and {reason}") from None

    def _descend_(self, w: torch.Tensor, step: int, loss: Loss, records: torch.Tensor,
                  injected: dict[int, torch.Tensor], offsets: torch.Tensor | None,
                  descend_: Callable[[torch.Tensor, int, float], torch.Tensor] | None = None) -> torch.Tensor:
        """``w <- w - eta * grad f(w, x_t)`` in place for step ``t`` (1-based).

        ``offsets[t - 1]`` holds ``eta * g_t`` when gradients are constant; an
        injected gradient replaces the record's. ``descend_``, the loss's
        :meth:`~dpaudit.mechanisms.losses.Loss.stepper` for these records,
        takes the step without a temporary array.
        """
        if offsets is not None:
            return w.sub_(offsets[step - 1])
        position = (step - 1) % self.n
        if position in injected:
            return w.sub_(injected[position], alpha=self.eta)
        if descend_ is not None:
            return descend_(w, position, self.eta)
        return loss.descend_(w, records[position], self.eta)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        loss = self.loss_function
        domain = self.domain_set
        records = loss.prepare(torch.as_tensor(data.records, dtype=dtype))
        injected = {k: _clip_rows(v, loss.lipschitz) for k, v in injected_rows(data, self.dim, dtype).items()}
        w = self.start(trials, dtype)
        first, last = self.active_window(trials, rng)
        masked = self.variant != "plain"
        noise_step = self.eta * self.noise_spread  # the step adds eta * spread * (unit noise)
        constant = loss.name == "linear"
        offsets = None
        if constant:
            # constant gradients: eta * g_t for every step, computed once
            offsets = self.eta * torch.stack([injected.get(position, records[position])
                                              for position in self.positions()])
            moves = offsets.any(dim=1).tolist()  # zero records (most, in an audit) need no pass
        source = noise.StepNoise(self.noise, (trials, self.dim), rng, dtype)
        project_ = domain.projector(trials, self.dim, dtype)  # buffers made once, not per step
        descend_ = loss.stepper(records, trials)
        for step in range(1, self.steps + 1):
            z = source.next()
            if constant and not masked:
                w.sub_(z, alpha=noise_step)
                project_(w.sub_(offsets[step - 1]) if moves[step - 1] else w)
                continue
            if masked:
                updated = self._descend_(w.clone(), step, loss, records, injected, offsets, descend_)
                project_(updated.sub_(z, alpha=noise_step))
                active = ((first <= step) & (step <= last)).unsqueeze(-1)
                w = torch.where(active, updated, w)
            else:
                updated = self._descend_(w, step, loss, records, injected, offsets, descend_)
                project_(updated.sub_(z, alpha=noise_step))
        return w


@register
@dataclasses.dataclass(frozen=True)
class MultiEpochPNSGD(PNSGD):
    """PNSGD run for ``epochs`` passes over the same fixed order (Feldman et al. Alg. 2)."""

    name = "multi-epoch-pnsgd"
    summary = "PNSGD over several passes in a fixed order, last iterate (Feldman et al. Alg. 2)"

    epochs: int = param(2, "number of passes E over the data")

    def validate(self) -> None:
        super().validate()
        check_int("epochs", self.epochs, minimum=1)
        if self.variant != "plain":
            raise ParameterError(
                f"multi-epoch-pnsgd supports variant='plain' only, got variant={self.variant!r}")

    @property
    def steps(self) -> int:
        return self.n * self.epochs

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.iterative import multi_epoch_claims

        return multi_epoch_claims(self, index)

