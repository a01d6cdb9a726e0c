"""One effect per value in the coordinates a pair moves alike: the value counts of the ``discrete`` score.

The ``discrete`` score (``attacks.discrete``) models an outcome's log-ratio by a
logistic regression on one-hot columns, one effect per coordinate and
value. Where the output has one coordinate per record (an answer per
query, as in the sparse vector technique) and the pair moves several
records alike, a value may instead have one effect in all of them: the
regression on the number of coordinates of each group at each value. At
epsilon 0.1 the per-coordinate effects are about as large as their noise
on the calibration trials, and the counts order the outcomes as their
likelihood ratio does where the coordinates are alike. Where the output
mixes sentinel codes with released values (SVT3's noisy answers), the
codes are counted the same way and each group's values are summed: one
slope per group. Akaike's criterion chooses between the two models on the
calibration trials, so the choice costs no confidence.

References
----------
docs/theory.md 7 (one effect per value in coordinates moved alike);
Akaike, H. (1974), "A new look at the statistical model identification",
IEEE Transactions on Automatic Control 19.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Union

import numpy as np

from dpaudit.attacks.classifiers import fit_logistic, fit_logistic_counted
from dpaudit.core.errors import ParameterError

if TYPE_CHECKING:
    from dpaudit.attacks.canaries import CanaryPair
    from dpaudit.attacks.discrete import Encoding
    from dpaudit.attacks.score_protocol import ScoreFunction

__all__ = ["POOLING_PENALTY", "Counted", "free_parameters", "log_likelihood", "pool_values", "record_groups",
           "value_counts"]

#: The value-count model is taken unless the per-coordinate model's calibration log-likelihood is higher by
#: more than this many nats per parameter it adds: Akaike's criterion (docs/theory.md 7)
POOLING_PENALTY = 1.0


class Counted(NamedTuple):
    """Calibration trials as distinct rows: ``rows[i]`` stands for ``count_a[i]`` trials of ``S`` and
    ``count_b[i]`` of ``S'`` (a category-valued output: a few hundred outcomes for 10^5 trials)."""

    rows: np.ndarray
    count_a: np.ndarray
    count_b: np.ndarray


#: Calibration trials: each side's rows written out, or :class:`Counted`
Calibration = Union[tuple[np.ndarray, np.ndarray], Counted]


def log_likelihood(classifier: ScoreFunction, features_a: np.ndarray | Counted,
                   features_b: np.ndarray | None = None) -> float:
    """The calibration log-likelihood of a logistic classifier (label 1: ``S'``), on each side's rows or on
    :class:`Counted` rows (``features_b`` None)."""
    # SciPy's special functions load for the counted regression only
    from scipy.special import log_expit

    if isinstance(features_a, Counted):
        logits = classifier(features_a.rows)
        return float(features_a.count_a @ log_expit(-logits) + features_a.count_b @ log_expit(logits))
    return float(np.sum(log_expit(-classifier(features_a))) + np.sum(log_expit(classifier(features_b))))


def _fit(calibration: Calibration, columns: np.ndarray, *, seed: int) -> ScoreFunction:
    """The logistic regression on ``calibration``'s rows taken to ``columns`` (``rows @ columns``)."""
    if isinstance(calibration, Counted):
        return fit_logistic_counted(calibration.rows @ columns, calibration.count_a, calibration.count_b, seed=seed)
    features_a, features_b = calibration
    return fit_logistic(features_a @ columns, features_b @ columns, seed=seed)


def _log_likelihood(classifier: ScoreFunction, calibration: Calibration) -> float:
    return log_likelihood(classifier, calibration) if isinstance(calibration, Counted) else \
        log_likelihood(classifier, *calibration)


def value_counts(encoding: Encoding, groups: np.ndarray) -> np.ndarray | None:
    """The matrix taking an encoding's columns to the number of coordinates of each group at each value, and
    the sum of each group's released values.

    ``groups`` labels each coordinate. Row ``c`` (a column of :meth:`Encoding.features`) has a single 1: a
    category's column (coordinate ``j`` at value ``v``) in the column of ``(groups[j], v)``, a sentinel's
    flag in that of ``(groups[j], sentinel)``, and a value (a mixed coordinate's, 0 where a sentinel is
    flagged, or a continuous one) in the column of ``groups[j]``'s values, which sums them. None when no
    group holds a value, a sentinel or a released value in two coordinates (the columns would be the
    encoding's again).
    """
    groups = np.asarray(groups)
    if groups.shape != (len(encoding.levels),):
        raise ParameterError(f"groups must label each of the {len(encoding.levels)} coordinates, "
                             f"got groups of shape {groups.shape}")
    keys: list[tuple] = []
    for label, level, sentinel in zip(groups.tolist(), encoding.levels, encoding.sentinels):
        if level is not None:
            keys += [(label, "category", float(value)) for value in level]
        else:
            keys += [(label, "sentinel", float(value)) for value in sentinel] + [(label, "value")]
    columns = {key: number for number, key in enumerate(dict.fromkeys(keys))}
    if len(columns) == len(keys):
        return None
    matrix = np.zeros((len(keys), len(columns)))
    matrix[np.arange(len(keys)), [columns[key] for key in keys]] = 1.0
    return matrix


def record_groups(pair: CanaryPair, coordinates: int) -> np.ndarray | None:
    """Coordinates grouped by how the pair moves the record of the same index, or None.

    Where the output has one coordinate per record (an answer per query, as in the sparse vector
    technique), coordinate ``j`` is labelled by the signs of ``S'``'s record ``j`` less ``S``'s: the
    coordinates of records moved alike (all up, all down, unchanged) share a label. None when the records
    cannot be matched to coordinates (another number of records, or datasets without records).
    """
    first, second = getattr(pair.dataset_a, "records", None), getattr(pair.dataset_b, "records", None)
    if first is None or second is None:
        return None
    first, second = np.asarray(first), np.asarray(second)
    if first.shape != second.shape or first.ndim == 0 or first.shape[0] != coordinates or coordinates < 2:
        return None
    try:
        signs = np.sign(second.astype(float) - first.astype(float)).reshape(coordinates, -1)
    except (TypeError, ValueError):
        return None
    return np.unique(signs, axis=0, return_inverse=True)[1].ravel()


def free_parameters(distinct: np.ndarray) -> int:
    """The parameters a logistic regression on these columns (and an intercept) can fit: the rank of the
    design over the distinct rows seen."""
    return int(np.linalg.matrix_rank(np.hstack([distinct, np.ones((distinct.shape[0], 1))])))


def pool_values(encoding: Encoding, calibration: Calibration, distinct: np.ndarray,
                per_coordinate: ScoreFunction, groups: np.ndarray | None, *, seed: int,
                likelihood: float | None = None) -> tuple[ScoreFunction, str]:
    """The ``discrete`` score's regression: the per-coordinate classifier, or one on the value counts of
    each group when Akaike's criterion prefers it.

    The value-count model gives a value one effect in every coordinate of a group (an "above" at the
    third query weighs what one at the seventh does when both answers moved up; a released value one
    slope in all of them), :data:`POOLING_PENALTY` nats per parameter it saves; it is taken unless the
    per-coordinate model's calibration log-likelihood (``likelihood``, computed when None) beats it by
    more than that. ``calibration`` holds the encoded calibration trials (each side's rows, or
    :class:`Counted` rows). ``distinct`` holds the encoded rows the parameters are counted on (the distinct
    rows seen, or all of them). Returns the classifier (on the encoding's columns) and "value counts" or
    "coordinates".
    """
    counts = None if groups is None else value_counts(encoding, groups)
    if counts is None:
        return per_coordinate, "coordinates"
    saved = free_parameters(distinct) - free_parameters(distinct @ counts)
    if saved <= 0:
        return per_coordinate, "coordinates"
    fitted = _fit(calibration, counts, seed=seed)

    def pooled(features: np.ndarray) -> np.ndarray:
        return fitted(features @ counts)
    if likelihood is None:
        likelihood = _log_likelihood(per_coordinate, calibration)
    if likelihood - _log_likelihood(pooled, calibration) > POOLING_PENALTY * saved:
        return per_coordinate, "coordinates"
    return pooled, "value counts"
