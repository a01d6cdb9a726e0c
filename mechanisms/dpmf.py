"""DP matrix-factorisation training: correlated noise over the steps (DP-FTRL trees, Toeplitz and banded
strategies; docs/theory.md 12).

``n`` records are cut into the ``p = steps / epochs`` batches of an epoch
(``m = n epochs / steps`` records each; record ``r`` in batch ``(r - 1) // m``)
and each record is used once per epoch: in the same slot every epoch
(``selection="cyclic"``, as BandMF's multi-participation analysis assumes)
or in a fresh random order each epoch (``"shuffled"``). Per step::

    g_t = (sum_{i in B_t} clip_L(grad f(theta, x_i)) + sigma L (M z)_t) / m
    theta <- Pi_K(theta - eta g_t)

with ``z`` i.i.d. standard normal and ``M`` the strategy's noise factor
(``C^{-1}`` for a square lower-triangular strategy, the tree's node sums for
DP-FTRL; ``accounting.strategies``). The identity strategy is DP-SGD with
fixed batches. ``output="iterates"`` releases every ``theta`` (equivalently
every noisy gradient, on the whole space), ``"final"`` the last.

The default canary is a gradient canary in the batch slot whose
participation pattern attains the strategy's sensitivity
(``default_index``), paired with a zero gradient (zero-out, the relation the
libraries' claims are made for).

References
----------
Kairouz et al., "Practical and Private (Deep) Learning without Sampling or
Shuffling", ICML 2021.
Choquette-Choo, McMahan, Rush, Thakurta, "Multi-Epoch Matrix Factorization
Mechanisms for Private Machine Learning", ICML 2023.
Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS 2023.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms import noise, tiles
from dpaudit.mechanisms.accounting.descriptions import LossTerms, MatrixFactorizationTraining, Strategy
from dpaudit.mechanisms.base import param
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.iterative import IterateRelease, LossIteration, injected_rows
from dpaudit.mechanisms.losses import NONCONVEX_LOSSES, clip_rows
from dpaudit.mechanisms.registry import register
from dpaudit.mechanisms.strategy_sources import STRATEGIES, resolve_strategy
from dpaudit.mechanisms.user_loss import user_gradients

__all__ = ["DPMF", "SELECTIONS", "STRATEGIES"]

SELECTIONS = ("cyclic", "shuffled")
_MAX_STEPS = 4096  # the strategy's dense matrices (for the claims) are steps x steps


@register
@dataclasses.dataclass(frozen=True)
class DPMF(IterateRelease, LossIteration):
    """DP matrix-factorisation training (correlated noise); the last iterate or every one is released."""

    name = "dp-mf"
    summary = "DP matrix factorisation: correlated noise (tree, Toeplitz, banded), several participations"

    n: int = param(16, "number of records (n epochs / steps per batch)")
    domain: str = param("whole", "convex set K: 'ball', 'box' or 'whole' (no projection)")
    steps: int = param(16, "number of steps (rows of the strategy C)")
    epochs: int = param(1, "participations k of every record (steps must be a multiple)")
    strategy: str = param("identity", "'identity' (DP-SGD), 'tree' (DP-FTRL, restarted each epoch), 'toeplitz' "
                                      "(give coefficients), 'banded-sqrt' (give bands), FILE.npy (a dense C), or, "
                                      "with jax_privacy installed, 'bandmf' (give bands) or 'blt'")
    coefficients: tuple | None = param(None, "Toeplitz coefficients c_0, c_1, ... of C (strategy='toeplitz')")
    bands: int | None = param(None, "bands b of strategy='banded-sqrt' or 'bandmf'")
    noise_multiplier: float = param(1.0, "sigma: std of the noise on the clipped sum, over the clip L")
    eta: float = param(0.1, "step size")
    selection: str = param("cyclic", "'cyclic' (the same batch slot every epoch) or 'shuffled' (a fresh order "
                                     "each epoch)")
    loss: str = param("linear", "'linear', 'logistic', 'quadratic', 'huber', 'concave' or 'FILE.py:NAME'")
    lipschitz: float = param(1.0, "L: the clip norm of every per-record gradient")
    smoothness: float | None = param(None, "beta of the quadratic or concave loss (default 1)")
    output: str = param("final", "'final' (hidden state: the last iterate) or 'iterates' (every step's)")

    def validate(self) -> None:
        super().validate()
        check_int("steps", self.steps, minimum=1)
        if self.steps > _MAX_STEPS:
            raise ParameterError(f"steps must be at most {_MAX_STEPS} (the strategy's matrices are dense), "
                                 f"got steps={self.steps}")
        check_int("epochs", self.epochs, minimum=1)
        if self.steps % self.epochs:
            raise ParameterError(f"steps must be a multiple of epochs (each epoch has steps / epochs batches), got "
                                 f"steps={self.steps}, epochs={self.epochs}")
        if (self.n * self.epochs) % self.steps:
            raise ParameterError(f"n must fill the {self.epoch_steps} batches of an epoch equally (n * epochs / "
                                 f"steps records each), got n={self.n}, steps={self.steps}, epochs={self.epochs}")
        check_real("noise_multiplier", self.noise_multiplier, positive=True)
        check_real("eta", self.eta, positive=True)
        check_real("lipschitz", self.lipschitz, positive=True)
        if not math.isfinite(self.lipschitz):
            raise ParameterError(f"lipschitz is the clip norm and must be finite, got lipschitz={self.lipschitz}")
        check_choice("selection", self.selection, SELECTIONS)
        check_choice("output", self.output, ("final", "iterates"))
        self._check_strategy()
        self.loss_function

    def _check_strategy(self) -> None:
        kind = self.strategy
        if not isinstance(kind, str):
            raise ParameterError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))} or a path to a .npy "
                                 f"file, got strategy={kind!r}")
        if kind not in STRATEGIES and not kind.endswith(".npy"):
            check_choice("strategy", kind, STRATEGIES)  # names the valid ones
        if kind == "toeplitz":
            values = self.coefficients
            if values is None or isinstance(values, (str, bytes)) or not len(values):
                raise ParameterError(f"strategy='toeplitz' needs coefficients (c_0, c_1, ...), got "
                                     f"coefficients={values!r}")
            try:
                numbers = tuple(float(v) for v in values)
            except (TypeError, ValueError):
                raise ParameterError(f"coefficients must be numbers, got coefficients={values!r}") from None
            if not all(math.isfinite(v) for v in numbers) or numbers[0] == 0:
                raise ParameterError(f"coefficients must be finite with c_0 != 0 (C must be invertible), got "
                                     f"coefficients={list(values)!r}")
            object.__setattr__(self, "coefficients", numbers)
        elif self.coefficients is not None:
            raise ParameterError(f"coefficients apply to strategy='toeplitz', got strategy={kind!r}")
        if kind in ("banded-sqrt", "bandmf"):
            if self.bands is None:
                raise ParameterError(f"strategy={kind!r} needs bands (1 .. steps), got bands=None")
            check_int("bands", self.bands, minimum=1)
            if self.bands > self.steps:
                raise ParameterError(f"bands must be at most steps={self.steps}, got bands={self.bands}")
        elif self.bands is not None:
            raise ParameterError(f"bands apply to strategy='banded-sqrt' or 'bandmf', got strategy={kind!r}")
        self.strategy_value  # a dense C from a file is read and checked here

    # -- the schedule ------------------------------------------------------------
    @property
    def epoch_steps(self) -> int:
        """``p = steps / epochs``: the batches of one epoch."""
        return self.steps // self.epochs

    @property
    def batch_size(self) -> int:
        """``m = n epochs / steps``: records per batch."""
        return self.n * self.epochs // self.steps

    @property
    def strategy_value(self) -> Strategy:
        """The strategy as the accountants see it."""
        cached = self.__dict__.get("_strategy_value")
        if cached is None:
            cached = resolve_strategy(self.strategy, self.steps, self.epoch_steps, self.epochs, self.coefficients,
                                      self.bands)
            # kept, and pickled to workers: an optimisation runs once, a file is read once per audit
            object.__setattr__(self, "_strategy_value", cached)
        return cached

    @property
    def fingerprint_data(self) -> bytes:
        """A strategy read from a file: its digest (a changed file changes the audit id)."""
        return self.strategy_value.digest.encode()

    @property
    def privacy_description(self) -> MatrixFactorizationTraining:
        loss = self.loss_function
        terms = LossTerms(loss.name, str(self.loss), float(self.lipschitz), loss.smoothness, loss.strong_convexity,
                          convex=loss.name not in NONCONVEX_LOSSES)
        return MatrixFactorizationTraining(self.strategy_value, self.epochs, self.batch_size,
                                           float(self.noise_multiplier), self.selection, self.output, self.dim,
                                           terms, self.region)

    @property
    def default_index(self) -> int:
        """The last record of the batch slot whose pattern attains the sensitivity (cyclic order)."""
        # the accountants (and SciPy under them) load with the first canary, not with the mechanism
        from dpaudit.mechanisms.accounting.builders.matrix import release_mu

        _, value = release_mu(self.privacy_description)
        return (value.pattern[0] % self.epoch_steps + 1) * self.batch_size

    @property
    def default_pair(self) -> str:
        """Zero-out: the canary's gradient against a zero gradient (the relation the libraries claim)."""
        return "zero"

    def pair_relation(self, pair: str) -> Relation | None:
        if pair == "zero":  # a zero gradient keeps the batch sizes and the order
            return Relation.ZERO_OUT
        return None

    @property
    def zero_record_is_absent(self) -> bool:
        return False

    @property
    def output_dim(self) -> int:
        return self.dim * self.released_steps

    @property
    def record_dim(self) -> int:
        return self.loss_function.record_dim

    @property
    def schedule_steps(self) -> None:
        return None

    @property
    def iterations(self) -> int:
        return self.steps

    def slot_steps(self, slot: int) -> np.ndarray:
        """The 0-based steps at which batch slot ``slot`` is used in cyclic order."""
        return slot + self.epoch_steps * np.arange(self.epochs)

    # -- sampling -----------------------------------------------------------------
    def _gradients(self, theta: torch.Tensor, records: torch.Tensor, injected: dict, members) -> torch.Tensor:
        """Clipped gradients of the records ``members`` (indices, or a ``(trials, n)`` 0/1 mask) summed."""
        loss = self.loss_function
        if loss.function is not None:
            per_record = user_gradients(loss.function, theta, records, float(self.lipschitz))
        else:
            per_record = clip_rows(loss.gradient(theta.unsqueeze(1), records.unsqueeze(0)), float(self.lipschitz))
        for position, vector in injected.items():
            per_record[:, position] = vector
        if isinstance(members, torch.Tensor):
            return torch.einsum("tn,tnd->td", members, per_record)
        return per_record[:, members].sum(1)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        # SciPy's linear algebra (the strategy's blocks) loads with the first sample, not with the mechanism
        from dpaudit.mechanisms.correlated import CorrelatedNoise

        loss = self.loss_function
        L, m, p = float(self.lipschitz), self.batch_size, self.epoch_steps
        records = loss.prepare(torch.as_tensor(data.records, dtype=dtype))
        injected = {k: clip_rows(v, L) for k, v in injected_rows(data, self.dim, dtype).items()}
        constant = loss.name == "linear"
        table = None
        if constant:
            table = clip_rows(loss.gradient(torch.zeros(self.dim, dtype=dtype), records).clone(), L)
            for position, vector in injected.items():
                table[position] = vector
        source = CorrelatedNoise(self.strategy_value, trials, self.dim, rng, dtype)
        scale = self.noise_multiplier * L
        theta = self.start(trials, dtype)
        if constant and self.domain == "whole" and self.output == "final":
            # the last iterate of a linear loss reads the summed noise only; the order of the batches
            # changes nothing (every record is used epochs times)
            total = table.sum(0) * self.epochs
            return theta.sub_(source.total().mul_(scale).add_(total).div_(m), alpha=self.eta)
        shuffled = self.selection == "shuffled"
        if constant and self.domain == "whole" and not shuffled:
            # every iterate of a linear loss in cyclic order: a block of steps at once, the iterates a running sum
            return self._linear_iterates(table, source, theta, scale)
        domain = self.domain_set
        iterates = self.output == "iterates"
        released = torch.empty((trials, self.output_dim), dtype=dtype) if iterates else None
        slot_of = sums = None
        if constant and not shuffled:
            sums = table.reshape(p, m, self.dim).sum(1)  # each slot's constant batch sum
        concave = loss.name == "concave"
        for step in range(self.steps):
            slot = step % p
            if shuffled and slot == 0:
                slot_of = self._shuffled_slots(trials, rng)
                if constant:
                    sums = torch.zeros((trials, p, self.dim), dtype=dtype).scatter_add_(
                        1, slot_of.unsqueeze(-1).expand(-1, -1, self.dim), table.expand(trials, -1, -1))
            if constant:
                gradient = (sums[:, slot] if shuffled else sums[slot].expand(trials, -1)).clone()
            else:
                members = (slot_of == slot).to(dtype) if shuffled else list(range(slot * m, (slot + 1) * m))
                gradient = self._gradients(theta, records, injected, members)
            gradient.add_(source.next(), alpha=scale).div_(m)
            if concave:
                gradient.sub_(theta, alpha=loss.smoothness)
            theta = domain.project_(theta.sub_(gradient, alpha=self.eta))
            if iterates:
                released[:, step * self.dim:(step + 1) * self.dim] = theta
        return released if iterates else theta

    def _linear_iterates(self, table: torch.Tensor, source, theta: torch.Tensor, scale: float) -> torch.Tensor:
        """Every iterate of a linear loss on the whole space in cyclic order, one block of steps at a time:
        ``theta_t = theta_{t-1} - (eta / m)(S_t + sigma L (M z)_t)``, a running sum over the block."""
        trials, dim, m = theta.shape[0], self.dim, self.batch_size
        slot_sums = table.reshape(self.epoch_steps, m, dim).sum(1)
        sums = slot_sums.repeat(self.epochs, 1)  # (steps, dim): the constant batch sum of every step
        released = torch.empty((trials, self.steps, dim), dtype=theta.dtype)
        current, step, factor = theta, 0, -self.eta / m
        while step < self.steps:
            noise = source.next_block().transpose(1, 2)  # (trials, block, dim)
            block = noise.shape[1]
            moves = noise.mul(scale).add_(sums[step:step + block]).mul_(factor)
            path = torch.cumsum(moves, dim=1).add_(current.unsqueeze(1))  # theta at each step of the block
            released[:, step:step + block] = path
            current = path[:, -1]
            step += block
        return released.reshape(trials, self.output_dim) if self.output == "iterates" else current.clone()

    def _shuffled_slots(self, trials: int, rng: np.random.Generator) -> torch.Tensor:
        """The batch slot (``0 .. p - 1``) of every record in each trial's epoch, shape ``(trials, n)``."""
        order = torch.argsort(noise.uniform((trials, self.n), rng), dim=1)
        positions = torch.arange(self.n).div(self.batch_size, rounding_mode="floor").expand(trials, -1)
        return torch.empty((trials, self.n), dtype=torch.long).scatter_(1, order, positions)

    def working_bytes(self, trials: int) -> int:
        """Adds the per-record gradients of a batch and the noise blocks."""
        rows = min(trials, tiles.TILE_TRIALS) * max(tiles.threads(), 1)
        return super().working_bytes(trials) + rows * (self.n + 64) * (self.dim + 1) * 8 * 2

    # -- exact laws ---------------------------------------------------------------
    def exact_output_laws(self, data_a: Dataset, data_b: Dataset):
        """The release of a linear-loss training on the whole space in cyclic order is Gaussian: the laws of
        the likelihood-ratio statistic (``accounting.matrix_laws``)."""
        # the accountants (and SciPy under them) load with the first exact law, not with the mechanism
        from dpaudit.mechanisms.accounting.matrix_laws import gaussian_release_laws

        if type(self)._sample is not DPMF._sample:
            raise NotExact(f"{type(self).__name__} samples in its own way; the exact laws describe dp-mf")
        if self.loss != "linear" or self.domain != "whole":
            raise NotExact("the release is Gaussian for a linear loss on the whole space only")
        if self.selection != "cyclic" and self.output == "iterates":
            raise NotExact("reshuffled batches make every iterate a mixture over the canary's slots")
        return gaussian_release_laws(self, self.step_sums(data_a), self.step_sums(data_b),
                                     start=self.start(1, torch.float64)[0].numpy())

    def step_sums(self, data: Dataset) -> np.ndarray:
        """Every step's clipped gradient sum of a linear loss in cyclic order, shape ``(steps, dim)``."""
        table = self.gradient_table(data)
        table = table * np.minimum(1.0, float(self.lipschitz) / np.maximum(np.linalg.norm(table, axis=1,
                                                                                          keepdims=True), 1e-300))
        slots = table.reshape(self.epoch_steps, self.batch_size, self.dim).sum(1)
        return np.tile(slots, (self.epochs, 1))

    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a: Dataset, dataset_b: Dataset) -> np.ndarray:
        """Exact ``log p_S'(out) / p_S(out)`` of a Gaussian release (``exact_output_laws``)."""
        # the accountants (and SciPy under them) load with the first exact score, not with the mechanism
        from dpaudit.mechanisms.accounting.instances import log_likelihood_ratio

        return log_likelihood_ratio(self, outputs, dataset_a, dataset_b)

    @property
    def exact_score_reads_whole_output(self) -> bool:
        """A linear-loss release on the whole space in cyclic order (or its last iterate) is Gaussian: the exact
        score is its Neyman-Pearson test."""
        return self.loss == "linear" and self.domain == "whole" and (self.selection == "cyclic"
                                                                     or self.output == "final")

    def reference_scores(self, dataset_a: Dataset, dataset_b: Dataset, size: int, seed: int = 0):
        """``size`` exact scores per dataset drawn from the Gaussian laws of the statistic (thresholds are chosen
        on them, never on certification trials)."""
        # the accountants (and SciPy under them) load with the first reference scores, not with the mechanism
        from dpaudit.mechanisms.accounting.instances import exact_laws

        laws = exact_laws(self, dataset_a, dataset_b)
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6D66]))
        return tuple(laws.log_ratio(rng.normal(mean, laws.std, int(size)))
                     for mean in (laws.means_a[0], laws.means_b[0]))

    def score_law(self, dataset_a: Dataset, dataset_b: Dataset):
        """The exact law of the likelihood-ratio score (for the ceiling)."""
        # the accountants (and SciPy under them) load with the first ceiling, not with the mechanism
        from dpaudit.mechanisms.accounting.instances import exact_laws, likelihood_ratio_law

        return likelihood_ratio_law(exact_laws(self, dataset_a, dataset_b))
