"""The one-run design: ``m`` canaries inserted into one training run (or a few pooled), docs/theory.md 9.

A model too large to train thousands of times is audited in one run
(Steinke, Nasr, Jagielski 2023): ``m`` canaries take the places of ``m``
records of the user's data, each included with probability 1/2, drawn from
the seed before the run. An excluded canary is a record whose gradient is
zero (under Poisson sampling the same as no record: add/remove; under fixed
batches a zero-out neighbour).

- ``kind = "gradient"``: the canary's gradient is ``C u`` for a random unit
  direction ``u`` of parameter space (white box, or the final model: the
  score reads the parameters), scored by how far the parameters moved against
  ``u``, ``<u, theta_0 - theta_T>``.
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
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from dpaudit.auditing.jobs.fingerprint import code_fingerprint
from dpaudit.auditing.statistics.one_run_fdp import METHODS
from dpaudit.auditing.statistics.settings import AuditSettings
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, check_int
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.models.networks import Stacked

__all__ = ["DESIGNS", "MAX_RUNS", "ONE_RUN_DEFAULTS", "ONE_RUN_KINDS", "OneRunJob", "canary_scores", "draw_canaries",
           "train_and_score"]

DESIGNS = ("many-runs", "one-run")
ONE_RUN_KINDS = ("gradient", "input")
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
    method : {"fdp", "steinke"}
        The estimator whose bound the verdict uses, chosen before the run.
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

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, Mechanism) or self.mechanism.name != "model":
            shown = self.mechanism.name if isinstance(self.mechanism, Mechanism) else self.mechanism
            raise ParameterError(f"design='one-run' trains a model: it needs mechanism 'model', got {shown!r}")
        check_choice("kind", self.kind, ONE_RUN_KINDS)
        check_choice("one_run_method", self.method, METHODS)
        n = self.mechanism.n_records
        check_int("canaries", self.canaries, minimum=2, maximum=n)
        check_int("runs", self.runs, minimum=1, maximum=MAX_RUNS)

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
        text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def violated(self, result: Any) -> bool:
        return result.verdict == "violation" or (
            self.claimed_epsilon is not None and result.epsilon_lower_bound > self.claimed_epsilon)


@dataclasses.dataclass(frozen=True)
class Canaries:
    """One run's canaries: 1-based positions, inclusion bits, and directions (gradient) or records (input)."""

    positions: np.ndarray
    included: np.ndarray
    directions: np.ndarray | None
    records: np.ndarray | None


def draw_canaries(job: OneRunJob, run: int) -> Canaries:
    """The canaries of ``run``, drawn from the audit's seed before training (nothing depends on the run)."""
    mech = job.mechanism
    rng = np.random.default_rng(np.random.SeedSequence(job.settings.seed, spawn_key=(_TAG, run, 0)))
    positions = rng.choice(mech.n_records, job.canaries, replace=False) + 1
    included = rng.integers(0, 2, job.canaries)
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
        if canaries.directions is not None:
            injected[position] = mech.clip * canaries.directions[number] * canaries.included[number]
        elif canaries.included[number]:
            records[position - 1] = canaries.records[number]
        else:
            injected[position] = zero
    return Dataset(records, injected)


def canary_scores(job: OneRunJob, canaries: Canaries, final: np.ndarray) -> np.ndarray:
    """One score per canary from the final parameters ``final`` ``(P,)``, larger when included."""
    mech = job.mechanism
    if canaries.directions is not None:
        return canaries.directions @ (mech.initial_parameters - final)  # steps subtract the canary's gradient
    # torch.func loads torch's compiler stack (seconds): only one-run scores need it
    from torch.func import functional_call

    stacked = Stacked(mech._template)
    theta = torch.as_tensor(final, dtype=stacked.flat.dtype)
    inputs = torch.as_tensor(canaries.records[:, :-1], dtype=theta.dtype)
    labels = torch.as_tensor(canaries.records[:, -1], dtype=torch.long)
    with torch.no_grad():
        logits = functional_call(stacked.model, (stacked.unflatten(theta), stacked.buffers), (inputs,))
        if logits.shape[1] == 1:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                logits[:, 0], labels.to(theta.dtype), reduction="none")
        else:
            loss = torch.nn.functional.cross_entropy(logits, labels, reduction="none")
    return -loss.double().numpy()


def train_and_score(job: OneRunJob, run: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Train once with run ``run``'s canaries; its scores and inclusion bits."""
    start = time.perf_counter()
    canaries = draw_canaries(job, run)
    seed = np.random.SeedSequence(job.settings.seed, spawn_key=(_TAG, run, 1))
    outputs = job.mechanism.sample(canary_dataset(job, canaries), trials=1, seed=seed)
    final = np.asarray(outputs[0, -job.mechanism.parameter_count:], dtype=np.float64)  # the last iterate
    return canary_scores(job, canaries, final), canaries.included.astype(np.float64), time.perf_counter() - start
