"""Opacus as it is used: a short ``make_private`` training run per trial, audited against its accountant.

Each trial trains a one-parameter linear model with Opacus exactly as a
user would: a ``DataLoader`` over the records (``shuffle=True``, fixed batch
size), ``PrivacyEngine.make_private`` with ``poisson_sampling`` on or off,
an SGD step per batch. The loss of a record ``x`` is ``w * x``, so its
gradient is ``x`` whatever ``w`` is: clipped to ``max_grad_norm`` it is the
record's whole contribution to each step, and a record of zero acts as
absent. The release is the parameter after every step (``output =
"iterates"``, what the accountant bounds) or after the last (``"final"``).

Claims: ``opacus-accountant``, the epsilon Opacus's own accountant reports
for the run (read from ``PrivacyEngine.get_epsilon`` after training), listed
as it is reported, for shuffled batches too, where it assumes Poisson
sampling that the run does not use (that is what the audit tests); and for
shuffled batches a valid upper bound: each record is in exactly one batch
per epoch, so the run is the Gaussian mechanism composed over the epochs
(sensitivity ``max_grad_norm`` between the canary and a zero record, noise
``noise_multiplier * max_grad_norm``), epsilon from its exact profile.

The default pair puts the canary (a record ``max_grad_norm``) in ``S`` and
a zero record in ``S'``, the other records zero: the batch sizes are the
same under both, and the canary's step is the only signal. Records lie in
``[0, max_grad_norm]``: the accountant bounds adding or removing a record,
which covers replacing a record by a zero record (it adds nothing to any
step); pairs that change a record between two non-zero values are not
claimed to be covered.

References
----------
Yousefpour et al., "Opacus: User-Friendly Differential Privacy Library in
PyTorch", arXiv:2109.12298, 2021.
Chua et al., "How Private are DP-SGD Implementations?", ICML 2024
(shuffled batches audited against the Poisson accountant).
Balle & Wang, ICML 2018, Thm 8 (the Gaussian mechanism's exact profile).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import math
import warnings
from typing import Any

import numpy as np

from dpaudit.mechanisms.adapters.base import LibraryMechanism, require
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int, check_real

__all__ = ["OpacusRun", "from_opacus"]

#: Deltas at which the accountant is asked for the claim's privacy profile (each call takes about a second).
_DELTA_GRID = (1e-8, 1e-5, 1e-3, 0.1)  # 1e-5, the usual audit delta, is asked anyway


def _train(run: "OpacusRun", records: np.ndarray, seed: int) -> tuple[np.ndarray, Any]:
    """One ``make_private`` training run on ``records`` from ``seed``: (parameter after each step, engine)."""
    import torch
    from opacus import PrivacyEngine

    previous = logging.root.manager.disable  # Opacus logs a warning for every empty Poisson batch
    logging.disable(logging.WARNING)
    try:
        with torch.random.fork_rng(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Opacus warns about secure mode and the accountant on every run
            torch.manual_seed(seed)
            model = torch.nn.Linear(1, 1, bias=False).double()
            torch.nn.init.zeros_(model.weight)
            optimizer = torch.optim.SGD(model.parameters(), lr=run.lr)
            data = torch.utils.data.TensorDataset(torch.as_tensor(records, dtype=torch.float64).reshape(-1, 1))
            loader = torch.utils.data.DataLoader(data, batch_size=run.batch_size, shuffle=True,
                                                 generator=torch.Generator().manual_seed(seed))
            engine = PrivacyEngine(accountant=run.accountant)
            model, optimizer, loader = engine.make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=run.noise_multiplier,
                max_grad_norm=run.max_grad_norm, poisson_sampling=run.poisson_sampling,
                noise_generator=torch.Generator().manual_seed(seed + 1))
            weight = next(model.parameters())
            steps = []
            for _ in range(run.epochs):
                for (batch,) in loader:
                    optimizer.zero_grad()
                    model(batch).sum().backward()
                    optimizer.step()
                    steps.append(float(weight.detach().reshape(-1)[0]))
    finally:
        logging.disable(previous)
    return np.asarray(steps), engine


def _rows(run: "OpacusRun", records: np.ndarray, seeds: list[int]) -> np.ndarray:
    """The releases of one run per seed, shape ``(len(seeds), output_dim)``."""
    rows = np.empty((len(seeds), run.output_dim))
    for trial, seed in enumerate(seeds):  # one Opacus run per trial, each from its own seed
        steps, _ = _train(run, records, seed)
        if steps.size != run.steps_per_epoch * run.epochs:
            raise ParameterError(f"Opacus ran {steps.size} steps, expected {run.steps_per_epoch * run.epochs}")
        rows[trial] = steps if run.output == "iterates" else steps[-1:]
    return rows


@dataclasses.dataclass(frozen=True)
class OpacusRun(LibraryMechanism):
    """Trials of an Opacus ``make_private`` run of a one-parameter model (one run per trial)."""

    n: int = 20
    batch_size: int = 5
    epochs: int = 1
    noise_multiplier: float = 1.0
    max_grad_norm: float = 1.0
    poisson_sampling: bool = False
    accountant: str = "prv"
    lr: float = 1.0
    output: str = "iterates"

    name = "opacus"
    summary = "an Opacus make_private training run, claim from its accountant"
    library = "opacus"
    tile_trials = 256

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.poisson_sampling, bool):
            raise ParameterError(f"poisson_sampling must be True or False, got "
                                 f"poisson_sampling={self.poisson_sampling!r}")
        check_int("n", self.n, minimum=2)
        check_int("batch_size", self.batch_size, minimum=1, maximum=self.n)
        check_int("epochs", self.epochs, minimum=1)
        check_real("noise_multiplier", self.noise_multiplier, positive=True)
        check_real("max_grad_norm", self.max_grad_norm, positive=True)
        check_real("lr", self.lr, positive=True)
        check_choice("accountant", self.accountant, ("prv", "rdp", "gdp"))
        check_choice("output", self.output, ("iterates", "final"))
        if not self.poisson_sampling and self.n % self.batch_size:
            raise ParameterError(f"shuffled batches here need n divisible by batch_size (equal batches), got "
                                 f"n={self.n}, batch_size={self.batch_size}")

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.n // self.batch_size)

    @property
    def output_dim(self) -> int:
        return self.steps_per_epoch * self.epochs if self.output == "iterates" else 1

    @property
    def n_records(self) -> int:
        return self.n

    @property
    def has_positions(self) -> bool:
        return False  # batches are drawn at random: a record has no position

    @property
    def params(self) -> dict[str, Any]:
        names = ("n", "batch_size", "epochs", "noise_multiplier", "max_grad_norm", "poisson_sampling",
                 "accountant", "lr", "output")
        return {"library": "opacus", "version": _version(), **{k: getattr(self, k) for k in names}}

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """``S``: the canary (a record ``max_grad_norm``) and ``n - 1`` zeros; ``S'``: ``n`` zeros."""
        first = np.zeros((self.n, 1))
        first[0, 0] = self.max_grad_norm
        return first, np.zeros((self.n, 1))

    def _query_covered(self) -> str | None:
        return None

    def check_dataset(self, data) -> None:
        if data.records.shape != (self.n, 1):
            raise ParameterError(f"datasets must hold n={self.n} records of one number, got shape "
                                 f"{data.records.shape}")
        low, high = self.domain
        if not np.all(np.isfinite(data.records)) or data.records.min() < low or data.records.max() > high:
            raise ParameterError(f"records must lie in [0, max_grad_norm] = [{low:g}, {high:g}] (the accountant's "
                                 f"claim covers replacing a record by a zero record), got values in "
                                 f"[{data.records.min():g}, {data.records.max():g}]")

    def _sample(self, data, trials, rng, dtype):
        import torch

        records = np.asarray(data.records, dtype=np.float64).reshape(-1)
        seeds = [int(s) for s in rng.integers(2**62, size=trials)]  # one seed per trial: any split reproduces
        if self.workers == 1 or trials < 2 * self.workers:
            return torch.from_numpy(_rows(self, records, seeds))
        parts = np.array_split(np.arange(trials), self.workers)
        with concurrent.futures.ProcessPoolExecutor(self.workers) as pool:
            blocks = pool.map(_rows, [self] * len(parts), [records] * len(parts),
                              [[seeds[i] for i in part] for part in parts])
            return torch.from_numpy(np.concatenate(list(blocks), axis=0))

    # -- the attack that reads every step ------------------------------------------
    def log_likelihood_ratio(self, outputs: np.ndarray, dataset_a, dataset_b) -> np.ndarray:
        """``log p_B - log p_A`` of the released iterates, for pairs that differ in one record on a zero background.

        Each step releases ``w_t = w_{t-1} - lr (sum of clipped gradients + noise) / batch_size``,
        so ``d_t = (w_{t-1} - w_t) batch_size / lr`` is the noisy gradient sum of step ``t``. With a
        zero background, only the differing record ``g`` (clipped) moves it: under shuffled batches
        it is in exactly one step per epoch, uniformly; under Poisson sampling in each step with
        probability ``batch_size / n``.
        """
        if self.output != "iterates":
            raise ParameterError("score 'exact' reads every step: it needs output='iterates'")
        a, b = (np.asarray(d.records, dtype=np.float64).reshape(-1) for d in (dataset_a, dataset_b))
        differ = np.flatnonzero(a != b)
        rest = np.delete(a, differ)
        if differ.size != 1 or np.any(rest != 0):
            raise ParameterError("score 'exact' needs datasets that differ in one record, the others zero")
        clip = lambda x: float(np.clip(x, -self.max_grad_norm, self.max_grad_norm))  # noqa: E731
        g_a, g_b = clip(a[differ[0]]), clip(b[differ[0]])
        x = np.asarray(outputs, dtype=np.float64)
        previous = np.concatenate([np.zeros((len(x), 1)), x[:, :-1]], axis=1)
        d = (previous - x) * self.batch_size / self.lr
        s2 = (self.noise_multiplier * self.max_grad_norm) ** 2
        return self._log_density(d, g_b, s2) - self._log_density(d, g_a, s2)

    def _log_density(self, d: np.ndarray, g: float, s2: float) -> np.ndarray:
        """Log density of the step sums relative to no record (``g = 0``)."""
        z = (g * d - g * g / 2) / s2
        if self.poisson_sampling:
            q = self.batch_size / self.n
            return np.logaddexp(np.log1p(-q), np.log(q) + z).sum(axis=1)
        k = self.steps_per_epoch
        epochs = z.reshape(len(z), self.epochs, k)
        top = epochs.max(axis=2, keepdims=True)
        return (top[..., 0] + np.log(np.exp(epochs - top).mean(axis=2))).sum(axis=1)

    # -- claims ------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        """Worker processes get the parameters, not the cached accountant."""
        return {key: value for key, value in self.__dict__.items() if key != "_reported"}

    @functools.cached_property
    def _reported(self) -> tuple[Any, dict[float, float]]:
        """The accountant of one run (its history is the same for every run) and a cache of its epsilons."""
        _, engine = _train(self, np.zeros(self.n), 0)
        return engine, {}

    def reported_epsilon(self, delta: float) -> float:
        """What ``PrivacyEngine.get_epsilon(delta)`` reports for this run (``inf`` where it refuses)."""
        engine, cache = self._reported
        if delta not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    cache[delta] = float(engine.get_epsilon(delta)) if delta > 0 else math.inf
                except ValueError:  # the PRV accountant refuses deltas below its numerical reach
                    cache[delta] = math.inf  # nothing is claimed there
        return cache[delta]

    def reported_delta(self, epsilon: float) -> float:
        """A delta at which the accountant reports at most ``epsilon``: the smallest of a fixed grid (rounded up)."""
        for delta in _DELTA_GRID:  # increasing: the first that reaches epsilon is the smallest
            if self.reported_epsilon(delta) <= epsilon:
                return delta
        return 1.0

    def library_claims(self) -> list:
        from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, profile_claim
        from dpaudit.mechanisms.accounting.profiles import gaussian_log_delta

        engine, _ = self._reported
        sampling = "Poisson sampling" if self.poisson_sampling else "shuffled batches"
        citation = (f"Opacus {_version()} {self.accountant} accountant, as reported after the run "
                    f"(history {engine.accountant.history}; {sampling}; add/remove, which covers replacing a "
                    f"record by a zero record: a zero gradient adds nothing)")
        claims = [Claim("opacus-accountant", citation, "replace-one", epsilon_fn=self.reported_epsilon,
                        delta_fn=self.reported_delta)]
        name, cite = "one-participation-per-epoch", ("Gaussian mechanism composed over epochs (each record in "
                                                     "one batch per epoch); Balle & Wang 2018 Thm 8")
        if self.poisson_sampling:
            claims.append(not_applicable(name, cite, "replace-one",
                                         "Poisson sampling: a record can be in many batches of an epoch"))
        else:
            mu = math.sqrt(self.epochs) / self.noise_multiplier
            claims.append(profile_claim(name, cite, "replace-one", lambda e: gaussian_log_delta(e, mu)))
        return claims


def _version() -> str:
    from dpaudit.mechanisms.adapters.base import library_version

    return library_version("opacus")


def from_opacus(*, n: int = 20, batch_size: int = 5, epochs: int = 1, noise_multiplier: float = 1.0,
                max_grad_norm: float = 1.0, poisson_sampling: bool = False, accountant: str = "prv",
                lr: float = 1.0, output: str = "iterates", workers: int = 1) -> OpacusRun:
    """A ``make_private`` training run of Opacus as a dpaudit mechanism (parameters as Opacus names them).

    Audit it with ``dpaudit.audit(run, dataset_pair=run.neighbours(), score="exact")`` (the exact
    likelihood ratio of the released steps) or any other score.
    """
    require("opacus", "models")
    return OpacusRun(n=n, batch_size=batch_size, epochs=epochs, noise_multiplier=noise_multiplier,
                     max_grad_norm=max_grad_norm, poisson_sampling=poisson_sampling, accountant=accountant,
                     lr=lr, output=output, workers=workers, sensitivity=max_grad_norm,
                     record_domain=(0.0, max_grad_norm),
                     label="make_private")
