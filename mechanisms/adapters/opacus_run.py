"""One Opacus training as its users run it, from a seed, and what its engine answers.

:class:`dpaudit.mechanisms.adapters.opacus.OpacusTraining` describes the training and the audit's view of it;
this module runs it: the user's model and loader, ``PrivacyEngine.make_private``, the loop, the parameters after
each step, and the engine's epsilon (asked once a process per accountant history).
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.adapters.base import require

if TYPE_CHECKING:
    from dpaudit.mechanisms.adapters.opacus import OpacusTraining

__all__ = ["ENGINE_ANSWERS", "build_model", "engine_epsilon", "mean_output", "model_dtype", "mse", "torch_dataset",
           "train_once", "training_rows"]


def mean_output(outputs: torch.Tensor, targets: torch.Tensor | None) -> torch.Tensor:
    """The default loss: the mean of the model's outputs (with a linear model, each record's gradient is its
    input times the output weights' share)."""
    return outputs.mean()


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean squared error to the targets (the loss where records carry targets and no criterion is given)."""
    return torch.nn.functional.mse_loss(outputs, targets.reshape(outputs.shape))


def torch_dataset(records: np.ndarray, input_columns: int | None,
                  dtype: torch.dtype = torch.float32) -> torch.utils.data.TensorDataset:
    """The records as the loader serves them: inputs (and targets, past ``input_columns``) in ``dtype``."""
    x = torch.as_tensor(records, dtype=dtype)
    split = x.shape[1] if input_columns is None else input_columns
    if split == x.shape[1]:
        return torch.utils.data.TensorDataset(x)
    return torch.utils.data.TensorDataset(x[:, :split], x[:, split:])


def build_model(model: Any, seed: int) -> torch.nn.Module:
    """A fresh copy of the user's module (its initial weights are public), or a new one from a factory."""
    if isinstance(model, torch.nn.Module):
        return copy.deepcopy(model)
    with torch.random.fork_rng():
        torch.default_generator.manual_seed(seed)  # on the CPU (see train_once)
        built = model()
    if not isinstance(built, torch.nn.Module):
        raise ParameterError(f"model must return a torch.nn.Module, got {type(built).__name__}")
    return built


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The floating dtype of ``model``'s first floating parameter or buffer (float32 when it has none): the
    dtype its records are served in, so that a float64 model trains on float64 inputs."""
    for tensor in (*model.parameters(), *model.buffers()):
        if tensor.is_floating_point():
            return tensor.dtype
    return torch.float32


def train_once(run: OpacusTraining, records: np.ndarray, seed: int) -> tuple[np.ndarray, Any]:
    """One training on ``records`` from ``seed``: (the parameters after each step, flattened; the engine)."""
    opacus = require("opacus", "models")
    previous = logging.root.manager.disable  # Opacus logs a warning for every empty Poisson batch
    logging.disable(logging.WARNING)
    try:
        with torch.random.fork_rng(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # secure mode and accountant notices on every run
            # Poisson batches, shuffles and factory weights come from the global CPU generator, where the training
            # runs. ``torch.manual_seed`` would also queue a seeding of every lazy accelerator, formatting the
            # stack three times a call: a fifth of a small training's time
            torch.default_generator.manual_seed(seed)
            model = build_model(run.model, seed)
            optimizer = torch.optim.SGD(model.parameters(), lr=run.lr)
            dataset = torch_dataset(records, run.input_columns, model_dtype(model))  # the model's own dtype
            if run.sampler is not None:
                loader = torch.utils.data.DataLoader(dataset, batch_size=run.batch_size, sampler=run.sampler(dataset))
            else:
                loader = torch.utils.data.DataLoader(dataset, batch_size=run.batch_size, shuffle=run.shuffle)
            engine = opacus.PrivacyEngine(accountant=run.accountant)
            noise = torch.Generator().manual_seed(seed + 1)
            common = dict(module=model, optimizer=optimizer, data_loader=loader, max_grad_norm=run.max_grad_norm,
                          poisson_sampling=run.poisson_sampling, noise_generator=noise)
            noise_multiplier = run.noise_multiplier
            if run.target_epsilon is not None:  # make_private_with_epsilon, its calibration kept per loader length
                noise_multiplier = _calibrated(run.target_epsilon, run.target_delta, len(loader), run.epochs,
                                               engine.accountant.mechanism())
            model, optimizer, loader = engine.make_private(noise_multiplier=noise_multiplier, **common)
            criterion = run.criterion or (mse if run.input_columns not in (None, records.shape[1]) else mean_output)
            parameters = [p for p in model.parameters() if p.requires_grad]
            steps = []
            for _ in range(run.epochs):
                for batch in loader:
                    inputs, targets = batch[0], (batch[1] if len(batch) > 1 else None)
                    optimizer.zero_grad()
                    criterion(model(inputs), targets).backward()
                    optimizer.step()
                    steps.append(torch.cat([p.detach().reshape(-1) for p in parameters]).double().numpy())
    finally:
        logging.disable(previous)
    return np.stack(steps), engine


#: ``PrivacyEngine.get_epsilon`` answers, by accountant kind, its history and delta (at most ENGINE_ANSWERS)
_ENGINE_EPSILONS: dict[tuple[Any, ...], float] = {}
ENGINE_ANSWERS = 4096


def engine_epsilon(engine: Any, delta: float) -> float:
    """``engine.get_epsilon(delta)`` (``inf`` where the engine refuses the delta), asked once a process for each
    accountant history.

    An Opacus accountant's answer is a function of its kind and its ``history`` (noise multiplier, sample rate
    and steps of each phase), which are the key; the PRV accountant takes about half a second an answer, and
    the audits of one training setting (its neighbours, the zoo's bug and twin, each seed) ask the same
    questions."""
    accountant = engine.accountant
    key = (type(accountant).__module__, type(accountant).__qualname__, repr(accountant.history), float(delta))
    if key not in _ENGINE_EPSILONS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                value = float(engine.get_epsilon(delta))
            except (ValueError, RuntimeError):  # the PRV accountant refuses deltas beyond its reach
                value = math.inf
        if len(_ENGINE_EPSILONS) >= ENGINE_ANSWERS:
            _ENGINE_EPSILONS.pop(next(iter(_ENGINE_EPSILONS)))
        _ENGINE_EPSILONS[key] = value
    return _ENGINE_EPSILONS[key]


@functools.lru_cache(maxsize=64)
def _calibrated(target_epsilon: float, target_delta: float, batches: int, epochs: int, accountant: str) -> float:
    """The noise multiplier ``make_private_with_epsilon`` trains with: Opacus's ``get_noise_multiplier`` at
    ``sample_rate = 1 / len(data_loader)`` (``privacy_engine.py``), then ``make_private`` with it. The search
    takes up to seconds; its answer depends on these arguments alone, so it is kept (per process)."""
    # Opacus is loaded with the training that asks (dpaudit[models])
    from opacus.accountants.utils import get_noise_multiplier

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(get_noise_multiplier(target_epsilon=target_epsilon, target_delta=target_delta,
                                          sample_rate=1 / batches, epochs=epochs, accountant=accountant))


def training_rows(run: OpacusTraining, records: np.ndarray, seeds: list[int]) -> np.ndarray:
    """The releases of one training per seed, shape ``(len(seeds), output_dim)``."""
    rows = np.empty((len(seeds), run.output_dim))
    for trial, seed in enumerate(seeds):  # one Opacus training per trial, each from its own seed
        steps, _ = train_once(run, records, seed)
        if run.output == "iterates":
            if steps.size != rows.shape[1]:
                raise ParameterError(f"Opacus ran {len(steps)} steps, the release has room for {run.steps}")
            rows[trial] = steps.reshape(-1)
        else:
            rows[trial] = steps[-1]
    return rows
