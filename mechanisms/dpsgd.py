"""DP-SGD with subsampled batches, releasing the last iterate (docs/theory.md 1.5).

Per step a batch ``B`` of expected size ``m = batch_size`` is drawn
(uniformly without replacement, or Poisson with rate ``q = m / n``)::

    g = (1/m) sum_{i in B} grad f(theta, x_i) + N(0, noise_std^2 I)
    theta <- Pi_K(theta - eta * g)          (no projection for domain='whole')

With Poisson sampling the sum is divided by the expected batch size ``m``
(the convention of Opacus and of Mironov, Talwar, Zhang 2019).

References
----------
Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian
Mechanism", 2019.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from dpaudit.mechanisms import noise, tiles
from dpaudit.mechanisms.base import param, register
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.iterative import IterativeMechanism, injected_rows
from dpaudit.mechanisms.losses import Loss, _clip_rows, make_loss
from dpaudit.mechanisms.errors import ParameterError
from dpaudit.mechanisms.kinds import Sampling, check_enum
from dpaudit.mechanisms.validation import check_int, check_real

__all__ = ["DPSGD", "SAMPLINGS"]

SAMPLINGS = tuple(sampling.value for sampling in Sampling)
_SELECTION_SAMPLING_MAX = 16  # records with non-zero gradient up to which batches are drawn sparsely


@register
@dataclasses.dataclass(frozen=True)
class DPSGD(IterativeMechanism):
    """Noisy mini-batch SGD with subsampling; only the last iterate is released."""

    name = "dp-sgd"
    summary = "DP-SGD with subsampled batches (without replacement or Poisson), last iterate"

    domain: str = param("whole", "convex set K: 'ball', 'box' or 'whole' (no projection)")
    batch_size: int = param(10, "batch size m (expected size for Poisson sampling)")
    steps: int = param(100, "number of steps T")
    eta: float = param(0.1, "step size")
    noise_std: float = param(1.0, "std of the Gaussian noise added to the mean gradient")
    sampling: str = param("without-replacement", "'without-replacement' or 'poisson' (rate m/n)")
    loss: str = param("linear", "'linear', 'logistic', 'quadratic' or 'huber'")
    lipschitz: float = param(1.0, "L: records are clipped so the loss is L-Lipschitz")
    smoothness: float | None = param(None, "beta of the quadratic loss (default 1)")

    def validate(self) -> None:
        super().validate()
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        if self.batch_size > self.n:
            raise ParameterError(
                f"batch_size must be <= n={self.n}, got batch_size={self.batch_size}")
        check_real("eta", self.eta, positive=True)
        check_real("noise_std", self.noise_std, positive=True)
        object.__setattr__(self, "sampling", check_enum("sampling", self.sampling, Sampling))
        self.loss_function

    @property
    def loss_function(self) -> Loss:
        """The loss with its constants on ``K``."""
        return make_loss(self.loss, dim=self.dim, lipschitz=self.lipschitz,
                         domain=self.domain_set, smoothness=self.smoothness)

    @property
    def zero_record_is_absent(self) -> bool:
        # with Poisson sampling the sum is divided by the fixed expected batch size,
        # so a zero record contributes exactly what an absent one does
        return self.sampling == Sampling.POISSON

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.sgd import dpsgd_claims

        return dpsgd_claims(self, index)

    @property
    def sample_rate(self) -> float:
        """``q = m / n``."""
        return self.batch_size / self.n

    @property
    def output_dim(self) -> int:
        return self.dim

    @property
    def record_dim(self) -> int:
        return self.loss_function.record_dim

    def working_bytes(self, trials: int) -> int:
        """Adds the batch masks and per-example gradients: ``(tile, n, dim + 1)`` floats per thread."""
        rows = min(trials, tiles.TILE_TRIALS) * max(tiles.threads(), 1)
        return super().working_bytes(trials) + rows * self.n * (self.dim + 1) * 8 * 2

    def batch_mask(self, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        """0/1 membership of each record in each trial's batch, shape ``(trials, n)``."""
        uniforms = noise.uniform((trials, self.n), rng)
        if self.sampling == "poisson":
            return (uniforms < self.sample_rate).to(dtype)
        chosen = torch.topk(uniforms, self.batch_size, dim=1).indices
        return torch.zeros((trials, self.n), dtype=dtype).scatter_(1, chosen, 1.0)

    def direction(self, gradient: torch.Tensor) -> torch.Tensor:
        """Map the noisy gradient to the update direction (identity for DP-SGD)."""
        return gradient

    def membership(self, trials: int, count: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        """0/1 membership of ``count`` given records in each trial's batch, shape ``(trials, count)``.

        Poisson: independent with rate ``q``. Without replacement: selection
        sampling (Knuth, TAOCP vol. 2, 3.4.2, Algorithm S) run over these
        records first, so record ``i`` joins with probability
        ``(m - chosen so far) / (n - i)``; the joint law of any ``count``
        fixed records' membership in a uniform ``m``-subset is exactly this, and
        the rest of the batch need not be drawn. Costs ``count`` uniforms per trial.
        """
        uniforms = noise.uniform((trials, count), rng)
        if self.sampling == "poisson":
            return (uniforms < self.sample_rate).to(dtype)
        chosen = torch.zeros(trials, dtype=torch.float64)
        members = torch.empty((trials, count), dtype=dtype)
        for i in range(count):
            joins = uniforms[:, i] * (self.n - i) < (self.batch_size - chosen)
            members[:, i] = joins
            chosen += joins
        return members

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        loss = self.loss_function
        domain = self.domain_set
        records = loss.prepare(torch.as_tensor(data.records, dtype=dtype))
        injected = {k: _clip_rows(v, loss.lipschitz) for k, v in injected_rows(data, self.dim, dtype).items()}
        constant = loss.name == "linear"
        if constant:
            table = loss.gradient(torch.zeros(self.dim, dtype=dtype), records).clone()
            for position, vector in injected.items():
                table[position] = vector
        theta = self.start(trials, dtype)
        # Constant gradients: zero-gradient records add nothing to the sum, so only
        # the membership of the others is drawn (exactly; see ``membership``).
        active = torch.nonzero(torch.linalg.vector_norm(table, dim=1) > 0).flatten() if constant else None
        sparse = constant and active.numel() < self.n and (
            self.sampling == "poisson" or active.numel() <= _SELECTION_SAMPLING_MAX)
        source = noise.StepNoise("gaussian", (trials, self.dim), rng, dtype)
        scaled = table[active] / self.batch_size if sparse else None
        for _ in range(self.steps):
            if sparse:
                gradient = self.membership(trials, active.numel(), rng, dtype)
            elif constant:
                gradient = self.batch_mask(trials, rng, dtype) @ table
            else:
                mask = self.batch_mask(trials, rng, dtype)
                per_record = loss.gradient(theta.unsqueeze(1), records.unsqueeze(0))
                for position, vector in injected.items():
                    per_record[:, position] = vector
                gradient = torch.einsum("tn,tnd->td", mask, per_record)
            if sparse:  # sigma z + membership @ (rows / m) in one product, in place on this step's noise
                gradient = source.next().addmm_(gradient, scaled, beta=self.noise_std)
            else:
                gradient = gradient.div_(self.batch_size).add_(source.next(), alpha=self.noise_std)
            theta = domain.project_(theta.sub_(self.direction(gradient), alpha=self.eta))
        return theta
