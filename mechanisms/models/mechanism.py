"""The mechanism ``model``: a torch model trained by DP-SGD or DP-LSSGD on real data, trials batched.

Output: the final parameters of every trial (the hidden-state threat model:
only the last iterate is released), snapped to the release grid. Trials start
from the model's initialisation, a fresh one per trial, given parameters or a
worst case (``starts``); the record hooks (target records, black-box scores)
are in ``record_hooks``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import torch

from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.core.kinds import SHUFFLED, Relation
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms.accounting.builders.model import full_batch, full_batch_laws, surrogate_laws
from dpaudit.mechanisms.accounting.descriptions import (
    ClippedGradientTraining,
    MultiEpochNoisySgd,
    ProjectedNoisySgd,
)
from dpaudit.mechanisms.base import Mechanism, param
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.iterative import IterateRelease, clip_to_norm
from dpaudit.mechanisms.models.data import load_records
from dpaudit.mechanisms.models.networks import MODELS, Stacked, per_example_gradients
from dpaudit.mechanisms.models.pnsgd_training import train_pnsgd
from dpaudit.mechanisms.models.record_hooks import ModelRecords
from dpaudit.mechanisms.models.starts import ModelStarts, init_digest
from dpaudit.mechanisms.models.training import BLOCK_ELEMENTS, Schedule, train
from dpaudit.mechanisms.registry import register
from dpaudit.mechanisms.sgd import PNSGD, MultiEpochPNSGD

__all__ = ["ModelTraining"]

ALGORITHMS = ("dp-sgd", "dp-lssgd", "pnsgd")
#: Bounds on the per-example gradient norm and the smoothness of the convex models, on records of norm <= 1
#: (``data.load_records`` scales rows so): |residual| <= 1 (logistic) or sqrt 2 (softmax), times |(x, 1)| <= sqrt 2;
#: the cross-entropy's curvature in the logits is at most 1/4 (logistic) or 1/2 (softmax), times |(x, 1)|^2 <= 2.
CONVEX_CONSTANTS = {"logistic": (math.sqrt(2.0), 0.5), "softmax": (2.0, 1.0)}
SAMPLINGS = ("poisson", "without-replacement", "shuffle", "shuffle-once")
#: records on which the layers of a model with its own ``forward`` are checked (``grad_sample.traced``)
CHECK_RECORDS = 4


@register
@dataclasses.dataclass(frozen=True)
class ModelTraining(ModelRecords, ModelStarts, IterateRelease, Mechanism):
    """A model (logistic or softmax regression, a small MLP) trained privately, many trials at once."""

    name = "model"
    summary = "a torch model trained by DP-SGD or DP-LSSGD on real data; output: final parameters"
    canary_kinds = ("input", "gradient")  # a target record: white box (parameters) and black box (its loss)
    zero_input_is_absent = False  # a zero record still moves the bias: it is a record, not an absence

    model: str = param("logistic", "'logistic', 'softmax' or 'mlp'")
    data: str = param("breast_cancer", "bundled scikit-learn data (breast_cancer, digits, iris, wine) or a "
                                       ".npy/.csv file, label in the last column")
    n: int | None = param(None, "records used (the first n; default all)")
    algorithm: str = param("dp-sgd", "'dp-sgd', 'dp-lssgd' (Laplacian smoothing of the noisy gradient) or 'pnsgd' "
                                      "(records in order, one per step, projected)")
    steps: int = param(100, "training steps T")
    batch_size: int = param(64, "batch size m (expected size for Poisson sampling)")
    sampling: str = param("poisson", "'poisson' (rate m/n, add/remove), 'without-replacement' (replace-one), "
                                     "'shuffle' or 'shuffle-once' (a permutation cut into batches of m; zero-out)")
    clip: float = param(1.0, "per-example gradient clipping norm C")
    noise_multiplier: float = param(1.0, "sigma: the noise on a step's sum has std sigma * C")
    eta: float = param(0.5, "step size")
    smoothing: float = param(1.0, "Laplacian smoothing constant s of dp-lssgd")
    hidden: int = param(16, "hidden units of the MLP")
    epochs: int = param(1, "passes over the records of algorithm='pnsgd'")
    radius: float | None = param(None, "pnsgd: parameters are projected onto the ball of this radius (None: no "
                                       "projection)")
    init_seed: int = param(0, "seed of the (public) initial parameters, the same in every trial")
    init: str = param("seed", "initial parameters: 'seed' (from init_seed, every trial), 'random' (a fresh "
                              "initialisation per trial), 'worst-case' (pre-trained on the records until their "
                              "gradients are small; Annamalai and De Cristofaro 2024), or a .npy/.pt file of them")
    init_steps: int = param(1000, "full-batch pre-training steps of init='worst-case'")
    dtype: str | None = param(None, "torch dtype of the computation: float32 or float64 (default: float32 on a GPU, "
                                    "float64 on a CPU)")
    device: str = param("cpu", "'cpu', 'cuda' (a GPU, when torch sees one) or 'auto' (a GPU if torch sees one, "
                               "else the CPU)")
    output: str = param("final", "'final' (hidden state: the last parameters) or 'iterates' (every step's)")

    def validate(self) -> None:
        if not callable(self.model):
            check_choice("model", self.model, MODELS)
        check_choice("algorithm", self.algorithm, ALGORITHMS)
        check_choice("sampling", self.sampling, SAMPLINGS)
        if isinstance(self.data, np.ndarray):
            object.__setattr__(self, "_array_records", load_records(self.data, self.n))
        elif not isinstance(self.data, str) or not self.data:
            raise ParameterError(f"data must be a dataset name, a file path or an array, got data={self.data!r}")
        if self.n is not None:
            check_int("n", self.n, minimum=2)
        check_int("steps", self.steps, minimum=1, maximum=10**6)
        check_int("hidden", self.hidden, minimum=1, maximum=4096)
        check_int("init_seed", self.init_seed, minimum=0)
        self._check_init()
        check_real("clip", self.clip, positive=True)
        check_real("noise_multiplier", self.noise_multiplier, positive=True)
        check_real("eta", self.eta, positive=True)
        check_real("smoothing", self.smoothing, nonnegative=True)
        check_int("epochs", self.epochs, minimum=1, maximum=10**4)
        if self.radius is not None:
            check_real("radius", self.radius, positive=True)
        check_choice("device", self.device, ("cpu", "cuda", "auto"))
        if self.device == "auto":  # resolved once: the parameters say where the trainings ran
            object.__setattr__(self, "device", "cuda" if torch.cuda.is_available() else "cpu")
        if self.dtype is None:
            object.__setattr__(self, "dtype", "float32" if self.device == "cuda" else "float64")
        self.check_dtype()
        check_choice("output", self.output, ("final", "iterates"))
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ParameterError("device='cuda' needs a GPU that torch can use; none is available here")
        if self.algorithm != "pnsgd":  # pnsgd takes one record per step
            check_int("batch_size", self.batch_size, minimum=1, maximum=self.n_records)
            if self.sampling in SHUFFLED and self.n_records % self.batch_size:
                raise ParameterError(f"sampling={self.sampling!r} cuts each permutation into batches of batch_size: "
                                     f"batch_size must divide the {self.n_records} records, got "
                                     f"batch_size={self.batch_size}")
        self._template  # builds the model: a model that does not fit the data is refused here

    def inapplicable(self) -> dict[str, str]:
        unused = {}
        if self.algorithm != "dp-lssgd":
            unused["smoothing"] = f"algorithm={self.algorithm!r} does not smooth"
        if self.model != "mlp":
            unused["hidden"] = "only model='mlp' has a hidden width"
        if self.algorithm == "pnsgd":
            for key in ("steps", "batch_size", "sampling"):
                unused[key] = "algorithm='pnsgd' takes the records in order, one per step, for epochs passes"
        else:
            unused["epochs"] = unused["radius"] = f"algorithm={self.algorithm!r} samples batches; only pnsgd takes them"
        if not (isinstance(self.init, str) and self.init == "worst-case"):
            unused["init_steps"] = "only init='worst-case' pre-trains"
        if isinstance(self.init, str) and self.init not in ("seed", "random", "worst-case"):
            unused["init_seed"] = "init names given parameters"
        return unused

    # -- shape -------------------------------------------------------------
    @property
    def records(self) -> np.ndarray:
        if isinstance(self.data, np.ndarray):
            return self.__dict__["_array_records"]
        return load_records(self.data, self.n)

    @property
    def fn(self):
        """A user's model factory (its code is part of the audit's fingerprint), else ``None``."""
        return self.model if callable(self.model) else None

    @property
    def params(self) -> dict:
        """JSON-friendly parameters: a factory by its name, an array by its shape and digest."""
        values = super().params
        if callable(self.model):
            values["model"] = getattr(self.model, "__qualname__", type(self.model).__name__)
        if isinstance(self.data, np.ndarray):
            digest = hashlib.sha256(np.ascontiguousarray(self.data).tobytes()).hexdigest()[:16]
            values["data"] = f"array {self.data.shape[0]}x{self.data.shape[1]} sha256:{digest}"
        if isinstance(self.init, np.ndarray):
            values["init"] = f"array of {self.init.size} sha256:{init_digest(np.asarray(self.init, dtype=float))}"
        return values

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
    def model_label(self) -> str:
        return f"the user model {self.params['model']!r}" if callable(self.model) else f"model={self.model!r}"

    @property
    def convex(self) -> bool:
        return False if callable(self.model) else MODELS[self.model][1]

    @property
    def tile_trials(self) -> int:
        """Trials per tile: small on a CPU (per-trial parameters can be large), large on a GPU, whose blocks are
        sized to its free memory (``device.device_block``)."""
        return 1 << 16 if self.device == "cuda" else 1024

    def _stacked(self, device: str = "cpu") -> Stacked:
        """The template stacked over trials; a model with its own ``forward`` has its layers checked on the
        first records of the mechanism's own data (the same on both sides of a pair)."""
        examples = torch.as_tensor(np.array(self.records[:CHECK_RECORDS, :-1]), dtype=self._template_dtype)
        return Stacked(self._template, device=device, examples=examples)

    @property
    def _template_dtype(self) -> torch.dtype:
        return torch.float64 if self.dtype == "float64" else torch.float32

    @property
    def gradient_paths(self) -> list[str]:
        """How each layer's per-example gradients are found: a closed form, parameter-free, or ``torch.func``
        (and why), one line per layer (a model with its own ``forward``: per layer it calls, found from the
        modules it holds); a model whose layers cannot be followed is one line, with the reason."""
        if isinstance(self._template, torch.nn.Linear):
            return [f"{type(self._template).__name__}: closed form (linear model)"]
        return self._stacked().plan.describe()

    @property
    def parameter_count(self) -> int:
        """Parameters of one model."""
        return sum(p.numel() for p in self._template.parameters())

    @property
    def training_steps(self) -> int:
        return self.epochs * self.n_records if self.algorithm == "pnsgd" else self.steps

    @property
    def output_dim(self) -> int:
        return self.parameter_count * (self.training_steps if self.output == "iterates" else 1)

    @property
    def canary_dim(self) -> int:
        return self.parameter_count

    @property
    def iterate_count(self) -> int:
        """An ``"iterates"`` output lists the parameters after every training step."""
        return self.training_steps

    def clipped_record_gradients(self, data: Dataset) -> np.ndarray:
        """Each record's per-example gradient at the initial parameters, clipped to norm ``clip``."""
        stacked = self._stacked()
        records = torch.as_tensor(np.array(data.records), dtype=stacked.flat.dtype)
        gradients = per_example_gradients(stacked, stacked.flat, records[:, :-1].unsqueeze(0),
                                          records[:, -1].unsqueeze(0))[0].double().numpy()
        return clip_to_norm(gradients, float(self.clip))

    def score_law(self, data_a: Dataset, data_b: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """At sampling rate 1 (``full_batch``), the law of the composition's log-likelihood ratio for this pair's
        relation (a record removed or nulled: shift ``C``; replaced: ``2C``; ``accounting.builders.model``): the
        training's own release is at most as far apart (post-processing), so an ideal threshold audit of any
        score certifies about the ceiling it gives. Below rate 1: :class:`NotExact`."""
        description = self.privacy_description
        if not full_batch(description):
            raise NotExact("the law of a trained model's score is known at sampling rate 1 only")
        removed = data_a.n != data_b.n or any(not np.any(data_b.injected[k]) for k in data_b.injected
                                              if k not in data_a.injected or np.any(data_a.injected[k]))
        return full_batch_laws(description, "add-remove" if removed else "replace-one").likelihood_ratio_law()

    @property
    def projection_tail_model(self) -> str:
        """How the ``projection`` score's calibration rates place its test (``attacks.scores``): ``"tilt"`` at
        sampling rate 1 (``full_batch``) from a start fixed for every trial, else ``"calibration"``.

        Every record joins every step, so a step adds the same Gaussian noise to the sum of clipped gradients
        under either dataset, and the release projected on the canary's direction is a Gaussian shift (exactly
        for a fixed gradient, about for a network's moving one): its log likelihood ratio is linear in the
        projection, and the exponential tilt of the calibration scores places the test in a tail that 100
        calibration trials per side never reach (``audit.statistics.tilt``; its gate falls back to the counts
        where the calibration scores reject the line). Under Poisson sampling the projection is a Gaussian
        mixture, whose ratio is not linear; so it is from a fresh start per trial (``init="random"``), each
        start moving the shift.
        """
        fixed_start = not (isinstance(self.init, str) and self.init == "random")
        return "tilt" if full_batch(self.privacy_description) and fixed_start else "calibration"

    def surrogate_output_laws(self):
        """The last-iterate linear-loss surrogate at this training's parameters (final parameters only)."""
        if self.output != "final":
            return None
        return surrogate_laws(self.privacy_description)

    @property
    def initial_parameters(self) -> np.ndarray:
        """The public start point of every trial, flattened in output order, shape ``(output_dim,)``."""
        return Stacked(self._template).flat[0].double().numpy().copy()  # (parameter_count,)

    @property
    def default_pair(self) -> str:
        """Zero-out for shuffled batches (the only relation they fit), else the opposite canary."""
        return "zero" if self.sampling in SHUFFLED and self.algorithm != "pnsgd" else "opposite"

    def pair_relation(self, pair: str) -> Relation | None:
        """Shuffled batches: zero-out for ``pair='zero'``, an error for any other pair; ``pair='remove'``:
        add/remove under Poisson batches (their rate fixed from the configured n), an error under any other
        sampling; else the usual rule."""
        if pair == "remove" and (self.sampling not in SHUFFLED or self.algorithm == "pnsgd"):
            if self.sampling == "poisson" and self.algorithm != "pnsgd":
                return Relation.ADD_REMOVE
            what = ("algorithm='pnsgd' takes every record in a fixed order, one per step" if self.algorithm == "pnsgd"
                    else f"sampling={self.sampling!r} draws batches of a fixed size m")
            raise ParameterError(f"canary pair 'remove' (add/remove) needs Poisson batches, whose rate m/n is fixed "
                                 f"whatever the records; {what}: use pair='replace', 'opposite' or 'zero', got "
                                 f"pair={pair!r}")
        if self.sampling not in SHUFFLED or self.algorithm == "pnsgd":
            return None
        if pair != "zero":
            raise ParameterError(f"sampling={self.sampling!r} supports the zero-out relation only (a zero-gradient "
                                 f"record keeps the batch sizes): use canary pair='zero', got pair={pair!r}")
        return Relation.ZERO_OUT

    @property
    def zero_record_is_absent(self) -> bool:
        # Poisson sampling normalises by the expected batch size: a zero gradient adds nothing
        return self.sampling == "poisson" and self.algorithm != "pnsgd"

    def default_dataset(self) -> Dataset:
        """The real data: a canary background of the training set itself."""
        return Dataset(np.array(self.records))

    def check_dataset(self, data: Dataset) -> None:
        """The usual checks; under Poisson batches a dataset may also hold one record fewer than ``n``: the
        ``S'`` of an add/remove pair, sampled at the same rate ``m / n`` (``Schedule.rate``)."""
        if self.zero_record_is_absent and data.records.shape[0] == self.n_records - 1 >= 1:
            data = Dataset(np.vstack([data.records, data.records[-1:]]), data.injected, data.scheduled)
        super().check_dataset(data)

    def gradient_canary(self) -> tuple[float, float]:
        return float(self.clip), 1.0  # a gradient of norm C; steps subtract it: larger along u under S'

    def working_bytes(self, trials: int) -> int:
        return super().working_bytes(trials) + BLOCK_ELEMENTS * 8 * 4

    @property
    def privacy_description(self) -> ClippedGradientTraining:
        """The training as the accountants see it; for ``algorithm="pnsgd"`` with the ``pnsgd`` description
        whose bounds are this training's where they apply (:meth:`_iteration`)."""
        iteration, reason = self._iteration() if self.algorithm == "pnsgd" else (None, "")
        return ClippedGradientTraining(self.algorithm, self.n_records, self.batch_size, self.steps, self.epochs,
                             self.noise_multiplier, self.sampling, self.output, self.convex, repr(self.model),
                             self.model_label, iteration, reason)

    def _iteration(self) -> tuple[ProjectedNoisySgd | MultiEpochNoisySgd | None, str]:
        """The description of the ``pnsgd`` whose claims are this training's, or ``None`` and why they do not
        apply.

        The amplification-by-iteration bounds hold for steps of a convex,
        L-Lipschitz, beta-smooth loss with eta <= 2 / beta, projected onto a
        bounded convex set. Logistic and softmax regression on records of
        norm <= 1 have such constants (``CONVEX_CONSTANTS``); when the clip
        norm is at least L, clipping never acts and each step is a projected
        gradient step on that loss, exactly the setting of a ``pnsgd`` of the
        same n, epochs, eta, noise and Lipschitz constant C.
        """
        if self.output == "iterates":
            return None, "every iterate is released: amplification by iteration needs hidden intermediate iterates"
        if not self.convex:
            return None, f"{self.model_label} is not convex in its parameters"
        lipschitz, smoothness = CONVEX_CONSTANTS[self.model]
        if self.radius is None:
            return None, "no projection (radius=None): the bounds need a bounded convex set"
        if self.clip < lipschitz:
            return None, (f"clip={self.clip:g} is below the gradient bound {lipschitz:.4g} of model={self.model!r}: "
                          "clipped steps are not gradient steps of one convex loss")
        if self.eta > 2 / smoothness:
            return None, f"eta={self.eta:g} > 2/beta = {2 / smoothness:g}: the gradient step is not non-expansive"
        params = dict(n=self.n_records, dim=self.output_dim, eta=self.eta, sigma=self.noise_multiplier * self.clip,
                      domain="ball", radius=self.radius, loss="linear", lipschitz=self.clip)
        if self.epochs > 1:
            return MultiEpochPNSGD(epochs=self.epochs, **params).privacy_description, ""
        return PNSGD(**params).privacy_description, ""

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        stacked = self._stacked(self.device)  # built in the mechanism's dtype, copied by Stacked
        records = torch.as_tensor(data.records, dtype=dtype, device=self.device)
        injected = {position - 1: torch.as_tensor(vector, dtype=dtype, device=self.device)
                    for position, vector in data.injected.items()}
        if self.algorithm == "pnsgd":
            return train_pnsgd(stacked, records, injected, epochs=self.epochs, eta=float(self.eta),
                               clip=float(self.clip), noise_multiplier=float(self.noise_multiplier),
                               radius=None if self.radius is None else float(self.radius), trials=trials, rng=rng,
                               iterates=self.output == "iterates", starts=self._starts())
        # the Poisson rate m/n of the configured n, whatever the records given: a pair's datasets (n and n - 1
        # records under add/remove) are sampled alike, as the accountant assumes
        schedule = Schedule(self.steps, self.batch_size, self.sampling, float(self.clip),
                            float(self.noise_multiplier), float(self.eta),
                            float(self.smoothing) if self.algorithm == "dp-lssgd" else 0.0,
                            rate=self.batch_size / self.n_records)
        return train(stacked, records, injected, schedule, trials, rng, iterates=self.output == "iterates",
                     starts=self._starts())
