"""The learned scores ``logistic`` and ``mlp``: classifiers fitted on calibration trials, returning the logit.

Both standardise the outputs with the calibration mean and spread and are
trained full-batch on the mean binary cross-entropy of telling ``S'``
(label 1) from ``S`` (label 0).

- ``logistic``: logistic regression, fitted in NumPy by Newton's method
  with a backtracking line search (a convex problem: the optimiser only
  decides how fast the one optimum is reached). No torch, and not
  ``scipy.optimize`` (about 0.7 s to import). ``fit_logistic_counted`` fits
  the same regression on distinct rows with the number of trials of each
  side at each (the ``discrete`` score's outcomes).
- ``mlp``: one hidden layer of ReLU units, fitted by Adam (Kingma & Ba
  2015) written out on torch tensors, with the gradient of the loss written
  out too: the floats torch's autograd gives, without its engine. Any
  ``torch.optim`` optimiser imports ``torch._dynamo`` when it is built
  (about 2.8 s, the largest part of a process's first audit), so neither
  score uses one.

References
----------
Kingma, D. P. and Ba, J. (2015). Adam: a method for stochastic optimization. ICLR.
Nocedal, J. and Wright, S. J. (2006). Numerical Optimization, 2nd ed., ch. 3 (Newton's method,
backtracking line search with the Armijo condition).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit, log_expit

from dpaudit.core.errors import ParameterError

__all__ = ["fit_logistic", "fit_logistic_counted", "fit_mlp"]

ScoreFunction = Callable[[np.ndarray], np.ndarray]

LOGISTIC_ITERATIONS = 50  #: Newton steps at most (a handful reach the optimum of a non-separable problem)
ARMIJO = 1e-4  #: the line search's sufficient decrease
MLP_STEPS, MLP_LEARNING_RATE = 300, 1e-2  #: Adam steps and step size
ADAM_BETAS, ADAM_EPS = (0.9, 0.999), 1e-8  #: Adam's moment decay rates and denominator floor (Kingma & Ba)


def _standardise(cal_a: np.ndarray, cal_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = np.concatenate([cal_a, cal_b]).astype(float)
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-12
    labels = np.concatenate([np.zeros(len(cal_a)), np.ones(len(cal_b))])
    return (x - mean) / std, labels, mean, std


def _newton(design: np.ndarray, positives: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The weights minimising the mean cross-entropy ``log(1 + e^z) - y z`` over the trials of ``design``'s rows.

    ``weights`` None: each row is one trial, ``positives`` its label (1: ``S'``). Else row ``i`` stands for
    ``weights[i]`` trials of which ``positives[i]`` are labelled 1 (the same optimum as the rows written out
    that many times). Newton's method with a backtracking line search, from all weights 0.
    """
    trials = len(positives) if weights is None else float(np.sum(weights))
    coefficients = np.zeros(design.shape[1])

    def loss(w: np.ndarray) -> float:
        logits = design @ w
        if weights is None:
            return float(np.mean(-log_expit(-logits) - positives * logits))  # log(1 + e^z) - y z, stable
        return float(np.sum(weights * -log_expit(-logits) - positives * logits) / trials)

    current = loss(coefficients)
    ridge = 1e-10 * np.eye(design.shape[1])  # keeps the Hessian invertible when a column is constant
    for _ in range(LOGISTIC_ITERATIONS):
        probabilities = expit(design @ coefficients)
        curvature = probabilities * (1 - probabilities)
        if weights is not None:
            probabilities, curvature = weights * probabilities, weights * curvature
        gradient = design.T @ (probabilities - positives) / trials
        if np.max(np.abs(gradient)) < 1e-10:
            break
        hessian = (design * curvature[:, None]).T @ design / trials + ridge
        step = np.linalg.solve(hessian, gradient)
        size = 1.0
        while size > 1e-8:
            candidate = coefficients - size * step
            value = loss(candidate)
            if value <= current - ARMIJO * size * float(gradient @ step):
                break
            size /= 2
        else:  # no decrease along the Newton direction: at the optimum up to rounding
            break
        coefficients, current = candidate, value
    return coefficients


def _linear_score(mean: np.ndarray, std: np.ndarray, weights: np.ndarray) -> ScoreFunction:
    coefficients, intercept = weights[:-1], weights[-1]

    def score(outputs: np.ndarray) -> np.ndarray:
        return ((np.asarray(outputs, dtype=float) - mean) / std) @ coefficients + intercept
    return score


def fit_logistic(cal_a: np.ndarray, cal_b: np.ndarray, *, seed: int) -> ScoreFunction:
    """Logistic regression on standardised outputs; the score is its logit ``w . x + b``.

    Minimises the mean cross-entropy ``mean(log(1 + e^z) - y z)`` by Newton's method with a
    backtracking line search, from all weights 0 (iteratively reweighted least squares' usual start, from
    which the damped iteration converges; ``seed`` is accepted for the fitting protocol and not used).
    """
    features, labels, mean, std = _standardise(cal_a, cal_b)
    design = np.hstack([features, np.ones((len(features), 1))])
    return _linear_score(mean, std, _newton(design, labels))


def fit_logistic_counted(rows: np.ndarray, count_a: np.ndarray, count_b: np.ndarray, *, seed: int) -> ScoreFunction:
    """:func:`fit_logistic` on calibration trials given as distinct rows and how many trials of each side
    hold each: ``rows[i]`` stands for ``count_a[i]`` trials of ``S`` and ``count_b[i]`` of ``S'``.

    The same regression as on the trials written out (the same standardisation, by the trials' mean and
    spread, and the same optimum; sums taken in another order, so equal up to rounding), at the cost of
    the distinct rows: a category-valued output of a few hundred outcomes is fitted on those, not on its
    10^5 calibration trials.
    """
    rows = np.asarray(rows, dtype=float)
    count_a, count_b = np.asarray(count_a, dtype=float), np.asarray(count_b, dtype=float)
    if rows.ndim != 2 or count_a.shape != (len(rows),) or count_b.shape != (len(rows),):
        raise ParameterError(f"rows must be a 2-d array with one count a side per row, got rows of shape "
                             f"{rows.shape}, count_a of shape {count_a.shape}, count_b of shape {count_b.shape}")
    weights = count_a + count_b
    trials = float(np.sum(weights))
    mean = weights @ rows / trials
    std = np.sqrt(weights @ (rows - mean) ** 2 / trials) + 1e-12
    design = np.hstack([(rows - mean) / std, np.ones((len(rows), 1))])
    return _linear_score(mean, std, _newton(design, count_b, weights))


def fit_mlp(cal_a: np.ndarray, cal_b: np.ndarray, *, hidden: int, seed: int) -> ScoreFunction:
    """A one-hidden-layer ReLU network on standardised outputs, trained by Adam; the score is its logit.

    Trained on one torch thread (restored after): these small full-batch problems run about ten times
    faster than with threads competing for the cores of a busy machine.
    """
    # torch loads when a network score is fitted, not with the scores' registry
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_mlp(cal_a, cal_b, hidden=hidden, seed=seed)
    finally:
        torch.set_num_threads(threads)


def _train_mlp(cal_a: np.ndarray, cal_b: np.ndarray, *, hidden: int, seed: int) -> ScoreFunction:
    # torch loads when a network score is fitted, not with the scores' registry
    import torch
    from torch.nn.functional import linear

    x, y, mean, std = _standardise(cal_a, cal_b)
    features, labels = torch.from_numpy(x), torch.from_numpy(y)
    generator = torch.Generator().manual_seed(seed)
    # the parameters of Linear(dim, hidden), ReLU, Linear(hidden, 1), in that order, drawn in that order
    shapes = [(hidden, features.shape[1]), (hidden,), (1, hidden), (1,)]
    parameters = [torch.randn(shape, generator=generator, dtype=torch.float64) * 0.1 for shape in shapes]
    w1, b1, w2, b2 = parameters
    (beta1, beta2), first, second = ADAM_BETAS, [torch.zeros_like(p) for p in parameters], \
        [torch.zeros_like(p) for p in parameters]
    # the three (rows, hidden) arrays of a step, written in place each step: fresh ones cost a quarter of the
    # time on thousands of calibration rows
    hidden_out, back, d_hidden = (torch.empty((features.shape[0], hidden), dtype=torch.float64) for _ in range(3))
    with torch.no_grad():
        for step in range(1, MLP_STEPS + 1):
            # the gradient of the mean binary cross-entropy, written out as torch's autograd computes it (the
            # same kernels in the same order: the same floats, checked against autograd in the tests), without
            # the autograd engine and module calls, about half of each step's time
            torch.addmm(b1, features, w1.t(), out=hidden_out).relu_()  # linear(features, w1, b1), then ReLU
            logits = linear(hidden_out, w2, b2)
            d_logits = (logits.squeeze(-1).sigmoid() - labels).div_(labels.numel()).unsqueeze(-1)
            torch.ops.aten.threshold_backward.grad_input(torch.mm(d_logits, w2, out=back), hidden_out, 0,
                                                         grad_input=d_hidden)
            gradients = (d_hidden.t().mm(features), d_hidden.sum(0), d_logits.t().mm(hidden_out), d_logits.sum(0))
            for parameter, gradient, m, v in zip(parameters, gradients, first, second):
                # Adam (Kingma & Ba, Algorithm 1), bias-corrected moments
                m.mul_(beta1).add_(gradient, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
                denominator = (v / (1 - beta2 ** step)).sqrt_().add_(ADAM_EPS)
                parameter.addcdiv_(m, denominator, value=-MLP_LEARNING_RATE / (1 - beta1 ** step))

    def score(outputs: np.ndarray) -> np.ndarray:
        inputs = torch.from_numpy((np.asarray(outputs, dtype=float) - mean) / std)
        with torch.no_grad():
            return linear(torch.relu(linear(inputs, w1, b1)), w2, b2).squeeze(-1).numpy().astype(float)
    return score
