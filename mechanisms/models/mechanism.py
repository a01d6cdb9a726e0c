"""The mechanism ``model``: a torch model trained by DP-SGD or DP-LSSGD on real data, trials batched.

Output: the final parameters of every trial (the hidden-state threat model:
only the last iterate is released), snapped to the release grid.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import torch

from dpaudit.mechanisms.base import Mechanism, param, register
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.errors import ParameterError
from dpaudit.mechanisms.models.data import load_records
from dpaudit.mechanisms.models.networks import MODELS, Stacked, build_model
from dpaudit.mechanisms.models.training import Schedule, train
from dpaudit.mechanisms.validation import check_choice, check_int, check_real

__all__ = ["ModelTraining"]

ALGORITHMS = ("dp-sgd", "dp-lssgd")
SAMPLINGS = ("poisson", "without-replacement")


@register
@dataclasses.dataclass(frozen=True)
class ModelTraining(Mechanism):
    """A model (logistic or softmax regression, a small MLP) trained privately, many trials at once."""

    name = "model"
    summary = "a torch model trained by DP-SGD or DP-LSSGD on real data; output: final parameters"
    canary_kinds = ("gradient",)
    tile_trials = 1024  # per-trial parameters can be large: small tiles keep memory low and threads busy

    model: str = param("logistic", "'logistic', 'softmax' or 'mlp'")
    data: str = param("breast_cancer", "bundled scikit-learn data (breast_cancer, digits, iris, wine) or a "
                                       ".npy/.csv file, label in the last column")
    n: int | None = param(None, "records used (the first n; default all)")
    algorithm: str = param("dp-sgd", "'dp-sgd' or 'dp-lssgd' (Laplacian smoothing of the noisy gradient)")
    steps: int = param(100, "training steps T")
    batch_size: int = param(64, "batch size m (expected size for Poisson sampling)")
    sampling: str = param("poisson", "'poisson' (rate m/n, add/remove) or 'without-replacement' (replace-one)")
    clip: float = param(1.0, "per-example gradient clipping norm C")
    noise_multiplier: float = param(1.0, "sigma: the noise on a step's sum has std sigma * C")
    eta: float = param(0.5, "step size")
    smoothing: float = param(1.0, "Laplacian smoothing constant s of dp-lssgd")
    hidden: int = param(16, "hidden units of the MLP")
    init_seed: int = param(0, "seed of the (public) initial parameters, the same in every trial")
    dtype: str = param("float64", "torch dtype of the computation: float32 or float64")
    device: str = param("cpu", "'cpu' or 'cuda' (a GPU, when torch sees one)")

    def validate(self) -> None:
        check_choice("model", self.model, MODELS)
        check_choice("algorithm", self.algorithm, ALGORITHMS)
        check_choice("sampling", self.sampling, SAMPLINGS)
        if not isinstance(self.data, str) or not self.data:
            raise ParameterError(f"data must be a dataset name or a file path, got data={self.data!r}")
        if self.n is not None:
            check_int("n", self.n, minimum=2)
        check_int("steps", self.steps, minimum=1, maximum=10**6)
        check_int("hidden", self.hidden, minimum=1, maximum=4096)
        check_int("init_seed", self.init_seed, minimum=0)
        check_real("clip", self.clip, positive=True)
        check_real("noise_multiplier", self.noise_multiplier, positive=True)
        check_real("eta", self.eta, positive=True)
        check_real("smoothing", self.smoothing, nonnegative=True)
        self.check_dtype()
        check_choice("device", self.device, ("cpu", "cuda"))
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ParameterError("device='cuda' needs a GPU that torch can use; none is available here")
        check_int("batch_size", self.batch_size, minimum=1, maximum=self.n_records)
        self._template  # builds the model: a model that does not fit the data is refused here

    def inapplicable(self) -> dict[str, str]:
        unused = {}
        if self.algorithm != "dp-lssgd":
            unused["smoothing"] = f"algorithm={self.algorithm!r} does not smooth"
        if self.model != "mlp":
            unused["hidden"] = f"model={self.model!r} has no hidden layer"
        return unused

    # -- shape -------------------------------------------------------------
    @property
    def records(self) -> np.ndarray:
        return load_records(self.data, self.n)

    @property
    def n_records(self) -> int:
        return int(self.records.shape[0])

    @property
    def record_dim(self) -> int:
        return int(self.records.shape[1])

    @property
    def classes(self) -> int:
        return int(self.records[:, -1].max()) + 1

    @property
    def convex(self) -> bool:
        return MODELS[self.model][1]

    @functools.cached_property
    def _template(self) -> torch.nn.Module:
        torch_dtype = torch.float64 if self.dtype == "float64" else torch.float32
        return build_model(self.model, self.record_dim - 1, self.classes, self.hidden, self.init_seed, torch_dtype)

    @property
    def output_dim(self) -> int:
        return sum(p.numel() for p in self._template.parameters())

    @property
    def initial_parameters(self) -> np.ndarray:
        """The public start point of every trial, flattened in output order, shape ``(output_dim,)``."""
        return Stacked(self._template).flat[0].double().numpy().copy()

    @property
    def zero_record_is_absent(self) -> bool:
        # Poisson sampling normalises by the expected batch size: a zero gradient adds nothing
        return self.sampling == "poisson"

    def default_dataset(self) -> Dataset:
        """The real data: a canary background of the training set itself."""
        return Dataset(np.array(self.records))

    def gradient_canary(self) -> tuple[float, float]:
        return float(self.clip), 1.0  # a gradient of norm C; steps subtract it: larger along u under S'

    def working_bytes(self, trials: int) -> int:
        from dpaudit.mechanisms.models.training import BLOCK_ELEMENTS

        return super().working_bytes(trials) + BLOCK_ELEMENTS * 8 * 4

    def _claims(self, index: int | None) -> list:
        from dpaudit.mechanisms.accounting.builders.model import model_claims

        return model_claims(self)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        stacked = Stacked(self._template, device=self.device)  # built in the mechanism's dtype, copied by Stacked
        records = torch.as_tensor(data.records, dtype=dtype, device=self.device)
        injected = {position - 1: torch.as_tensor(vector, dtype=dtype, device=self.device)
                    for position, vector in data.injected.items()}
        schedule = Schedule(self.steps, self.batch_size, self.sampling, float(self.clip),
                            float(self.noise_multiplier), float(self.eta),
                            float(self.smoothing) if self.algorithm == "dp-lssgd" else 0.0)
        return train(stacked, records, injected, schedule, trials, rng)
