"""Target records of ``model``'s input canary: taken from the data, given, or crafted before any trial.

A target is a record ``(features..., label)`` that ``S`` holds at the canary
position and ``S'`` does not (or holds another record there). Crafted targets
read only public information: the initial parameters and the other records
(what the adversary of differential privacy knows), never a trial.

``"gradient-aligned"`` (the default)
    the input whose clipped gradient at the start has the largest part where
    the other records' clipped gradients do not reach: among candidates (the
    blank input, plus and minus each feature axis and the data's least-varying
    principal directions, at norms 1, 2, 4 and 8, with every label) the one
    maximising ``c^T (s I + G^T G)^{-1} c``, ``c`` its clipped gradient, ``G``
    the other records' clipped gradients and ``s = (sigma C)^2`` the step
    noise's variance. Along a direction the others' gradients span, they move
    with the parameters and pull a step back (or, under subsampling, add
    variance); off their span only the noise competes (Nasr et al. 2021 and
    2023: a canary whose gradient the other records do not share).
``"blank"``
    all-zero features (Annamalai and De Cristofaro 2024).
``"clipbkd"``
    the data's least-varying principal direction at the records' mean norm
    (Jagielski et al. 2020, ClipBKD).
``"mislabelled"``
    the data's record at the canary position with another label.
``"direction"``
    unit features along the canary direction ``u`` with label 1 (its twin
    label 0): the input canary of earlier releases.
an integer ``k``, a list, or a file
    record ``k`` of the data (1-based) with its own label; the features and
    label given (``[x1, ..., xF, label]``); or a ``.npy``/``.csv`` file of one
    such row.

Crafted targets other than ``"direction"`` take the label the start finds
least likely (Annamalai and De Cristofaro's choice): its loss, and with it
its gradient, is large. The twin of a target (pair ``"opposite"``) has the
same features and the label the start finds most likely among the others.

References
----------
Jagielski, Ullman, Oprea 2020, "Auditing Differentially Private Machine Learning: How Private is Private SGD?"
(ClipBKD); Nasr, Song, Thakurta, Papernot, Carlini 2021, "Adversary Instantiation: Lower Bounds for
Differentially Private Machine Learning"; Nasr et al. 2023, "Tight Auditing of Differentially Private Machine
Learning"; Annamalai, De Cristofaro 2024, "Nearly Tight Black-Box Auditing of Differentially Private Machine
Learning".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import is_integer, is_real, suggestion

__all__ = ["CRAFTED", "SCALES", "TARGETS", "Candidates", "check_target", "given_record", "least_varying", "target_table",
           "torch_rows"]

TARGETS = ("gradient-aligned", "blank", "clipbkd", "mislabelled", "direction")
CRAFTED = frozenset({"gradient-aligned", "blank", "clipbkd"})
#: norms of the gradient-aligned candidates (records of the data have norm at most 1)
SCALES = (1.0, 2.0, 4.0, 8.0)
#: most other records whose gradients describe their span (evenly spaced over the data)
SPAN_RECORDS = 512
#: most feature axes tried (the least-varying ones when there are more)
AXES = 128
#: least-varying principal directions of the data tried
DIRECTIONS = 8
#: candidate gradients evaluated at once (memory: this many times the parameter count)
CHUNK = 256


def check_target(value: Any) -> Any:
    """``value`` as a canary target (a name, a 1-based record index, a tuple of numbers, or a path).

    Raises
    ------
    ParameterError
        Naming ``canary target`` and the value.
    """
    if value is None or (is_integer(value) and int(value) >= 1):
        return None if value is None else int(value)
    if isinstance(value, str):
        if value in TARGETS or Path(value).expanduser().is_file():
            return value
        raise ParameterError(f"canary target must be one of {', '.join(TARGETS)}, a record index (1-based), a list "
                             f"[features..., label] or a .npy/.csv file of one record, got "
                             f"target={value!r}{suggestion(value, TARGETS)}")
    if isinstance(value, (list, tuple, np.ndarray)):
        values = np.asarray(value, dtype=object).ravel()
        if values.size >= 2 and all(is_real(v) for v in values) and np.all(np.isfinite(values.astype(float))):
            return tuple(float(v) for v in values)
    raise ParameterError(f"canary target must be one of {', '.join(TARGETS)}, a record index (1-based), a list "
                         f"[features..., label] of finite numbers or a file, got target={_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def given_record(value: Any, data: np.ndarray, classes: int) -> tuple[np.ndarray, str]:
    """The record a target index, list or file names, checked against the data's layout."""
    width = data.shape[1]
    if is_integer(value):
        if not 1 <= value <= data.shape[0]:
            raise ParameterError(f"canary target must be a record index in 1..{data.shape[0]}, got target={value}")
        return np.array(data[value - 1], dtype=float), f"record {value} of the data, with its own label"
    if isinstance(value, tuple):
        record, where = np.asarray(value, dtype=float), "the record given"
    else:
        path = Path(value).expanduser()
        try:
            record = (np.load(path, allow_pickle=False) if path.suffix == ".npy"
                      else np.loadtxt(path, delimiter="," if path.suffix == ".csv" else None, ndmin=1))
        except (ValueError, OSError, EOFError):
            raise ParameterError(f"canary target file {path.name!r} is not a .npy or .csv row of numbers") from None
        record, where = np.asarray(record, dtype=float).ravel(), f"the record of file {path.name!r}"
    if record.size != width:
        raise ParameterError(f"canary target must have {width} numbers (the features, then the label), got "
                             f"{record.size}")
    label = record[-1]
    if not np.isfinite(record).all() or label != round(label) or not 0 <= label < classes:
        raise ParameterError(f"canary target's label (its last number) must be an integer in 0..{classes - 1}, got "
                             f"{label:g}")
    return record, where


@dataclasses.dataclass(frozen=True)
class Candidates:
    """What crafting reads at the start: logits and clipped gradients of inputs, the noise, the others.

    ``logits(x)`` and ``gradients(x, y)`` take ``(k, F)`` features (and ``(k,)`` labels) and return
    ``(k, C)`` logits and ``(k, P)`` clipped gradients at the public initial parameters.
    """

    logits: Any
    gradients: Any
    noise_variance: float
    classes: int

    def least_likely(self, features: np.ndarray) -> np.ndarray:
        """The label each input's logits find least likely (one logit: the class its sign does not favour)."""
        z = self.logits(features)
        if z.shape[1] == 1:
            return (z[:, 0] < 0).astype(float)  # z < 0 favours class 0: class 1 is the less likely
        return np.argmin(z, axis=1).astype(float)

    def most_likely_other(self, features: np.ndarray, label: float) -> float:
        """The label the start finds most likely among those other than ``label`` (the twin's)."""
        if self.classes == 2:
            return 1.0 - label
        z = self.logits(features[None])[0].copy()
        z[int(label)] = -np.inf
        return float(np.argmax(z))

    def aligned(self, others: np.ndarray, data_features: np.ndarray) -> tuple[np.ndarray, str]:
        """The gradient-aligned target (module docstring) and a sentence saying how it was found."""
        rows = np.linspace(0, len(others) - 1, min(len(others), SPAN_RECORDS)).round().astype(int)
        singular, basis = _span(self.gradients(others[rows, :-1], others[rows, -1]))
        s = self.noise_variance
        lost = 1.0 / s - 1.0 / (s + singular**2)  # what a component along each basis vector loses
        inputs = _candidate_inputs(data_features)
        best, best_value = None, -np.inf
        labels = np.arange(self.classes, dtype=float)
        pairs = [(i, y) for i in range(len(inputs)) for y in labels]
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start:start + CHUNK]
            x = inputs[[i for i, _ in chunk]]
            c = self.gradients(x, np.array([y for _, y in chunk]))
            along = c @ basis.T
            value = (c * c).sum(axis=1) / s - (along**2 * lost).sum(axis=1)
            top = int(np.argmax(value))
            if value[top] > best_value * (1 + 1e-12):
                best, best_value = chunk[top], float(value[top])
        x, label = inputs[best[0]], best[1]
        c = self.gradients(x[None], np.array([label]))[0]
        strong = basis[singular**2 > s]
        off = np.linalg.norm(c - (c @ strong.T) @ strong) / max(np.linalg.norm(c), 1e-300)
        sentence = (f"gradient-aligned (Nasr et al. 2021, 2023): the best of {len(pairs)} candidate records (the "
                    f"blank input, each feature axis and the data's {DIRECTIONS} least-varying principal directions, "
                    f"both signs, at norms {', '.join(f'{r:g}' for r in SCALES)}, every label) by its clipped "
                    f"gradient's part off the span of {len(rows)} other records' clipped gradients at the start: "
                    f"norm {np.linalg.norm(x):.3g}, label {int(label)}; {100 * off:.0f}% of its clipped gradient "
                    f"lies outside the directions where the others' gradients exceed the step noise")
        return np.append(x, label), sentence


def _span(gradients: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Singular values and right singular vectors (rows) of ``gradients`` ``(k, P)``, from the eigenvectors of
    the smaller Gram matrix (faster than a full SVD); directions of zero singular value are left out."""
    if gradients.shape[0] <= gradients.shape[1]:
        values, left = np.linalg.eigh(gradients @ gradients.T)
        keep = values > values.max(initial=0.0) * 1e-12
        singular = np.sqrt(values[keep])
        return singular, (left[:, keep].T @ gradients) / singular[:, None]
    values, right = np.linalg.eigh(gradients.T @ gradients)
    keep = values > values.max(initial=0.0) * 1e-12
    return np.sqrt(values[keep]), right[:, keep].T


def _candidate_inputs(features: np.ndarray) -> np.ndarray:
    """Blank, plus and minus axes and least-varying principal directions, at each norm of :data:`SCALES`."""
    width = features.shape[1]
    spread = features.std(axis=0)
    axes = np.argsort(spread, kind="stable")[:AXES]
    centred = features - features.mean(axis=0)
    _, _, principal = np.linalg.svd(centred, full_matrices=False)
    directions = [np.eye(width)[j] for j in sorted(axes)] + list(principal[::-1][:DIRECTIONS])
    units = np.array([sign * d for d in directions for sign in (1.0, -1.0)])
    return np.vstack([np.zeros((1, width))] + [r * units for r in SCALES])


def least_varying(features: np.ndarray) -> np.ndarray:
    """The data's least-varying principal direction at the records' mean norm (ClipBKD's input)."""
    centred = features - features.mean(axis=0)
    _, _, principal = np.linalg.svd(centred, full_matrices=False)
    direction = principal[-1] if principal.shape[0] == features.shape[1] else _null_direction(principal)
    if direction[np.argmax(np.abs(direction))] < 0:
        direction = -direction
    return direction * float(np.linalg.norm(features, axis=1).mean())


def _null_direction(principal: np.ndarray) -> np.ndarray:
    """A unit vector orthogonal to every row of ``principal`` (fewer records than features)."""
    _, _, full = np.linalg.svd(principal, full_matrices=True)
    return full[-1]


def target_table(target: Any, candidates: Candidates, data: np.ndarray, background: np.ndarray, position: int,
                 direction_records: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray, str]:
    """``(record, twin, description)`` of ``target`` (module docstring) at the 1-based ``position``.

    ``data``: the mechanism's own records (a target index reads them); ``background``: the canary
    background, whose records other than ``position`` are the others; ``direction_records``: the record
    and twin of ``target="direction"``.
    """
    features = np.asarray(data[:, :-1], dtype=float)
    if target == "direction":
        record, twin = direction_records
        return record, twin, ("direction: unit features along the canary direction, label 1; its twin label 0 "
                              "(the input canary of earlier releases)")
    if target == "gradient-aligned":
        others = np.delete(np.asarray(background, dtype=float), position - 1, axis=0)
        record, sentence = candidates.aligned(others, features)
    elif target in ("blank", "clipbkd", "mislabelled"):
        if target == "blank":
            x = np.zeros(features.shape[1])
            sentence = "blank: all-zero features (Annamalai and De Cristofaro 2024)"
        elif target == "clipbkd":
            x = least_varying(features)
            sentence = ("clipbkd: the data's least-varying principal direction at the records' mean norm "
                        "(Jagielski et al. 2020)")
        else:
            x = np.array(background[position - 1, :-1], dtype=float)
            own = int(background[position - 1, -1])
            sentence = f"mislabelled: the record at position {position} (label {own})"
        label = float(candidates.least_likely(x[None])[0])
        if target == "mislabelled" and label == background[position - 1, -1]:
            label = candidates.most_likely_other(x, label)
        record = np.append(x, label)
        sentence += f", label {int(label)}: the class the start finds least likely"
    else:
        record, sentence = given_record(target, np.asarray(data), candidates.classes)
    twin = record.copy()
    twin[-1] = candidates.most_likely_other(record[:-1], record[-1])
    return record, twin, sentence


def torch_rows(values: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """``values`` as a float tensor of ``dtype`` (a helper for the mechanism's closures)."""
    return torch.as_tensor(np.array(values, dtype=np.float64), dtype=dtype)
