"""The scores of a one-run audit's canaries, read from the final parameters (docs/theory.md 9).

A gradient canary's score is how far the parameters moved against its
direction ``u``: ``<u, theta_0 - theta_T>`` (the steps subtract gradients).
That shift also carries the data's own gradients, summed over the training:
on the CNN of ``examples/models/cnn`` they add about half the noise's
variance to each score, more than the other canaries do. Most of it is
predictable from what the auditor sees: the sum of the data's clipped
gradients at the public start ``theta_0`` and at the released ``theta_T``.
The shift is regressed on those two sums and a constant, layer by layer
(least squares over the layer's coordinates), and the canaries are scored on
what is left. The fit reads the released parameters and public information
only (the data, the start, the canaries' positions and directions, never
the inclusion bits), so the guesses remain a post-processing of the release
and the audit stays sound (Steinke, Nasr, Jagielski 2023: the guesses may
be any function of the output). A layer with fewer than
:data:`MIN_FIT_COORDINATES` coordinates is pooled with the other small ones,
and a pool that small is left as it is: a fit over few coordinates would
take the canaries' own shifts with it.

An input canary's score is minus its loss under the final model.

References
----------
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
docs/theory.md 9 (the data's drift and its fit, measured).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from dpaudit.mechanisms.iterative import clip_to_norm
from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.one_run_design import Canaries, OneRunJob

__all__ = ["FIT_COLUMNS", "MIN_FIT_COORDINATES", "canary_scores", "data_gradient_sum", "drift_residual",
           "fit_groups"]

FIT_COLUMNS = 3  #: columns of a layer's fit: a constant, the data's gradient sum at theta_0 and at theta_T
MIN_FIT_COORDINATES = 10 * FIT_COLUMNS  #: the fewest coordinates a fitted group holds
_CHUNK = 256  #: records per batch of per-example gradients


def data_gradient_sum(job: OneRunJob, canaries: Canaries, thetas: list[np.ndarray]) -> list[np.ndarray]:
    """For each of ``thetas`` (each ``(P,)``), the sum over the records the canaries left in place of their
    per-example gradients there, each clipped to the training's norm ``C``."""
    mech = job.mechanism
    stacked = mech._stacked()
    keep = np.ones(mech.n_records, dtype=bool)
    keep[canaries.positions - 1] = False  # positions are 1-based
    records = np.asarray(mech.default_dataset().records)[keep]
    sums = []
    for theta in thetas:
        flat = torch.as_tensor(theta, dtype=stacked.flat.dtype).unsqueeze(0)
        total = np.zeros(mech.parameter_count)
        for start in range(0, len(records), _CHUNK):
            part = records[start:start + _CHUNK]
            inputs = torch.as_tensor(part[:, :-1], dtype=stacked.flat.dtype).unsqueeze(0)
            labels = torch.as_tensor(part[:, -1], dtype=stacked.flat.dtype).unsqueeze(0)
            gradients = per_example_gradients(stacked, flat, inputs, labels)[0].detach().double().numpy()
            total += clip_to_norm(gradients, float(mech.clip)).sum(axis=0)
        sums.append(total)
    return sums


def fit_groups(sizes: list[int]) -> list[np.ndarray]:
    """The coordinates of each fitted group, from the layers' sizes in flat order: a layer of at least
    :data:`MIN_FIT_COORDINATES` coordinates alone, the smaller layers together when they hold as many."""
    bounds = np.cumsum([0, *sizes])
    groups, small = [], []
    for size, start in zip(sizes, bounds[:-1]):
        coordinates = np.arange(start, start + size)
        (groups if size >= MIN_FIT_COORDINATES else small).append(coordinates)
    pooled = np.concatenate(small) if small else np.zeros(0, dtype=int)
    return groups + ([pooled] if pooled.size >= MIN_FIT_COORDINATES else [])


def drift_residual(shift: np.ndarray, columns: list[np.ndarray], groups: list[np.ndarray]) -> np.ndarray:
    """``shift`` less its least-squares fit, group by group, on a constant and ``columns`` (each ``(P,)``);
    coordinates in no group are returned as they are."""
    residual = shift.copy()
    for coordinates in groups:
        design = np.column_stack([np.ones(coordinates.size), *(column[coordinates] for column in columns)])
        beta, *_ = np.linalg.lstsq(design, shift[coordinates], rcond=None)
        residual[coordinates] = shift[coordinates] - design @ beta
    return residual


def canary_scores(job: OneRunJob, canaries: Canaries, final: np.ndarray, *, drift: bool = True) -> np.ndarray:
    """One score per canary from the final parameters ``final`` ``(P,)``, larger when included.

    Gradient canaries: the projection of the parameters' shift, with the data's drift fitted out
    (``drift=False``: the raw shift, as before the fit; benchmarks compare both)."""
    mech = job.mechanism
    if canaries.records is None:
        shift = mech.initial_parameters - final  # steps subtract the canary's gradient
        if drift:
            columns = data_gradient_sum(job, canaries, [mech.initial_parameters, final])
            shift = drift_residual(shift, columns, fit_groups(mech._stacked().sizes))
        if canaries.coordinates is not None:
            return canaries.signs * shift[canaries.coordinates]
        return canaries.directions @ shift
    # torch.func loads torch's compiler stack (seconds): only input canaries' scores need it
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
