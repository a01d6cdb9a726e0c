"""Distinguishing scores: map a batch of outputs to one number per trial (larger under ``S'``).

Fitted scores are fitted on *calibration* trials only; :func:`fit_score`
is the one entry point, so no score can be fitted on the trials that
certify the bound.

========== ==========================================================
projection ``<output, direction>`` of the canary (no fitting)
gaussian   log-likelihood ratio of Gaussians fitted to each dataset
logistic   logistic regression on standardised outputs (torch, LBFGS)
mlp        a small two-layer network (torch, Adam)
exact      the mechanism's own exact log-likelihood ratio, if it has one
float-bits bit patterns of the released floats (``attacks.float_bits``)
step-*     every released step read apart (``attacks.steps``: step-max, step-mixture)
========== ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.float_bits import fit_float_bits
from dpaudit.attacks.steps import STEP_SCORES, fit_step_score
from dpaudit.mechanisms.errors import ParameterError
from dpaudit.mechanisms.validation import check_choice

__all__ = ["FITTED", "SCORES", "ScoreFunction", "fit_score", "is_fitted"]

ScoreFunction = Callable[[np.ndarray], np.ndarray]
SCORES = {
    "projection": "projection of the output on the canary direction",
    "gaussian": "log-likelihood ratio of Gaussians fitted on calibration trials",
    "logistic": "logistic regression fitted on calibration trials",
    "mlp": "small neural network fitted on calibration trials",
    "exact": "exact log-likelihood ratio supplied by the mechanism",
    "float-bits": "floating-point distinguisher: value windows crossed with significand bits",
    "canary-loss": "loss of the canary record under each trial's trained model (input canaries of models)",
    "logit-margin": "logit margin of the canary record's label under each trial's trained model",
    **STEP_SCORES,
}
MODEL_SCORES = ("canary-loss", "logit-margin")
FITTED = frozenset({"gaussian", "logistic", "mlp", "float-bits", *STEP_SCORES})  # scores fitted on calibration outputs
_MAX_FIT = 200_000  # calibration trials used to fit a learned score


def is_fitted(name: str) -> bool:
    """True when score ``name`` is fitted on calibration outputs (so calibration keeps raw outputs)."""
    return check_choice("score", name, SCORES) in FITTED


def fit_score(name: str, pair: CanaryPair, calibration_a: np.ndarray | None = None,
              calibration_b: np.ndarray | None = None, *, seed: int = 0) -> ScoreFunction:
    """Fit the score ``name`` on calibration outputs and return it.

    Parameters
    ----------
    name : str
        One of ``SCORES``.
    pair : CanaryPair
        The neighbouring pair (direction, datasets, mechanism).
    calibration_a, calibration_b : numpy.ndarray, optional
        Outputs of calibration trials on ``S`` and ``S'``; required by the
        fitted scores, never the trials that certify the bound.
    """
    check_choice("score", name, SCORES)
    if name == "projection":
        direction = np.asarray(pair.direction, dtype=float)
        return lambda outputs: np.asarray(outputs, dtype=float) @ direction
    if name == "exact":
        hook = getattr(pair.mechanism, "log_likelihood_ratio", None)
        if hook is None:
            raise ParameterError(f"score 'exact' needs a mechanism with an exact likelihood ratio, "
                                 f"{pair.mechanism.name!r} has none")
        def exact(outputs: np.ndarray) -> np.ndarray:
            return hook(np.asarray(outputs, dtype=float), pair.dataset_a, pair.dataset_b)
        simulate = getattr(pair.mechanism, "reference_scores", None)
        if simulate is not None:  # scores drawn from the known laws: thresholds chosen on them (audit.runner)
            exact.reference = lambda size, seed=0: simulate(pair.dataset_a, pair.dataset_b, size, seed)
        return exact
    if name in MODEL_SCORES:
        return _record_score(name, pair)
    if calibration_a is None or calibration_b is None or len(calibration_a) < 2 or len(calibration_b) < 2:
        raise ParameterError(f"score {name!r} is fitted and needs calibration trials on both datasets")
    cal_a = np.asarray(calibration_a, dtype=float)[:_MAX_FIT]
    cal_b = np.asarray(calibration_b, dtype=float)[:_MAX_FIT]
    if name == "gaussian":
        return _fit_gaussian(cal_a, cal_b)
    if name == "float-bits":
        return fit_float_bits(cal_a, cal_b)
    if name in STEP_SCORES:
        return fit_step_score(name, pair, cal_a, cal_b)
    return _fit_classifier(cal_a, cal_b, hidden=32 if name == "mlp" else 0, seed=seed)


def _record_score(name: str, pair: CanaryPair) -> ScoreFunction:
    """The canary record's loss or logit margin under the model each output describes (a mechanism hook)."""
    hook = getattr(pair.mechanism, "record_score", None)
    if hook is None:
        raise ParameterError(f"score {name!r} needs a mechanism that trains a model, {pair.mechanism.name!r} does not")
    if pair.kind != "input" or pair.index is None:
        raise ParameterError(f"score {name!r} scores the canary record: it needs canary kind 'input' at a "
                             f"position, got kind={pair.kind!r}")
    record = np.array(pair.dataset_a.records[pair.index - 1])
    return lambda outputs: hook(np.asarray(outputs, dtype=float), record, name)


def _fit_gaussian(cal_a: np.ndarray, cal_b: np.ndarray) -> ScoreFunction:
    """``log N(x; m_b, C_b) - log N(x; m_a, C_a)`` with a small ridge on the covariances."""
    def moments(x):
        mean = x.mean(axis=0)
        cov = np.atleast_2d(np.cov(x, rowvar=False))
        ridge = 1e-9 * max(float(np.trace(cov)) / cov.shape[0], 1e-300)
        cov = cov + ridge * np.eye(cov.shape[0])
        precision = np.linalg.inv(cov)
        _, logdet = np.linalg.slogdet(cov)
        return mean, precision, logdet

    mean_a, prec_a, logdet_a = moments(cal_a)
    mean_b, prec_b, logdet_b = moments(cal_b)

    def score(outputs: np.ndarray) -> np.ndarray:
        x = np.asarray(outputs, dtype=float)
        da, db = x - mean_a, x - mean_b
        quad_a = np.einsum("ij,jk,ik->i", da, prec_a, da)
        quad_b = np.einsum("ij,jk,ik->i", db, prec_b, db)
        return 0.5 * (quad_a - quad_b) + 0.5 * (logdet_a - logdet_b)
    return score


def _fit_classifier(cal_a: np.ndarray, cal_b: np.ndarray, *, hidden: int, seed: int) -> ScoreFunction:
    """Logistic regression (``hidden=0``) or a one-hidden-layer network; returns the logit."""
    x = np.concatenate([cal_a, cal_b])
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-12
    features = torch.from_numpy((x - mean) / std)
    labels = torch.cat([torch.zeros(len(cal_a)), torch.ones(len(cal_b))]).to(torch.float64)
    generator = torch.Generator().manual_seed(seed)
    dim = features.shape[1]
    if hidden:
        model = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1))
    else:
        model = torch.nn.Linear(dim, 1)
    model = model.to(torch.float64)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.1)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    if hidden:
        optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(300):
            optimiser.zero_grad()
            loss = loss_fn(model(features).squeeze(-1), labels)
            loss.backward()
            optimiser.step()
    else:
        optimiser = torch.optim.LBFGS(model.parameters(), max_iter=200, line_search_fn="strong_wolfe")

        def closure():
            optimiser.zero_grad()
            loss = loss_fn(model(features).squeeze(-1), labels)
            loss.backward()
            return loss
        optimiser.step(closure)
    model.eval()

    def score(outputs: np.ndarray) -> np.ndarray:
        inputs = torch.from_numpy((np.asarray(outputs, dtype=float) - mean) / std)
        with torch.no_grad():
            return model(inputs).squeeze(-1).numpy().astype(float)
    return score
