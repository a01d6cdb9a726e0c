"""jax_privacy's DP matrix factorisation as its users call it: their jax training, the privatizer, its figures.

A user trains with ``jax_privacy.noise_addition.matrix_factorization_privatizer``
(correlated noise ``C^{-1} Z``, ``Z`` i.i.d. ``N(0, stddev^2)``, added to the
clipped gradient sum) inside a training of their own, written in jax. The
audit runs that training as it is written: ``train(key, records) -> params``,
batched over trials with ``jax.jit(jax.vmap(train))``, each trial from its
own jax key drawn from the audit's seed. The release is the parameters
``train`` returns (any pytree, flattened), snapped to the release grid.

Two sets of figures stand beside the certified bound:

* jax_privacy's own, as the library computes them for the strategy the
  privatizer was given: the multi-participation sensitivity from its own
  functions (``sensitivity.get_sensitivity_banded`` for a ``C`` banded within
  the separation, ``toeplitz.minsep_sensitivity_squared(coef, min_sep,
  max_participations, n=steps)`` for a Toeplitz ``C``,
  ``sensitivity.get_min_sep_sensitivity_upper_bound`` otherwise), turned into
  an epsilon by ``SingleReleaseTrainingAccountant`` (PLD) at the noise
  multiplier ``stddev / (clip_norm * sensitivity)``; and, where the user's code
  set its noise from a sensitivity of its own (``sensitivity=``), the same
  accountant at that figure;
* dpaudit's exact value of the release (``accounting.builders.matrix``, read
  from a :class:`MatrixFactorizationTraining` of the materialised ``C``):
  ``mf-releases`` (every noisy gradient, the worst cyclic slot), ``mf-minsep``
  and ``mf-last-iterate``. Each library figure says in its citation whether it
  agrees with dpaudit's value for the same schema within 1e-6 relative, and
  whether it covers the exact value of this release.

The neighbouring relation is jax_privacy's zero-out (``REPLACE_SPECIAL``: one
record's gradient replaced by zero); replace-one figures (sensitivity doubled,
as ``clipped_grad(...).sensitivity(REPLACE_ONE)`` doubles it) are listed too.

References
----------
Choquette-Choo, McMahan, Rush, Thakurta, "Multi-Epoch Matrix Factorization
Mechanisms for Private Machine Learning", ICML 2023 (sensitivity over
participation schemas).
Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS 2023
(b-min-separation; Alg. 3 and 4 of arXiv:2306.08153 are jax_privacy's
``get_sensitivity_banded`` and ``get_min_sep_sensitivity_upper_bound``).
Balle and Wang, "Improving the Gaussian Mechanism for Differential Privacy",
ICML 2018, Thm 8 (the exact profile of one Gaussian release).
jax_privacy PR 238 (``minsep_sensitivity_squared`` called without ``n`` counts
one participation).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.kinds import Relation
from dpaudit.core.validation import check_choice, check_int, check_real
from dpaudit.mechanisms.accounting.builders.matrix import release_mu
from dpaudit.mechanisms.accounting.descriptions import LibraryGuarantees, MatrixFactorizationTraining
from dpaudit.mechanisms.adapters.base import library_version
from dpaudit.mechanisms.adapters.jax_privacy_facts import (
    Facts,
    accounted,
    assumptions,
    dpaudit_guarantees,
    read_facts,
)
from dpaudit.mechanisms.adapters.jax_privacy_run import SUPPORTED_VERSIONS, VmappedTraining, jax_modules
from dpaudit.mechanisms.base import RELEASE_GRID, Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["JaxPrivacyTraining", "SUPPORTED_VERSIONS", "from_jax_privacy"]

ORDERS = ("cyclic", "min-sep")
_MAX_STEPS = 4096  # the strategy's matrices are dense steps x steps (as dp-mf's)


# -- the mechanism ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)  # arrays and a function: identity, not value, equality
class JaxPrivacyTraining(Mechanism):
    """Trials of a user's jax training with ``matrix_factorization_privatizer``, batched over jax keys.

    Built by :func:`from_jax_privacy`; the fields are its arguments.
    """

    train: Callable[..., Any] | None = None
    records: Any = None
    steps: int = 1
    epochs: int = 1
    clip_norm: float = 1.0
    stddev: float | None = None
    noise_multiplier: float | None = None
    noising_matrix: Any = None
    strategy: Any = None
    min_separation: int | None = None
    order: str = "cyclic"
    sensitivity: float | None = None
    linear_sgd: bool = False
    canary: Any = None
    grid: Any = "auto"
    trials_per_call: int = 4096

    name = "jax-privacy"
    summary = "a user's jax training with jax_privacy's matrix_factorization_privatizer, vmapped over trials"
    library = "jax_privacy"
    tiled = False  # one jitted call per block of trials: jax runs its own threads

    def validate(self) -> None:
        jax_modules()
        if not callable(self.train):
            raise ParameterError(f"train must be a function train(key, records) -> params, got train={self.train!r}")
        records = _as_records(self.records)
        object.__setattr__(self, "records", records)
        check_int("steps", self.steps, minimum=1, maximum=_MAX_STEPS)
        check_int("epochs", self.epochs, minimum=1, maximum=self.steps)
        check_choice("order", self.order, ORDERS)
        if self.order == "cyclic" and self.steps % self.epochs:
            raise ParameterError(f"order='cyclic' visits steps / epochs batches per epoch: steps must be a multiple "
                                 f"of epochs, got steps={self.steps}, epochs={self.epochs}")
        if self.min_separation is None and self.order == "min-sep":
            raise ParameterError("order='min-sep' needs min_separation (the b of b-min-separation), got None")
        if self.min_separation is not None:
            check_int("min_separation", self.min_separation, minimum=1, maximum=self.steps)
        check_real("clip_norm", self.clip_norm, positive=True)
        if (self.stddev is None) == (self.noise_multiplier is None):
            raise ParameterError(f"give stddev (the privatizer's) or noise_multiplier, not both or neither, got "
                                 f"stddev={self.stddev!r}, noise_multiplier={self.noise_multiplier!r}")
        check_real("stddev" if self.stddev is not None else "noise_multiplier",
                   self.stddev if self.stddev is not None else self.noise_multiplier, positive=True)
        if self.sensitivity is not None:
            check_real("sensitivity", self.sensitivity, positive=True)
        if self.noising_matrix is None and self.strategy is None:
            raise ParameterError("give noising_matrix (C^-1, what the privatizer was given) or strategy (C), got "
                                 "neither")
        if not isinstance(self.linear_sgd, (bool, np.bool_)):
            raise ParameterError(f"linear_sgd must be True or False, got linear_sgd={self.linear_sgd!r}")
        check_int("trials_per_call", self.trials_per_call, minimum=1)
        self.release_grid  # checks grid
        if self.canary is not None:
            try:
                canary = np.asarray(self.canary, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                canary = np.array([np.nan])
            if canary.size != records.shape[1] or not np.all(np.isfinite(canary)):
                raise ParameterError(f"canary must be one record of {records.shape[1]} finite numbers, got "
                                     f"shape {np.shape(self.canary)}")
            object.__setattr__(self, "canary", canary)
            if self.order == "cyclic" and records.shape[0] % self.period:
                raise ParameterError(f"a canary is placed in a batch slot of cyclic order: the {records.shape[0]} "
                                     f"records must fill the {self.period} batches of an epoch equally, got "
                                     f"{records.shape[0]} records")
        self._facts  # the matrices are read and checked here
        self._shape  # train is traced here

    # -- shape -------------------------------------------------------------------------------------------
    @property
    def period(self) -> int:
        """``p = steps / epochs``: the batches of one epoch (cyclic order)."""
        return self.steps // self.epochs

    @property
    def separation(self) -> int:
        """The ``min_sep`` jax_privacy's figure is computed for (default: the cyclic period)."""
        return int(self.min_separation) if self.min_separation is not None else self.period

    @functools.cached_property
    def _shape(self) -> tuple[int, str]:
        """``(output_dim, dtype name)`` of one trial's release, from tracing ``train`` batched over two keys."""
        return self._runner.shape(self.records)

    @property
    def output_dim(self) -> int:
        return self._shape[0]

    @property
    def record_dim(self) -> int:
        return int(self.records.shape[1])

    @property
    def n_records(self) -> int:
        return int(self.records.shape[0])

    @property
    def has_positions(self) -> bool:
        return self.canary is not None

    @property
    def iterations(self) -> int:
        return int(self.steps)

    @property
    def label(self) -> str:
        return f"jax_privacy matrix_factorization_privatizer ({getattr(self.train, '__qualname__', 'train')})"

    @property
    def user_function(self) -> Any:
        return self.train

    @property
    def release_grid(self) -> float | None:
        """dpaudit's grid for the dtype ``train`` returns (``grid="auto"``), the grid given, or ``None``."""
        grid = self.grid
        if isinstance(grid, str):
            check_choice("grid", grid, ("auto", "none"))
            if grid == "none":
                return None
            return RELEASE_GRID["float64" if self._shape[1] == "float64" else "float32"]
        value = check_real("grid", grid, positive=True)
        if math.frexp(value)[0] != 0.5:
            raise ParameterError(f"grid must be a power of two (exact to snap to), 'auto' or 'none', got grid={grid!r}")
        return value

    @property
    def params(self) -> dict[str, Any]:
        facts = self._facts
        return {"library": "jax_privacy", "version": library_version("jax_privacy"),
                "train": getattr(self.train, "__qualname__", type(self.train).__qualname__),
                "records": self.n_records, "steps": int(self.steps), "epochs": int(self.epochs),
                "order": self.order, "min_separation": self.separation, "clip_norm": float(self.clip_norm),
                "stddev": facts.stddev, "noise_multiplier": _number(self.noise_multiplier),
                "strategy": facts.description.strategy.digest, "sensitivity": _number(self.sensitivity),
                "linear_sgd": bool(self.linear_sgd), "canary": None if self.canary is None else self.canary.tolist(),
                "grid": self.release_grid, "output_dim": self.output_dim}

    def default_dataset(self) -> Dataset:
        """The user's records."""
        return Dataset(self.records)

    # -- the canary ----------------------------------------------------------------------------------------
    @property
    def canary_kinds(self) -> tuple[str, ...]:
        """``("input",)`` with a canary record given; else none (audits take ``dataset_pair``)."""
        return ("input",) if self.canary is not None else ()

    @property
    def default_index(self) -> int:
        """The last record of the batch slot whose pattern attains the sensitivity (cyclic order: the records
        ``j m + 1 .. (j + 1) m`` in slot ``j``); the last record otherwise."""
        if self.order != "cyclic":
            return self.n_records
        _, value = release_mu(self._facts.description)
        return (value.pattern[0] % self.period + 1) * (self.n_records // self.period)

    @property
    def default_pair(self) -> str:
        return "zero"

    def pair_relation(self, pair: str) -> Relation | None:
        if pair == "zero":  # the canary against a zero record: jax_privacy's zero-out
            return Relation.ZERO_OUT
        return None

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(canary, -canary, direction)``: the canary record given (``u`` is not read: the record is the
        user's), its opposite, and no known output direction (all ones: the scores fit on calibration)."""
        if reset:
            raise ParameterError("canary kind 'reset' is not defined for a jax_privacy training")
        return self.canary.copy(), -self.canary, np.ones(self.output_dim) / math.sqrt(self.output_dim)

    # -- sampling ------------------------------------------------------------------------------------------
    @functools.cached_property
    def _runner(self) -> VmappedTraining:
        return VmappedTraining(self.train, self.trials_per_call)

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        return torch.from_numpy(self._runner.sample(data.records, trials, rng, self.output_dim))

    def __getstate__(self) -> dict[str, Any]:
        """Worker processes get the parameters, not the compiled training or the cached facts and claims."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ("_runner", "_facts", "privacy_description")}

    # -- what the library and dpaudit state ---------------------------------------------------------------
    @functools.cached_property
    def _facts(self) -> Facts:
        """The matrices, the noise and the values the claims read (``jax_privacy_facts.read_facts``)."""
        return read_facts(self)

    @property
    def matrix_description(self) -> MatrixFactorizationTraining:
        """The training as dp-mf's accountants see it: the noise as run, the participation, the noise multiplier
        over the clip (dpaudit's values are read from it)."""
        return self._facts.description

    @functools.cached_property
    def privacy_description(self) -> LibraryGuarantees:
        """jax_privacy's figures (its sensitivity, and the one the user's code used), then dpaudit's values."""
        value, how = self._facts.library
        guarantees = accounted(self, "jax-privacy", value, how)
        if self.sensitivity is not None:
            guarantees += accounted(self, "jax-privacy-given-sensitivity", float(self.sensitivity),
                                    "the sensitivity your code set its noise with (sensitivity=)")
        return LibraryGuarantees(tuple(guarantees + dpaudit_guarantees(self)))

    def assumptions(self) -> list[dict[str, Any]]:
        """jax_privacy's accounting assumptions, each checked against the training as described
        (``jax_privacy_facts.assumptions``: ``name``, ``assumed``, ``holds`` and ``detail``)."""
        return assumptions(self)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_records(records: Any) -> np.ndarray:
    if records is None:
        raise ParameterError("records must be given (the dataset train(key, records) is called with)")
    try:
        array = np.asarray(records, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(f"records must be an array of numbers, got {type(records).__name__}") from None
    array = array[:, None] if array.ndim == 1 else array
    if array.ndim != 2 or array.shape[0] < 1 or not np.all(np.isfinite(array)):
        raise ParameterError(f"records must be a non-empty 2-D array of finite numbers (records x columns), got "
                             f"shape {array.shape}")
    return array


def from_jax_privacy(train: Callable[..., Any], *, records: Any, steps: int, epochs: int, clip_norm: float,
                     stddev: float | None = None, noise_multiplier: float | None = None,
                     noising_matrix: Any = None, strategy: Any = None, min_separation: int | None = None,
                     order: str = "cyclic", sensitivity: float | None = None, linear_sgd: bool = False,
                     canary: Any = None, grid: Any = "auto", trials_per_call: int = 4096) -> JaxPrivacyTraining:
    """Audit a jax training that uses jax_privacy's ``matrix_factorization_privatizer``, as it is called.

    Parameters
    ----------
    train : callable
        ``train(key, records) -> params``: the user's whole training in jax, from a jax PRNG key (every draw of
        the training, the privatizer's ``prng_key`` included, must come from it) and the records (a jax array of
        the records, in jax's default float dtype); returns the released parameters (an array or a pytree,
        flattened). It must run under ``jax.vmap`` over the key: build the privatizer inside ``train`` from the
        key, and batches of a fixed size (``jax.random.permutation`` or a fixed order, not ``batch_iterator``).
    records : array_like
        The training records, one row each (the dataset ``train`` is called with; canaries replace one row).
    steps, epochs : int
        The privatizer's steps ``n`` (rows of ``C``) and the participations ``k`` of every record.
    clip_norm : float
        The bound on one record's contribution to the sum the privatizer is given
        (``clipped_grad(...).l2_norm_bound``: ``l2_clip_norm``, 1 with ``rescale_to_unit_norm``, over
        ``normalize_by``).
    stddev, noise_multiplier : float
        The privatizer's ``stddev``, or the noise multiplier it was built from as ``BandMFExecutionPlanConfig``
        does (``stddev = noise_multiplier * clip_norm * `` the largest column norm of ``C``). Give one.
    noising_matrix : array or StreamingMatrix, optional
        What the privatizer was given: ``C^{-1}`` (a dense array, or ``toeplitz.inverse_as_streaming_matrix``,
        ``ColumnNormalizedBanded.inverse_as_streaming_matrix()``, ...). Materialised to ``steps x steps``.
    strategy : array, ColumnNormalizedBanded or BufferedToeplitz, optional
        ``C`` itself. jax_privacy's figure is computed for ``strategy`` when given (else for the inverse of
        ``noising_matrix``), dpaudit's for the noise as run (``noising_matrix`` when given); with both, the
        ``strategy`` assumption checks that they agree. Entries within the round-off of the dtype they were
        stored in are taken as zero.
    min_separation : int, optional
        The ``min_sep`` of jax_privacy's sensitivity (default ``steps / epochs``, the cyclic period).
    order : {"cyclic", "min-sep"}
        ``"cyclic"``: ``train`` visits the records in ``steps / epochs`` fixed batch slots, slot ``j`` at steps
        ``j, j + p, ...`` (BandMF without amplification); ``"min-sep"``: any order the user's sampler keeps
        ``min_separation`` apart (dpaudit's value is then the b-min-separation bound).
    sensitivity : float, optional
        The multi-participation sensitivity the user's code set its noise with, where it computed one itself:
        listed as the claim ``jax-privacy-given-sensitivity`` beside jax_privacy's own (for instance the figure
        of ``toeplitz.minsep_sensitivity_squared`` called without ``n``, jax_privacy PR 238).
    linear_sgd : bool
        True declares that the per-record gradients do not depend on the parameters (a linear loss) and the
        optimizer is plain SGD at a fixed step, without projection: the final parameters are an affine function
        of the summed noisy gradients, and dpaudit's last-iterate value (``mf-last-iterate``) applies.
    canary : array_like, optional
        A record of the user's (one with a clipped gradient at the clip norm, say). Given, the default audit
        places it at the worst participation pattern (cyclic order: the last record of the worst slot, records
        ``j m + 1 .. (j + 1) m`` being slot ``j``) against a zero record there (zero-out, jax_privacy's
        relation). Not given, no canary can be built for a training dpaudit cannot see into: audits need
        ``dataset_pair=(S, S')`` (equal sizes: dpaudit calls that pair replace-one).
    grid : float, "auto" or "none"
        The grid releases are snapped to: ``"auto"`` dpaudit's grid for the dtype ``train`` returns
        (``RELEASE_GRID``: 2^-6 for float32, 2^-12 for float64), a power of two, or ``"none"`` (as computed).
    trials_per_call : int
        Trials per jitted call (a shorter block is padded: jit compiles for one shape).

    Returns
    -------
    JaxPrivacyTraining
        Audit it with ``dpaudit.audit(training)`` (with ``canary``) or ``dpaudit.audit(training,
        dataset_pair=(S, S'))``; ``training.claims()`` lists jax_privacy's figures and dpaudit's values.

    Raises
    ------
    ParameterError
        Where jax or jax_privacy is missing (``pip install 'dpaudit[jax]'``), where jax_privacy is outside
        :data:`SUPPORTED_VERSIONS`, and for any argument that does not fit (one line, naming it).

    Notes
    -----
    Trials are seeded through jax keys: the audit's generator (a NumPy ``SeedSequence`` child per chunk) draws
    each trial's key data, wrapped with ``jax.random.wrap_key_data``; a trial's release depends on its key
    alone. jax is imported when this adapter is used, never with ``import dpaudit``.

    References
    ----------
    Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS 2023; jax_privacy PR 238.
    """
    jax_modules()
    return JaxPrivacyTraining(train=train, records=records, steps=steps, epochs=epochs, clip_norm=clip_norm,
                              stddev=stddev, noise_multiplier=noise_multiplier, noising_matrix=noising_matrix,
                              strategy=strategy, min_separation=min_separation, order=order,
                              sensitivity=sensitivity, linear_sgd=linear_sgd, canary=canary, grid=grid,
                              trials_per_call=trials_per_call)
