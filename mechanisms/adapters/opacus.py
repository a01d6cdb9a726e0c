"""Opacus as its users call it: their model, loss, records, loader and sampler, ``make_private`` per trial.

Each trial trains the user's model with Opacus 1.x exactly as a training
script does: a ``DataLoader`` over the records (the user's batch size,
``shuffle`` or ``sampler``), ``PrivacyEngine(accountant=...)``,
``make_private`` (or ``make_private_with_epsilon``) with
``poisson_sampling`` on or off, and an SGD step per batch of
``criterion(model(inputs), targets)``. The release is every parameter of
the model after the last step (``output="final"``), or after every step
(``"iterates"``, what the accountant bounds). Each trial seeds torch's global
generator (which draws Poisson batches, shuffles and initialises a model
factory's weights) and Opacus's ``noise_generator`` from its own seed, so a
trial is the same whichever worker runs it.

The claim is what the engine reports (``PrivacyEngine.get_epsilon``), in the
relation its accountants assume: adding or removing one record, with
Poisson sampling. The engine is asked on the audited records, on them with
their last record removed and on them with a zero record added; the claim
is the largest (a neighbour's engine may be told another sampling rate).

What the audit tests is the code as it runs, so the accountant's
assumptions are checked beside it (:meth:`OpacusTraining.assumptions`): that
batches are Poisson-sampled at the rate the accountant is told, and that the
noise's scale does not depend on the data. Opacus divides the noisy gradient
sum by ``expected_batch_size = int(len(dataset) / len(data_loader))``, which
moves with the number of records; removing one record then rescales the
noise of every released parameter (opacus issues 571 and 819), a change of
spread the ``scale`` score reads.

References
----------
Yousefpour et al., "Opacus: User-Friendly Differential Privacy Library in
PyTorch", arXiv:2109.12298, 2021 (``privacy_engine.py``: ``sample_rate =
1 / len(data_loader)``, ``expected_batch_size = int(len(dataset) *
sample_rate)``; ``optimizer.py``: the sum divided by ``expected_batch_size``).
Chua et al., "How Private are DP-SGD Implementations?", ICML 2024 (fixed-size
batches audited against the Poisson accountant).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms.accounting.descriptions import LibraryGuarantees, ProfileGuarantee
from dpaudit.mechanisms.adapters.base import check_version, library_version, require
from dpaudit.mechanisms.adapters.opacus_run import (
    build_model,
    engine_epsilon,
    mean_output,
    torch_dataset,
    train_once,
    training_rows,
)
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["OpacusTraining", "SUPPORTED_VERSIONS", "expected_batch_size", "from_opacus", "mean_output"]

#: The Opacus releases this adapter trains with: the floor is the lowest tested (pyproject.toml,
#: docs/versions.md; 1.6.0 the newest). Up to 1.5.1 an empty Poisson batch fails in the clipping of a
#: float64 model.
SUPPORTED_VERSIONS = ">=1.5.2"

#: Deltas at which the engine is asked for the claim's privacy profile (delta(epsilon) is read off them).
_DELTA_GRID = (1e-10, 1e-8, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1)
ACCOUNTANTS = ("prv", "rdp", "gdp")


def expected_batch_size(records: int, batch_size: int, *, drop_last: bool = False) -> tuple[float, int]:
    """``(sample_rate, expected_batch_size)`` as Opacus 1.x's ``make_private`` computes them for a loader of
    ``records`` records in batches of ``batch_size``: ``1 / len(loader)`` and ``int(records * sample_rate)``."""
    batches = records // batch_size if drop_last else -(-records // batch_size)
    rate = 1 / max(batches, 1)
    return rate, int(records * rate)


@dataclasses.dataclass(frozen=True, eq=False)  # records are arrays: identity, not value, equality
class OpacusTraining(Mechanism):
    """Trials of the user's Opacus training (one training per trial), claim from its own accountant.

    Built by :func:`from_opacus`; the fields are its arguments.
    """

    model: Any = None
    records: Any = None
    input_columns: int | None = None
    criterion: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor] | None = None
    lr: float = 1.0
    batch_size: int = 1
    shuffle: bool = True
    sampler: Callable[[Any], Any] | None = None
    poisson_sampling: bool = True
    epochs: int = 1
    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    target_delta: float = 1e-5
    max_grad_norm: float = 1.0
    accountant: str = "prv"
    output: str = "final"
    workers: int = 1

    name = "opacus"
    summary = "the user's model trained by Opacus make_private, one training per trial; claim from its accountant"
    library = "opacus"
    tiled = False  # library code: one training after another, no threads
    canary_kinds = ()  # audits take a dataset pair (neighbours(), or the user's)
    release_grid = None  # released as Opacus computes them: low bits included

    def validate(self) -> None:
        if not (isinstance(self.model, torch.nn.Module) or callable(self.model)):
            raise ParameterError(f"model must be a torch.nn.Module or a function returning one, got "
                                 f"model={self.model!r}")
        records = self.default_dataset().records
        if records.shape[0] < 2:
            raise ParameterError(f"records must hold at least 2 records, got {records.shape[0]}")
        if self.input_columns is not None:
            check_int("input_columns", self.input_columns, minimum=1, maximum=records.shape[1])
        if self.criterion is not None and not callable(self.criterion):
            raise ParameterError(f"criterion must be callable(outputs, targets), got criterion={self.criterion!r}")
        if self.sampler is not None and not callable(self.sampler):
            raise ParameterError(f"sampler must be callable(dataset) -> a torch Sampler, got sampler={self.sampler!r}")
        check_real("lr", self.lr, positive=True)
        check_int("batch_size", self.batch_size, minimum=1)
        for flag in ("shuffle", "poisson_sampling"):
            if not isinstance(getattr(self, flag), bool):
                raise ParameterError(f"{flag} must be True or False, got {flag}={getattr(self, flag)!r}")
        check_int("epochs", self.epochs, minimum=1)
        if (self.noise_multiplier is None) == (self.target_epsilon is None):
            raise ParameterError(f"give noise_multiplier (make_private) or target_epsilon (make_private_with_epsilon),"
                                 f" not both or neither, got noise_multiplier={self.noise_multiplier!r}, "
                                 f"target_epsilon={self.target_epsilon!r}")
        if self.noise_multiplier is not None:
            check_real("noise_multiplier", self.noise_multiplier, positive=True)
        else:
            check_real("target_epsilon", self.target_epsilon, positive=True)
        check_real("target_delta", self.target_delta, minimum=0.0, maximum=1.0)
        check_real("max_grad_norm", self.max_grad_norm, positive=True)
        check_choice("accountant", self.accountant, ACCOUNTANTS)
        check_choice("output", self.output, ("final", "iterates"))
        check_int("workers", self.workers, minimum=1)

    # -- shape ---------------------------------------------------------------------
    @functools.cached_property
    def _template(self) -> torch.nn.Module:
        return build_model(self.model, 0)

    @property
    def parameter_count(self) -> int:
        """Every trainable parameter of the model (the length of one released iterate)."""
        return int(sum(p.numel() for p in self._template.parameters() if p.requires_grad))

    @property
    def steps(self) -> int:
        """Steps of one training on the audited records (``epochs`` times the loader's length)."""
        return self.steps_for(len(self.default_dataset().records))

    def steps_for(self, records: int) -> int:
        """Steps of one training on ``records`` records: the loader Opacus runs has ``int(1 / q)`` batches an epoch
        with Poisson sampling, else the user's loader's length (a sampler's length over the batch size)."""
        if self.poisson_sampling:
            rate, _ = expected_batch_size(records, self.batch_size)
            return self.epochs * int(1 / rate)
        if self.sampler is not None:
            dataset = torch_dataset(np.zeros((records, self.default_dataset().records.shape[1])), self.input_columns)
            draws = len(self.sampler(dataset))
            return self.epochs * -(-draws // self.batch_size)
        return self.epochs * -(-records // self.batch_size)

    @property
    def output_dim(self) -> int:
        return self.parameter_count * (self.steps if self.output == "iterates" else 1)

    @property
    def record_dim(self) -> int:
        return int(self.default_dataset().records.shape[1])

    @property
    def n_records(self) -> None:
        return None  # add/remove: neighbours differ in their number of records

    @property
    def has_positions(self) -> bool:
        return False

    @property
    def label(self) -> str:
        maker = "make_private_with_epsilon" if self.target_epsilon is not None else "make_private"
        return f"opacus {maker}({_model_label(self.model)})"

    @property
    def user_function(self) -> Any:
        """The model factory (or the model's class) is fingerprinted with the audit."""
        return self.model if callable(self.model) and not isinstance(self.model, torch.nn.Module) else \
            type(self.model)

    @property
    def released_steps(self) -> int:
        return self.steps if self.output == "iterates" else 1

    @property
    def releases_iterates(self) -> bool:
        return self.output == "iterates"

    @property
    def params(self) -> dict[str, Any]:
        weights = _weights_digest(self.model) if isinstance(self.model, torch.nn.Module) else None
        return {"library": "opacus", "version": library_version("opacus"), "model": _model_label(self.model),
                "initial_weights": weights,
                "parameters": self.parameter_count, "records": int(len(self.default_dataset().records)),
                "input_columns": self.input_columns, "criterion": _callable_label(self.criterion),
                "lr": self.lr, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "sampler": _callable_label(self.sampler), "poisson_sampling": self.poisson_sampling,
                "epochs": self.epochs, "noise_multiplier": self.noise_multiplier,
                "target_epsilon": self.target_epsilon, "target_delta": self.target_delta,
                "max_grad_norm": self.max_grad_norm, "accountant": self.accountant, "output": self.output}

    def default_dataset(self) -> Dataset:
        """The user's records."""
        return Dataset(_as_records(self.records))

    def neighbours(self) -> tuple[np.ndarray, np.ndarray]:
        """``(S, S')``: the records, and the records without their last one (add/remove, what the accountant
        bounds)."""
        records = self.default_dataset().records
        return records, records[:-1]

    def check_dataset(self, data: Dataset) -> None:
        records = data.records
        width = self.record_dim
        if records.ndim != 2 or records.shape[1] != width or records.shape[0] < 1:
            raise ParameterError(f"datasets must hold records of {width} columns, got shape {records.shape}")
        if not np.all(np.isfinite(records)):
            raise ParameterError("dataset records must be finite, got NaN or inf")
        if self.output == "iterates" and self.steps_for(records.shape[0]) != self.steps:
            raise ParameterError(f"output='iterates' releases one iterate per step: {records.shape[0]} records run "
                                 f"{self.steps_for(records.shape[0])} steps, the audited records {self.steps}; "
                                 f"use output='final', or datasets whose loaders have the same length")

    # -- sampling ------------------------------------------------------------------
    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        records = np.asarray(data.records, dtype=np.float64)
        seeds = [int(s) for s in rng.integers(2**62, size=trials)]  # one seed per trial: any split reproduces
        if self.workers == 1 or trials < 2 * self.workers:
            return torch.from_numpy(training_rows(self, records, seeds))
        parts = np.array_split(np.arange(trials), self.workers)
        with concurrent.futures.ProcessPoolExecutor(self.workers) as pool:
            blocks = pool.map(training_rows, [self] * len(parts), [records] * len(parts),
                              [[seeds[i] for i in part] for part in parts])
            return torch.from_numpy(np.concatenate(list(blocks), axis=0))

    def __getstate__(self) -> dict[str, Any]:
        """Worker processes get the parameters, not the cached template or reports."""
        return {key: value for key, value in self.__dict__.items() if key not in ("_template", "_reported")}

    # -- what the engine claims ------------------------------------------------------
    @functools.cached_property
    def _reported(self) -> tuple[list[Any], dict[float, float]]:
        """The engine of one training on each neighbour size (the records less one, as given, one more) and a
        cache of the largest epsilon they report."""
        records = self.default_dataset().records
        sizes = (records[:-1], records, np.vstack([records, np.zeros((1, records.shape[1]))]))
        return [train_once(self, data, seed=0)[1] for data in sizes], {}

    def reported_epsilon(self, delta: float) -> float:
        """The largest epsilon ``PrivacyEngine.get_epsilon(delta)`` reports for a training on the records or a
        neighbour of them (``inf`` where it refuses: nothing is claimed there)."""
        engines, cache = self._reported
        if delta not in cache:
            values = []
            for engine in engines:
                values.append(engine_epsilon(engine, delta) if delta > 0 else math.inf)
            cache[delta] = max(values)
        return cache[delta]

    def reported_delta(self, epsilon: float) -> float:
        """A delta at which the engines report at most ``epsilon``: the smallest of a fixed grid (rounded up)."""
        for delta in _DELTA_GRID:  # increasing: the first that reaches epsilon is the smallest
            if self.reported_epsilon(delta) <= epsilon:
                return delta
        return 1.0

    @property
    def reported_noise_multiplier(self) -> float:
        """The noise multiplier the training runs with (calibrated by the engine for ``target_epsilon``)."""
        engines, _ = self._reported
        return float(engines[1].accountant.history[0][0]) if engines[1].accountant.history else math.nan

    @property
    def privacy_description(self) -> LibraryGuarantees:
        """What the engine reports, for the relation its accountant assumes (add/remove, Poisson sampling)."""
        sampling = "Poisson sampling" if self.poisson_sampling else "the user's loader"
        maker = "make_private_with_epsilon" if self.target_epsilon is not None else "make_private"
        citation = (f"Opacus {library_version('opacus')} {self.accountant} accountant via {maker}, as "
                    f"PrivacyEngine.get_epsilon reports it after a training on the records and on each neighbour "
                    f"size (the largest; {sampling}; the accountant assumes Poisson sampling and add/remove)")
        return LibraryGuarantees((ProfileGuarantee("opacus-accountant", citation, "add-remove",
                                                   self.reported_epsilon, self.reported_delta, key=(id(self),)),))

    def assumptions(self) -> list[dict[str, Any]]:
        """The accountant's assumptions, each checked against the training as configured.

        Returns
        -------
        list of dict
            ``name``, ``assumed`` (what the accountant takes for granted), ``holds`` and ``detail`` (what the
            code does instead, where it does not hold).
        """
        records = len(self.default_dataset().records)
        rate, _ = expected_batch_size(records, self.batch_size)
        if self.poisson_sampling:
            sampling = (True, f"Opacus replaces the loader's sampling with Poisson sampling at q = {rate:.4g}")
        else:
            how = ("the user's sampler" if self.sampler is not None else
                   "shuffled fixed-size batches" if self.shuffle else "fixed-size batches in order")
            sampling = (False, f"batches are drawn by {how} (poisson_sampling=False), not independently at q = "
                               f"{rate:.4g}: a record's inclusions are not those the accountant composes")
        sizes = {n: expected_batch_size(n, self.batch_size)[1] for n in (records - 1, records, records + 1)}
        steady = len(set(sizes.values())) == 1
        normalisation = (steady, "expected_batch_size = int(n / len(loader)) is " +
                         ", ".join(f"{size} at n={n}" for n, size in sizes.items()) +
                         ("" if steady else ": the noise's scale moves with the number of records"))
        return [
            {"name": "sampling", "assumed": "each record in each batch independently with probability q",
             "holds": sampling[0], "detail": sampling[1]},
            {"name": "normalisation", "assumed": "the noise's scale does not depend on the data (a fixed divisor)",
             "holds": normalisation[0], "detail": normalisation[1]},
            {"name": "relation", "assumed": "neighbours add or remove one record",
             "holds": True, "detail": "the claim is stated for add/remove; other pairs are not covered"},
        ]


# -- one training ------------------------------------------------------------------------------------
def _as_records(records: Any) -> np.ndarray:
    """The records as a float64 array of rows (a ``TensorDataset``'s tensors side by side)."""
    if records is None:
        raise ParameterError("records must be given (an array of rows, or a TensorDataset)")
    if isinstance(records, torch.utils.data.TensorDataset):
        columns = [t.detach().double().reshape(len(t), -1).numpy() for t in records.tensors]
        records = np.concatenate(columns, axis=1)
    array = np.asarray(records, dtype=np.float64)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise ParameterError(f"records must be rows of numbers, got an array of shape {array.shape}")
    return array


def _model_label(model: Any) -> str:
    if isinstance(model, torch.nn.Module):
        return type(model).__qualname__
    return getattr(model, "__qualname__", type(model).__qualname__)


def _weights_digest(model: torch.nn.Module) -> str:
    """A digest of a module's initial parameters and buffers: they decide the releases, so they enter the id."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().double().numpy().tobytes())
    return digest.hexdigest()[:16]


def _callable_label(function: Any) -> str | None:
    return None if function is None else getattr(function, "__qualname__", type(function).__qualname__)


def from_opacus(model: Any, *, records: Any, batch_size: int, noise_multiplier: float | None = None,
                target_epsilon: float | None = None, target_delta: float = 1e-5, max_grad_norm: float = 1.0,
                criterion: Callable | None = None, input_columns: int | None = None, lr: float = 1.0,
                epochs: int = 1, shuffle: bool = True, sampler: Callable | None = None,
                poisson_sampling: bool = True, accountant: str = "prv", output: str = "final",
                workers: int = 1) -> OpacusTraining:
    """Audit an Opacus training as it is called: the user's model, loss, records, loader and sampler.

    Parameters
    ----------
    model : torch.nn.Module or callable
        The model (copied for every training: its initial weights are public), or a function returning a new
        one (called under each trial's seed).
    records : array_like or TensorDataset
        The training records, one row each; with ``input_columns``, the first columns are the model's inputs
        and the rest its targets. The loader serves them in the model's dtype (its first floating parameter's:
        float32, or float64 for a ``.double()`` model).
    batch_size : int
        The ``DataLoader``'s batch size (Opacus derives the sampling rate from the loader's length).
    noise_multiplier : float, optional
        For ``make_private``.
    target_epsilon, target_delta : float, optional
        For ``make_private_with_epsilon`` (the engine calibrates the noise).
    max_grad_norm : float
        The per-example clipping norm.
    criterion : callable, optional
        ``criterion(outputs, targets) -> loss`` averaged over the batch (Opacus's ``loss_reduction="mean"``);
        default the mean squared error to the targets, or the mean output where records have no targets.
    lr, epochs : float, int
        SGD's step size and the passes over the loader.
    shuffle, sampler : bool, callable, optional
        The loader's own sampling: ``shuffle``, or ``sampler(dataset) -> torch Sampler`` (a
        ``WeightedRandomSampler``, say). With ``poisson_sampling=True`` Opacus replaces both.
    poisson_sampling : bool
        As ``make_private`` takes it.
    accountant : {"prv", "rdp", "gdp"}
        The ``PrivacyEngine``'s accountant.
    output : {"final", "iterates"}
        Every parameter after the last step, or after every step.
    workers : int
        Worker processes for the trainings of a chunk (the model, criterion and sampler must pickle).

    Returns
    -------
    OpacusTraining
        Audit it with ``dpaudit.audit(training, dataset_pair=training.neighbours())`` (the records against
        the records less one: add/remove, what the accountant bounds) or any pair of record arrays.
    """
    require("opacus", "models")
    check_version("opacus", SUPPORTED_VERSIONS, "from_opacus")
    return OpacusTraining(model=model, records=_as_records(records), input_columns=input_columns,
                          criterion=criterion, lr=lr, batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                          poisson_sampling=poisson_sampling, epochs=epochs, noise_multiplier=noise_multiplier,
                          target_epsilon=target_epsilon, target_delta=target_delta, max_grad_norm=max_grad_norm,
                          accountant=accountant, output=output, workers=workers)
