"""The one-run design: ``m`` canaries inserted into one training run (or a few pooled), docs/theory.md 9.

A model too large to train thousands of times is audited in one run
(Steinke, Nasr, Jagielski 2023): ``m`` canaries take the places of ``m``
records of the user's data, each included with probability 1/2, drawn from
the seed before the run. An excluded canary is a record whose gradient is
zero (under Poisson sampling the same as no record: add/remove; under fixed
batches a zero-out neighbour).

- ``kind = "gradient"``: the canary's gradient is ``C u`` for a unit direction
  ``u`` of parameter space (white box, or the final model: the score reads the
  parameters), scored by how far the parameters moved against ``u``,
  ``<u, theta_0 - theta_T>``, once the data's drift is fitted out of the shift
  (:mod:`dpaudit.auditing.jobs.one_run_scores`). ``directions = "random"`` (the
  default): a uniform random unit direction; ``directions = "dirac"``: one
  coordinate with a sign, ``s e_j``, distinct coordinates while canaries are
  no more than parameters, else equal blocks of canaries sharing each
  coordinate (:func:`dirac_coordinates`; Nasr et al. 2023, Steinke et al.
  2023).
- ``kind = "input"``: the canary is a record (a random input of norm 1 with a
  random label) and the score is minus its loss under the final model (black
  box: only the model's predictions are read).

The scores and inclusion bits of every run are stored as chunks of the
audit (one per run and side), so a run killed midway resumes, and certified
by :mod:`dpaudit.auditing.jobs.one_run_result` (``run_one_run``).

References
----------
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run", arXiv:2410.22235, 2024.
Nasr, Hayes, Steinke, Balle, Tramer, Jagielski, Carlini, Terzis, "Tight Auditing of Differentially Private
Machine Learning", USENIX Security 2023 (Dirac canaries).
docs/theory.md 9 (Dirac canaries and what interference costs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from dpaudit.auditing.jobs.fingerprint import code_fingerprint
from dpaudit.auditing.jobs.one_run_scores import canary_scores
from dpaudit.auditing.statistics.one_run_fdp import METHODS
from dpaudit.auditing.statistics.settings import AuditSettings
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset

__all__ = ["DEFAULT_DIRECTIONS", "DESIGNS", "DIRECTIONS", "GRADIENT_SCORE", "MAX_RUNS", "ONE_RUN_DEFAULTS",
           "ONE_RUN_KINDS", "OneRunJob", "canary_scores", "dirac_coordinates", "directions_of", "draw_canaries",
           "train", "train_and_score"]

DESIGNS = ("many-runs", "one-run")
ONE_RUN_KINDS = ("gradient", "input")
#: The directions of gradient canaries: a signed coordinate each, or a uniform random unit direction
DIRECTIONS = ("dirac", "random")
DEFAULT_DIRECTIONS = "random"  #: measured on the CNN example: docs/theory.md 9
#: The score of gradient canaries: the parameters' shift along each, less the data's fitted drift (one_run_scores)
GRADIENT_SCORE = "parameter-shift-less-drift"
#: ``[audit]`` keys of the one-run design, with their defaults
ONE_RUN_DEFAULTS: dict[str, Any] = {"canaries": 1000, "runs": 1, "one_run_method": "fdp"}
MAX_RUNS = 100  #: training runs one audit pools at most
_TAG = 36  #: first spawn key of one-run seeds (chunk seeds of the many-runs design have four keys)


@dataclasses.dataclass(frozen=True, eq=False)
class OneRunJob:
    """One one-run audit ready to run.

    Parameters
    ----------
    mechanism : Mechanism
        The training (mechanism ``model``, a built-in model or a user's factory).
    canaries : int
        Canaries per run, at most the number of records.
    settings : AuditSettings
        ``delta``, ``confidence`` and ``seed`` are used; ``trials`` does not apply.
    kind : {"gradient", "input"}
    runs : int
        Training runs pooled (each with its own canaries).
    method : {"fdp", "steinke", "tail"}
        The estimator whose bound the verdict uses, chosen before the run.
    directions : {"dirac", "random"}, optional
        Of gradient canaries (default :data:`DEFAULT_DIRECTIONS`); input canaries have none, and refuse one.
    """

    mechanism: Mechanism
    canaries: int
    settings: AuditSettings
    title: str
    description: Mapping[str, Any]
    source: str = "<python>"
    kind: str = "gradient"
    runs: int = 1
    method: str = "fdp"
    claimed_epsilon: float | None = None
    sequential: bool = False  # a one-run audit looks once; accepted so that check treats it like any audit
    directions: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, Mechanism) or self.mechanism.name != "model":
            shown = self.mechanism.name if isinstance(self.mechanism, Mechanism) else self.mechanism
            raise ParameterError(f"design='one-run' trains a model: it needs mechanism 'model', got {shown!r}")
        check_choice("kind", self.kind, ONE_RUN_KINDS)
        check_choice("one_run_method", self.method, METHODS)
        n = self.mechanism.n_records
        check_int("canaries", self.canaries, minimum=2, maximum=n)
        check_int("runs", self.runs, minimum=1, maximum=MAX_RUNS)
        object.__setattr__(self, "directions", directions_of(self.kind, self.directions))

    design = "one-run"

    @property
    def code_fingerprint(self) -> str:
        return code_fingerprint(self.mechanism)

    @property
    def audit_id(self) -> str:
        """Hash of the description, the settings, the design and the code fingerprint."""
        document = {"design": self.design, "description": self.description, "settings": self.settings.to_dict(),
                    "canaries": self.canaries, "runs": self.runs, "kind": self.kind, "method": self.method,
                    "code": self.code_fingerprint}
        if self.kind == "gradient":  # how the canaries point and how their shift is read
            document.update(directions=self.directions, score=GRADIENT_SCORE)
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def violated(self, result: Any) -> bool:
        return result.verdict == "violation" or (
            self.claimed_epsilon is not None and result.epsilon_lower_bound > self.claimed_epsilon)


def directions_of(kind: str, directions: str | None) -> str | None:
    """The directions of a one-run audit's canaries: :data:`DEFAULT_DIRECTIONS` for gradient canaries, none for input
    canaries (which refuse one); an unknown value is refused naming ``directions``."""
    if directions is not None:
        check_choice("directions", directions, DIRECTIONS)
    if kind != "gradient":
        if directions is not None:
            raise ParameterError(f"directions applies to gradient canaries only (input canaries are records), got "
                                 f"directions={directions!r} with kind={kind!r}")
        return None
    return directions or DEFAULT_DIRECTIONS


def dirac_coordinates(rng: np.random.Generator, canaries: int, parameters: int) -> np.ndarray:
    """The coordinate of each Dirac canary: distinct coordinates drawn uniformly while ``canaries <= parameters``;
    else every coordinate carries ``canaries // parameters`` canaries and ``canaries % parameters`` coordinates
    drawn uniformly one more (equal blocks), shuffled over the canaries."""
    full, extra = divmod(canaries, parameters)
    pool = np.concatenate([np.repeat(np.arange(parameters), full), rng.choice(parameters, extra, replace=False)])
    return rng.permutation(pool)


@dataclasses.dataclass(frozen=True)
class Canaries:
    """One run's canaries: 1-based positions, inclusion bits, and directions (gradient) or records (input).

    Random gradient canaries hold their unit ``directions`` ``(m, P)``; Dirac ones their ``coordinates`` and
    ``signs`` (``u_i = signs[i] e_{coordinates[i]}``, no dense matrix).
    """

    positions: np.ndarray
    included: np.ndarray
    directions: np.ndarray | None
    records: np.ndarray | None
    coordinates: np.ndarray | None = None
    signs: np.ndarray | None = None

    def gradient(self, number: int, parameters: int) -> np.ndarray:
        """Canary ``number``'s unit direction ``(P,)`` (gradient canaries)."""
        if self.coordinates is None:
            return self.directions[number]
        vector = np.zeros(parameters)
        vector[self.coordinates[number]] = self.signs[number]
        return vector


def draw_canaries(job: OneRunJob, run: int) -> Canaries:
    """The canaries of ``run``, drawn from the audit's seed before training (nothing depends on the run).

    Positions and inclusion bits are drawn first, so the two choices of directions include the same canaries."""
    mech = job.mechanism
    rng = np.random.default_rng(np.random.SeedSequence(job.settings.seed, spawn_key=(_TAG, run, 0)))
    positions = rng.choice(mech.n_records, job.canaries, replace=False) + 1
    included = rng.integers(0, 2, job.canaries)
    if job.kind == "gradient" and job.directions == "dirac":
        coordinates = dirac_coordinates(rng, job.canaries, mech.parameter_count)
        signs = rng.choice(np.array([-1.0, 1.0]), job.canaries)
        return Canaries(positions, included, None, None, coordinates, signs)
    if job.kind == "gradient":
        directions = rng.standard_normal((job.canaries, mech.parameter_count))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        return Canaries(positions, included, directions, None)
    features = rng.standard_normal((job.canaries, mech.record_dim - 1))
    features /= np.linalg.norm(features, axis=1, keepdims=True)  # records have norm <= 1 (models.data)
    labels = rng.integers(0, mech.classes, job.canaries)
    return Canaries(positions, included, None, np.column_stack([features, labels]))


def canary_dataset(job: OneRunJob, canaries: Canaries) -> Dataset:
    """The user's data with the canaries in place: an excluded canary's record contributes a zero gradient."""
    mech = job.mechanism
    records = np.array(mech.default_dataset().records)
    zero = np.zeros(mech.parameter_count)
    injected: dict[int, np.ndarray] = {}
    for number, position in enumerate(canaries.positions.tolist()):
        if canaries.records is None:
            injected[position] = (mech.clip * canaries.gradient(number, mech.parameter_count)
                                  * canaries.included[number])
        elif canaries.included[number]:
            records[position - 1] = canaries.records[number]
        else:
            injected[position] = zero
    return Dataset(records, injected)


def train(job: OneRunJob, run: int) -> tuple[Canaries, np.ndarray]:
    """Train once with run ``run``'s canaries: the canaries and the final parameters ``(P,)``."""
    canaries = draw_canaries(job, run)
    seed = np.random.SeedSequence(job.settings.seed, spawn_key=(_TAG, run, 1))
    outputs = job.mechanism.sample(canary_dataset(job, canaries), trials=1, seed=seed)
    return canaries, np.asarray(outputs[0, -job.mechanism.parameter_count:], dtype=np.float64)  # the last iterate


def train_and_score(job: OneRunJob, run: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Train once with run ``run``'s canaries; its scores (``audit.jobs.one_run_scores``) and inclusion bits."""
    start = time.perf_counter()
    canaries, final = train(job, run)
    return canary_scores(job, canaries, final), canaries.included.astype(np.float64), time.perf_counter() - start
