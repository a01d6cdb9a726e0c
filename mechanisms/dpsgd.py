"""DP-SGD with subsampled or shuffled batches, releasing the last iterate or every one (docs/theory.md 1.5, 6).

Per step a batch ``B`` of expected size ``m = batch_size`` is drawn
(uniformly without replacement, Poisson with rate ``q = m / n``, or the next
``m`` records of a uniform permutation: ``shuffle`` draws a fresh one each
epoch of ``n / m`` steps, ``shuffle-once`` one for all epochs)::

    g = (1/m) sum_{i in B} grad f(theta, x_i) + N(0, noise_std^2 I)
    theta <- Pi_K(theta - eta * g)          (no projection for domain='whole')

With Poisson sampling the sum is divided by the expected batch size ``m``
(the convention of Opacus and of Mironov, Talwar, Zhang 2019).
``output = "iterates"`` releases every ``theta`` (white box), else the last.
Shuffled batches support the zero-out relation only (the canary replaced by
a zero-gradient record keeps the batch sizes); their default background
gives every other record the gradient ``-L e_1``, the worst case of Chua et
al. (docs/theory.md 6): the canary's batch is then marked under both
hypotheses, so its position hides nothing.

References
----------
Abadi et al., "Deep Learning with Differential Privacy", CCS 2016.
Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian
Mechanism", 2019.
Chua et al., "How Private are DP-SGD Implementations?", ICML 2024.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.core.kinds import SHUFFLED, Relation, Sampling, check_enum
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms import noise, tiles
from dpaudit.mechanisms.accounting.descriptions import MinibatchNoisySgd
from dpaudit.mechanisms.accounting.instances import log_likelihood_ratio
from dpaudit.mechanisms.accounting.scheduled import is_scheduled, scheduled_laws
from dpaudit.mechanisms.accounting.training_laws import dpsgd_laws
from dpaudit.mechanisms.base import param
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.iterative import IterateRelease, LossIteration, injected_rows
from dpaudit.mechanisms.losses import clip_rows
from dpaudit.mechanisms.registry import register
from dpaudit.mechanisms.user_loss import user_gradients

__all__ = ["DPSGD", "SAMPLINGS"]

SAMPLINGS = tuple(sampling.value for sampling in Sampling)
_SELECTION_SAMPLING_MAX = 16  # records with non-zero gradient up to which batches are drawn sparsely


@register
@dataclasses.dataclass(frozen=True)
class DPSGD(IterateRelease, LossIteration):
    """Noisy mini-batch SGD with subsampled or shuffled batches; the last iterate or every one is released."""

    name = "dp-sgd"
    summary = "DP-SGD with subsampled or shuffled batches, last iterate or every iterate"

    domain: str = param("whole", "convex set K: 'ball', 'box' or 'whole' (no projection)")
    batch_size: int = param(10, "batch size m (expected size for Poisson sampling)")
    steps: int = param(100, "number of steps T")
    eta: float = param(0.1, "step size")
    noise_std: float = param(1.0, "std of the Gaussian noise added to the mean gradient")
    sampling: str = param("without-replacement", "'without-replacement', 'poisson' (rate m/n), 'shuffle' (a fresh "
                                                  "permutation each epoch) or 'shuffle-once' (one for all epochs)")
    loss: str = param("linear", "'linear', 'logistic', 'quadratic', 'huber', 'concave' (not convex: steps "
                                "expand) or 'FILE.py:NAME' (a loss of your own)")
    lipschitz: float = param(1.0, "L: records are clipped so the loss is L-Lipschitz")
    smoothness: float | None = param(None, "beta of the quadratic or concave loss (default 1)")
    output: str = param("final", "'final' (hidden state: the last iterate) or 'iterates' (every step's)")

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
        check_choice("output", self.output, ("final", "iterates"))
        if self.sampling in SHUFFLED and self.n % self.batch_size:
            raise ParameterError(f"sampling={self.sampling!r} cuts each permutation into batches of batch_size: "
                                 f"batch_size must divide n={self.n}, got batch_size={self.batch_size}")
        self.loss_function

    @property
    def zero_record_is_absent(self) -> bool:
        # with Poisson sampling the sum is divided by the fixed expected batch size,
        # so a zero record contributes exactly what an absent one does
        return self.sampling == Sampling.POISSON

    # -- shuffled batches and released iterates (docs/theory.md 6) -------------
    @property
    def batches_per_epoch(self) -> int:
        """``n / m``: the steps of one epoch of shuffled batches."""
        return self.n // self.batch_size

    @property
    def epochs(self) -> int:
        """Epochs begun by ``steps`` shuffled batches (the last may be partial)."""
        return -(-self.steps // self.batches_per_epoch)

    @property
    def default_pair(self) -> str:
        """The canary pair of a default audit: zero-out for shuffled batches (the only relation they fit)."""
        return "zero" if self.sampling in SHUFFLED else "opposite"

    def pair_relation(self, pair: str) -> Relation | None:
        """The relation a canary ``pair`` realises here (``None``: the usual rule), or an error if unsupported."""
        if self.sampling not in SHUFFLED:
            return None
        if pair != "zero":
            raise ParameterError(f"sampling={self.sampling!r} supports the zero-out relation only (a zero-gradient "
                                 f"record keeps the batch sizes): use canary pair='zero', got pair={pair!r}")
        return Relation.ZERO_OUT

    def default_dataset(self) -> Dataset:
        """Zero records; for shuffled batches of the linear loss, records of gradient ``-L e_1`` (worst case)."""
        if self.sampling in SHUFFLED and self.loss == "linear":
            records = np.zeros((self.n, self.record_dim))
            records[:, 0] = -float(self.lipschitz)
            return Dataset(records)
        return super().default_dataset()

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_S'(out) / p_S(out)`` for score 'exact': of every iterate released
        (``accounting.white_box``), or of the last iterate where its laws are known (``accounting.instances``)."""
        if self.output == "iterates":
            # SciPy's stats load for released iterates only
            from dpaudit.mechanisms.accounting.white_box import steps_log_likelihood_ratio

            return steps_log_likelihood_ratio(self, outputs, dataset_a, dataset_b)

        return log_likelihood_ratio(self, outputs, dataset_a, dataset_b)

    def reference_scores(self, dataset_a: Dataset, dataset_b: Dataset, size: int, seed: int = 0):
        """Scores of :meth:`log_likelihood_ratio` simulated from the known laws (to choose thresholds on)."""
        # SciPy's stats load for released iterates only
        from dpaudit.mechanisms.accounting.white_box import steps_reference_scores

        return steps_reference_scores(self, dataset_a, dataset_b, size, seed)

    def score_law(self, dataset_a: Dataset, dataset_b: Dataset):
        """The law of :meth:`log_likelihood_ratio` under ``S`` and ``S'`` (for the ceiling), or :class:`NotExact`:
        exact for subsampled batches, simulated from the known laws for shuffled ones (10^6 draws per dataset,
        about +-0.1 in the ceiling; ``accounting.white_box.steps_score_law``)."""
        # SciPy's stats load for released iterates only
        from dpaudit.mechanisms.accounting.white_box import steps_score_law

        return steps_score_law(self, dataset_a, dataset_b)

    @property
    def privacy_description(self) -> MinibatchNoisySgd:
        """DP-SGD as the accountants see it (a scheduled canary's claims come from the same description)."""
        return MinibatchNoisySgd(self.n, self.dim, self.batch_size, self.steps, self.eta, self.noise_std,
                                 self.sampling, self.output, self.loss_terms, self.region, smoothing=None)

    @property
    def schedule_steps(self) -> int:
        """A scheduled canary's gradient may be added to the batch sum at any of the ``steps`` steps."""
        return self.steps

    @property
    def sample_rate(self) -> float:
        """``q = m / n``."""
        return self.batch_size / self.n

    @property
    def output_dim(self) -> int:
        return self.dim * (self.steps if self.output == "iterates" else 1)

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

    def undo_direction(self, update: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`direction` on an array whose last axis is the model (identity for DP-SGD)."""
        return update

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

    def shuffled_batches(self, trials: int, rng: np.random.Generator) -> torch.Tensor:
        """The batch (``0 .. n/m - 1``) of every record in each trial's epoch, shape ``(trials, n)``.

        A uniform permutation per trial (the ranks of i.i.d. uniform keys);
        positions ``k m .. (k + 1) m - 1`` form batch ``k``.
        """
        order = torch.argsort(noise.uniform((trials, self.n), rng), dim=1)
        positions = torch.arange(self.n).div(self.batch_size, rounding_mode="floor").expand(trials, -1)
        return torch.empty((trials, self.n), dtype=torch.long).scatter_(1, order, positions)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator,
                dtype: torch.dtype) -> torch.Tensor:
        """Every sampling, every output: the last iterate ``(trials, d)`` or all of them ``(trials, T d)``."""
        loss = self.loss_function
        domain = self.domain_set
        records = loss.prepare(torch.as_tensor(data.records, dtype=dtype))
        injected = {k: clip_rows(v, loss.lipschitz) for k, v in injected_rows(data, self.dim, dtype).items()}
        constant = loss.name in ("linear", "concave")  # the records' gradients do not depend on theta
        concave = loss.name == "concave"  # its public regulariser -(beta/2)|theta|^2 acts once per step
        table = None
        if constant:
            table = loss.gradient(torch.zeros(self.dim, dtype=dtype), records).clone()
            for position, vector in injected.items():
                table[position] = vector
        # a scheduled canary: its gradient / m joins the step's noisy mean gradient, whatever the batch
        scheduled = {step - 1: clip_rows(torch.as_tensor(vector, dtype=dtype), loss.lipschitz) / self.batch_size
                     for step, vector in data.scheduled.items()}
        theta = self.start(trials, dtype)
        iterates = self.output == "iterates"
        released = torch.empty((trials, self.output_dim), dtype=dtype) if iterates else None
        source = noise.StepNoise("gaussian", (trials, self.dim), rng, dtype)
        shuffled, per_epoch = self.sampling in SHUFFLED, self.batches_per_epoch
        # Constant gradients, subsampled batches: zero-gradient records add nothing to the sum, so
        # only the membership of the others is drawn (exactly; see ``membership``).
        active = torch.nonzero(torch.linalg.vector_norm(table, dim=1) > 0).flatten() if constant else None
        sparse = constant and not shuffled and active.numel() < self.n and (
            self.sampling == "poisson" or active.numel() <= _SELECTION_SAMPLING_MAX)
        scaled = table[active] / self.batch_size if sparse else None
        batch_of = sums = None
        for step in range(self.steps):
            slot = step % per_epoch
            if shuffled and (batch_of is None or (slot == 0 and self.sampling == Sampling.SHUFFLE)):
                batch_of = self.shuffled_batches(trials, rng)
                if constant:  # the sum of every batch of the epoch at once
                    sums = torch.zeros((trials, per_epoch, self.dim), dtype=dtype).scatter_add_(
                        1, batch_of.unsqueeze(-1).expand(-1, -1, self.dim), table.expand(trials, -1, -1))
            if sparse:  # sigma z + membership @ (rows / m) in one product, in place on this step's noise
                membership = self.membership(trials, active.numel(), rng, dtype)  # drawn before the noise
                gradient = source.next().addmm_(membership, scaled, beta=self.noise_std)
            else:
                if constant and shuffled:
                    gradient = sums[:, slot].clone()
                else:
                    mask = (batch_of == slot).to(dtype) if shuffled else self.batch_mask(trials, rng, dtype)
                    if constant:
                        gradient = mask @ table
                    elif loss.function is not None:  # a loss of the user's own: one call per record, clipped
                        per_record = user_gradients(loss.function, theta, records, loss.lipschitz)
                        for position, vector in injected.items():
                            per_record[:, position] = vector
                        gradient = torch.einsum("tn,tnd->td", mask, per_record)
                    else:
                        per_record = loss.gradient(theta.unsqueeze(1), records.unsqueeze(0))
                        for position, vector in injected.items():
                            per_record[:, position] = vector
                        gradient = torch.einsum("tn,tnd->td", mask, per_record)
                gradient = gradient.div_(self.batch_size).add_(source.next(), alpha=self.noise_std)
            if scheduled and step in scheduled:
                gradient.add_(scheduled[step])
            if concave:
                gradient.sub_(theta, alpha=loss.smoothness)
            theta = domain.project_(theta.sub_(self.direction(gradient), alpha=self.eta))
            if iterates:
                released[:, step * self.dim:(step + 1) * self.dim] = theta
        return released if iterates else theta

    def _update_is_the_packages(self) -> bool:
        """Whether this class samples and steps as dp-sgd does (the exact laws describe no other update).

        dp-lssgd answers for its own smoothing, so this module never imports its subclass.
        """
        return type(self)._sample is DPSGD._sample and type(self).direction is DPSGD.direction

    def exact_output_laws(self, data_a: Dataset, data_b: Dataset):
        """Exact laws of the last iterate on whole-space, linear-loss instances (``accounting.training_laws``;
        ``accounting.scheduled`` for a canary inserted at chosen steps).

        Only for the samplers this package wrote: a subclass that samples or
        smooths differently has no exact accountant.
        """
        if not self._update_is_the_packages():
            raise NotExact(f"{type(self).__name__} samples or smooths in its own way; the exact laws describe "
                           "dp-sgd and dp-lssgd")
        if is_scheduled(data_a, data_b):  # a canary inserted at chosen steps: Gaussian (docs/theory.md 10.2)
            return scheduled_laws(self, data_a, data_b)
        if self.output == "iterates":
            raise NotExact("every iterate is released: the last-iterate laws do not describe the release "
                           "(the white-box score law gives its ceiling)")
        return dpsgd_laws(self, data_a, data_b)
