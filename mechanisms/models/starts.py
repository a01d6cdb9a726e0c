"""Initial parameters of a trained model: fixed from a seed, drawn per trial, given, or a worst case.

DP-SGD's guarantee holds for any initial parameters fixed before training
(its analysis bounds each step whatever the parameters it starts from), so
an audit may start where the claim is easiest to test:

``"seed"``
    the model's own initialisation from ``init_seed``, the same in every trial
    (public; the default).
``"random"``
    a fresh initialisation in every trial, drawn from the trial's generator
    (the average over starts a user's training loop sees).
``"worst-case"``
    Annamalai and De Cristofaro's construction: parameters pre-trained
    without noise until the other records' gradients are small, so that a
    target's clipped gradient dominates every update. They pre-train on a
    disjoint half of the data; here the pre-training runs on the training
    records themselves (full batch, Adam, ``init_steps`` steps from the seed's
    initialisation), which the adversary of differential privacy knows: a
    stronger adversary than an average start, and the threat model of an
    auditor who chooses the start (a crafted target is not among these
    records; a target taken from the data is learned too).
a file or an array
    given parameters: a ``.npy`` file (or, from Python, an array) of the flat
    parameter vector in the order of ``model.parameters()``, or a ``.pt``/``.pth``
    state dict of the model.

References
----------
Annamalai, De Cristofaro 2024, "Nearly Tight Black-Box Auditing of
Differentially Private Machine Learning" (NeurIPS), section 3 (worst-case
initial parameters); Abadi et al. 2016 (DP-SGD: any public initialisation).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_int
from dpaudit.mechanisms.models.networks import build_model

__all__ = ["INITS", "PRETRAIN_RATE", "ModelStarts", "describe_start", "given_start", "init_digest", "one_thread",
           "per_trial_starts", "pretrained", "set_flat"]

INITS = ("seed", "random", "worst-case")
#: Adam's step size in the worst-case pre-training (full batch; digits, an MLP of 16 units: the records' mean
#: gradient norm falls from 1.29 to 0.027 in 1,000 steps)
PRETRAIN_RATE = 0.01


def _loss(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    if output.shape[-1] == 1:
        return nn.functional.binary_cross_entropy_with_logits(output[..., 0], labels.to(output.dtype))
    return nn.functional.cross_entropy(output, labels.long())


def flat_of(model: nn.Module) -> torch.Tensor:
    """The parameters of ``model`` as one vector, in the order of ``model.parameters()``."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def set_flat(model: nn.Module, flat: np.ndarray | torch.Tensor) -> nn.Module:
    """``model`` with its parameters set from the flat vector ``flat`` (in place; returned)."""
    values = torch.as_tensor(np.asarray(flat, dtype=np.float64))
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p.copy_(values[offset:offset + p.numel()].reshape(p.shape).to(p.dtype))
            offset += p.numel()
    return model


def pretrained(template: nn.Module, records: np.ndarray, steps: int) -> nn.Module:
    """A copy of ``template`` pre-trained without noise on ``records`` (full batch, Adam, ``steps`` steps).

    Deterministic: the same template, records and steps give the same parameters (float64 on the CPU).
    """
    model = copy.deepcopy(template).to(torch.float64)
    table = torch.from_numpy(np.array(records, dtype=np.float64))
    features, labels = table[:, :-1], table[:, -1]
    optimiser = torch.optim.Adam(model.parameters(), lr=PRETRAIN_RATE)
    with one_thread(), torch.enable_grad():
        for _ in range(steps):
            optimiser.zero_grad()
            _loss(model(features), labels).backward()
            optimiser.step()
    return model.to(next(template.parameters()).dtype)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for the block (small full-batch steps on a busy machine: more threads spin
    more than they compute, about 10x slower on 2 shared cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def given_start(value: str | np.ndarray, template: nn.Module) -> np.ndarray:
    """The flat parameters ``init`` gives (an array, a ``.npy`` file, or a ``.pt``/``.pth`` state dict).

    Raises
    ------
    ParameterError
        Naming ``init`` and the value: a missing or unreadable file, a wrong length, numbers that are not finite.
    """
    size = sum(p.numel() for p in template.parameters())
    shown = "an array" if isinstance(value, np.ndarray) else repr(str(value))
    if isinstance(value, np.ndarray):
        flat = value
    else:
        path = Path(value).expanduser()
        if not path.is_file():
            raise ParameterError(f"init must be one of {', '.join(INITS)}, a .npy file of the {size} flat "
                                 f"parameters or a .pt state dict, got init={shown}")
        try:
            if path.suffix in (".pt", ".pth"):
                state = torch.load(path, map_location="cpu", weights_only=True)
                model = copy.deepcopy(template)
                model.load_state_dict(state)
                flat = flat_of(model).double().numpy()
            else:
                flat = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError, RuntimeError, KeyError, TypeError) as exc:
            detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise ParameterError(f"init file {shown} is not a .npy array of parameters or a state dict of the "
                                 f"model: {detail}") from None
    flat = np.asarray(flat)
    if flat.dtype.kind not in "iuf" or flat.size != size:
        raise ParameterError(f"init must hold the model's {size} parameters, got init={shown} with "
                             f"{flat.size} values of dtype {flat.dtype}")
    flat = flat.astype(np.float64).ravel()
    if not np.all(np.isfinite(flat)):
        raise ParameterError(f"init must hold finite numbers, got init={shown} with NaN or inf")
    return flat


def init_digest(flat: np.ndarray) -> str:
    """A short digest of given parameters (an array init is shown by it)."""
    return hashlib.sha256(np.ascontiguousarray(flat, dtype=np.float64).tobytes()).hexdigest()[:16]


def per_trial_starts(build: Callable[[int], nn.Module]) -> Callable[[int, np.random.Generator], torch.Tensor]:
    """``starts(count, rng)``: ``count`` fresh initialisations, each built from a seed drawn from ``rng``."""
    def starts(count: int, rng: np.random.Generator) -> torch.Tensor:
        seeds = rng.integers(0, 2**62, size=count)
        return torch.stack([flat_of(build(int(seed))) for seed in seeds])
    return starts


def describe_start(init: str, init_seed: int, init_steps: int) -> str:
    """One sentence on the start an audit used, for reports."""
    if init == "seed":
        return (f"initial parameters: the model's initialisation from init_seed={init_seed}, the same in every "
                "trial")
    if init == "random":
        return "initial parameters: a fresh random initialisation in every trial (an average start)"
    if init == "worst-case":
        return (f"initial parameters: worst case (Annamalai and De Cristofaro 2024): pre-trained without noise "
                f"on the training records for {init_steps} full-batch steps from init_seed={init_seed}, so that "
                "the other records' gradients are small and the target's dominates; the threat model of an "
                "adversary who chooses the start, stronger than an average start")
    return f"initial parameters: given ({init})"


#: worst-case starts already pre-trained in this process, by what determines them (configs build a mechanism
#: more than once; pre-training runs once)
_PRETRAINED: dict[tuple, torch.nn.Module] = {}


class ModelStarts:
    """The start of ``model``'s trainings (mixed into ``ModelTraining``): its template, per-trial draws, and
    what reports and fingerprints say of it."""

    def _check_init(self) -> None:
        """``init``: a name of ``starts.INITS``, a file of parameters, or (from Python) an array; refused naming
        ``init`` before any trial (a given start is read and its length checked here)."""
        if isinstance(self.init, np.ndarray) or (isinstance(self.init, str) and self.init not in INITS):
            if not isinstance(self.init, (str, np.ndarray)):
                raise ParameterError(f"init must be one of {', '.join(INITS)} or a file, got init={self.init!r}")
        elif not isinstance(self.init, str):
            raise ParameterError(f"init must be one of {', '.join(INITS)}, a .npy file of the flat parameters or "
                                 f"a .pt state dict, got init={self.init!r}")
        check_int("init_steps", self.init_steps, minimum=1, maximum=10**6)

    @functools.cached_property
    def _template(self) -> torch.nn.Module:
        """The model at its public start: the seed's initialisation, pre-trained for a worst case, or given."""
        model = self._build(self.init_seed)
        if isinstance(self.init, np.ndarray) or self.init not in INITS:
            return set_flat(model, self._given_start)
        if self.init == "worst-case":
            key = (self.params["model"], self.params["data"], self.n, self.hidden, self.init_seed, self.init_steps,
                   self._template_dtype, getattr(self.model, "__wrapped__", self.model))
            if key not in _PRETRAINED:
                _PRETRAINED[key] = pretrained(model, np.asarray(self.records), self.init_steps)
            return _PRETRAINED[key]
        return model

    def _build(self, seed: int) -> torch.nn.Module:
        return build_model(self.model, self.record_dim - 1, self.classes, self.hidden, seed, self._template_dtype)

    @functools.cached_property
    def _given_start(self) -> np.ndarray:
        """The flat parameters ``init`` gives (an array or a file), checked against the model."""
        return given_start(self.init, self._build(self.init_seed))

    @property
    def fingerprint_data(self) -> bytes:
        """Given initial parameters enter the audit's id: an edited file never reuses stored chunks."""
        if isinstance(self.init, np.ndarray) or self.init not in INITS:
            return np.ascontiguousarray(self._given_start).tobytes()
        return b""

    @property
    def start_description(self) -> str:
        """Which start the trainings took (reports say it beside the canary)."""
        init = self.init
        if isinstance(init, np.ndarray) or init not in INITS:
            init = f"{self.params['init']}, sha256:{init_digest(self._given_start)}"
        return describe_start(init, self.init_seed, self.init_steps)

    def _starts(self):
        """Per-trial initial parameters of ``init='random'`` (``None``: every trial starts at the template)."""
        if self.init != "random":
            return None
        return per_trial_starts(self._build)
