"""What ``model`` tells an audit about records: target records, their directions and scores.

A mixin of :class:`~dpaudit.mechanisms.models.mechanism.ModelTraining`: the
hooks of :class:`~dpaudit.mechanisms.hooks.AuditHooks` that read records
under the model: the target record of an input canary (``targets``), the
output direction its pair moves along, the legacy crafted record and its
mislabelled twin, and a record's loss or logit margin under trained models
(the black-box scores ``canary-loss`` and ``logit-margin``).
"""

from __future__ import annotations

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.mechanisms.iterative import clip_to_norm
from dpaudit.mechanisms.models.networks import per_example_gradients
from dpaudit.mechanisms.models.starts import one_thread
from dpaudit.mechanisms.models.targets import (
    TARGETS,
    Candidates,
    check_target,
    given_record,
    target_table,
    torch_rows,
)

__all__ = ["ModelRecords"]

#: the target of a model's input canary when none is given
DEFAULT_TARGET = "gradient-aligned"


class ModelRecords:
    """Record hooks of a trained model (mixed into ``ModelTraining``)."""

    @property
    def chooses_targets(self) -> bool:
        return True

    def default_pair_for(self, kind: str) -> str:
        """An input canary's target is removed (add/remove) under Poisson batches, nulled (zero-out) under
        shuffled ones, and replaced by its twin (replace-one) where batches have a fixed size or records a
        fixed order; a gradient canary keeps :attr:`default_pair`."""
        if kind != "input" or self.algorithm == "pnsgd":
            return self.default_pair
        return {"poisson": "remove", "without-replacement": "opposite"}.get(self.sampling, "zero")

    def _start_gradients(self, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Clipped gradients ``(k, P)`` of the records ``(features, labels)`` at the public initial parameters."""
        stacked = self._stacked()
        x = torch_rows(features, stacked.flat.dtype).unsqueeze(0)
        y = torch_rows(labels, stacked.flat.dtype).unsqueeze(0)
        gradients = per_example_gradients(stacked, stacked.flat, x, y)[0].double().numpy()
        return clip_to_norm(gradients, float(self.clip))

    def _start_logits(self, features: np.ndarray) -> np.ndarray:
        """Logits ``(k, C)`` of inputs under the public initial parameters."""
        # torch.func loads torch's compiler stack (seconds): only record hooks need it
        from torch.func import functional_call

        stacked = self._stacked()
        with torch.no_grad():
            z = functional_call(stacked.model, (stacked.unflatten(stacked.flat[0]), stacked.buffers),
                                (torch_rows(features, stacked.flat.dtype),))
        return z.double().numpy()

    def _candidates(self) -> Candidates:
        return Candidates(self._start_logits, self._start_gradients,
                          float(self.noise_multiplier * self.clip) ** 2, self.classes)

    def check_input_target(self, target) -> None:
        """Refuse a target that does not fit the data: an index beyond it, a record of the wrong length or
        label, a file that does not hold one record (names and forms are checked by ``check_target``)."""
        target = check_target(target)
        if target is not None and target not in TARGETS:
            given_record(target, np.asarray(self.records), self.classes)

    def input_target(self, target, background: Dataset, position: int,
                     u: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """The target record (``targets`` module; default :data:`DEFAULT_TARGET`), its twin and how it was
        chosen, from the public start and the other records of ``background``."""
        target = check_target(target) or DEFAULT_TARGET
        self.check_input_target(target)
        legacy = self.canary_records(u)[:2] if target == "direction" else None
        with one_thread():
            return target_table(target, self._candidates(), np.asarray(self.records), np.asarray(background.records),
                                position, legacy)

    def input_direction(self, record: np.ndarray, other: np.ndarray | None) -> np.ndarray:
        """``c(record) - c(other)`` (``c``: the clipped gradient at the start; ``c(None) = 0``), normalised:
        steps subtract gradients, so outputs end larger along it under ``S'``."""
        rows = np.array([record] if other is None else [record, other], dtype=float)
        gradients = self._start_gradients(rows[:, :-1], rows[:, -1])
        difference = gradients[0] - (gradients[1] if other is not None else 0.0)
        norm = np.linalg.norm(difference)
        if not norm > 0:
            difference, norm = np.eye(self.parameter_count)[0], 1.0  # no gradient at the start: the first axis
        return difference / norm

    def canary_records(self, u: np.ndarray, *, reset: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A crafted record and its mislabelled twin: features along ``u``'s first coordinates, norm 1.

        Returns the record with label 1 (in ``S``), the same record with label 0
        (in ``S'``), and the output direction along which parameters end larger
        under ``S'``: the difference of the two records' gradients at the public
        initial parameters (steps subtract gradients).
        """
        if reset:
            raise ParameterError("canary kind 'reset' is not defined for mechanism 'model'")
        features = np.asarray(u, dtype=float)[: self.record_dim - 1].copy()
        if not np.linalg.norm(features) > 0:
            features = np.zeros(self.record_dim - 1)
            features[0] = 1.0
        features /= np.linalg.norm(features)
        record_a, record_b = np.append(features, 1.0), np.append(features, 0.0)
        stacked = self._stacked()
        inputs = torch.as_tensor(np.stack([features, features]), dtype=stacked.flat.dtype).unsqueeze(1)
        labels = torch.tensor([[1.0], [0.0]], dtype=stacked.flat.dtype)
        gradients = per_example_gradients(stacked, stacked.flat.expand(2, -1), inputs, labels)[:, 0]
        difference = (gradients[0] - gradients[1]).double().numpy()
        return record_a, record_b, difference / np.linalg.norm(difference)

    def record_score(self, outputs: np.ndarray, record: np.ndarray, name: str) -> np.ndarray:
        """The loss (``"canary-loss"``) or logit margin (``"logit-margin"``) of ``record`` under each trial's
        parameters ``outputs`` ``(trials, P)``, in one batched evaluation."""
        # torch.func loads torch's compiler stack (seconds): only the record scores need it
        from torch.func import functional_call, vmap

        stacked = self._stacked()
        theta = torch.as_tensor(outputs[:, -self.parameter_count:], dtype=stacked.flat.dtype)  # the last iterate
        x = torch.as_tensor(record[:-1], dtype=theta.dtype).unsqueeze(0)
        label = int(record[-1])

        def logits(flat):
            return functional_call(stacked.model, (stacked.unflatten(flat), stacked.buffers), (x,))[0]

        with torch.no_grad():
            z = vmap(logits)(theta)  # (trials, C)
            if z.shape[1] == 1:  # logistic: one logit for class 1
                signed = z[:, 0] if label == 1 else -z[:, 0]
                values = signed if name == "logit-margin" else torch.nn.functional.softplus(-signed)
            else:
                others = z.clone()
                others[:, label] = -torch.inf
                margin = z[:, label] - others.max(dim=1).values
                values = margin if name == "logit-margin" else -torch.log_softmax(z, dim=1)[:, label]
        return values.double().numpy()
