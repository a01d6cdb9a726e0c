"""Every iterate of DP-SGD released: the exact likelihood ratio of the steps and its law (docs/theory.md 6).

With the linear loss on the whole space (no projection) and a public start,
the released iterates give back every step's noisy batch sum ``y_t = m (theta_{t-1}
- theta_t) / eta`` (after undoing the Laplacian smoothing of DP-LSSGD), with
``y_t = (sum of the batch's gradients) + N(0, s^2 I)``, ``s = noise_std * m``.
When every record but the canary has the same gradient ``c``, the laws are
known:

* Poisson (then ``c = 0``) and sampling without replacement: ``z_t = y_t - m c``
  is ``d B_t + N(0, s^2 I)`` with ``B_t`` i.i.d. Bernoulli(``q``) and
  ``d = g - c`` (``g`` the canary's gradient), so
  ``log p(z) = sum_t log(1 - q + q exp(a_t))`` with
  ``a_t = (<z_t, d> - |d|^2 / 2) / s^2`` (up to a term common to both datasets).
* Shuffled batches: the canary is in one uniform batch ``tau`` of each epoch
  (``shuffle``: independent epochs; ``shuffle-once``: the same ``tau``), so
  ``log p = sum_epochs log mean_tau exp(a_tau)`` (a partial last epoch counts
  the batches it did not reach as ``a = 0``), or
  ``log mean_tau exp(sum_epochs a_(e, tau))`` for ``shuffle-once``.

The score is ``log p_S'(out) - log p_S(out)`` (larger under ``S'``). For
subsampled batches with parallel ``d`` it is a sum of i.i.d. one-dimensional
terms, whose law (discretised, convolved by FFT) gives the audit's ceiling
exactly. For shuffled batches it is not, and the law, hence the ceiling, is
simulated from the exact laws above: ``SIMULATED_DRAWS`` (``10^6``) scores
per dataset with a fixed seed, never the mechanism's trials. The ceiling is
decided by tail rates near ``1e-4``, estimated from about 100 draws: a
relative error of about 10%, about +-0.1 in epsilon (measured +-0.07 to
+-0.09 at the instance of :func:`steps_score_law`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import stats

from dpaudit.core.errors import NotExact
from dpaudit.core.kinds import SHUFFLED
from dpaudit.mechanisms.accounting.instances import remember
from dpaudit.mechanisms.accounting.score_law import ScoreLaw

if TYPE_CHECKING:  # annotations only: accounting imports no mechanism module
    from dpaudit.mechanisms.dataset import Dataset

__all__ = ["step_sums", "steps_log_likelihood_ratio", "steps_reference_scores", "steps_score_law"]

LAW_BINS = 20_000  #: thresholds of the ceiling's score law (a coarser score: the ceiling can only be lower)


def _structure(mech, data_a: Dataset, data_b: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(c, d_a, d_b)``: the common gradient of the other records and the canary's offsets from it."""
    if getattr(mech, "output", "final") != "iterates":
        raise NotExact("the exact likelihood ratio of the steps needs output='iterates' (the last iterate "
                       "alone has no known law)")
    if mech.loss != "linear" or mech.domain != "whole":
        raise NotExact(f"the steps' laws are known for the linear loss on the whole space, got loss={mech.loss!r}, "
                       f"domain={mech.domain!r}")
    table_a, table_b = mech.gradient_table(data_a), mech.gradient_table(data_b)
    differ = np.flatnonzero(np.any(table_a != table_b, axis=1))
    if differ.size != 1:
        raise NotExact(f"the datasets must differ in one record's gradient, got {differ.size}")
    others = np.delete(table_a, differ[0], axis=0)
    c = others[0] if others.size else np.zeros(mech.dim)
    if not np.allclose(others, c, rtol=0, atol=1e-12):
        raise NotExact("the steps' laws are known when every other record has the same gradient")
    if mech.sampling == "poisson" and np.any(c != 0):
        raise NotExact("with Poisson batches the steps' laws are known for a zero background only")
    return c, table_a[differ[0]] - c, table_b[differ[0]] - c


def step_sums(mech, outputs: np.ndarray) -> np.ndarray:
    """The noisy batch sums ``y_t`` behind released iterates ``(trials, T d)``, shape ``(trials, T, d)``."""
    theta = np.asarray(outputs, dtype=float).reshape(len(outputs), mech.steps, mech.dim)

    start = mech.start(1, torch.float64)[0].numpy()
    previous = np.concatenate([np.broadcast_to(start, (len(outputs), 1, mech.dim)), theta[:, :-1]], axis=1)
    update = (previous - theta) / mech.eta
    return mech.undo_direction(update) * mech.batch_size  # DP-LSSGD: undo A_s^{-1}


def _log_density(mech, a: np.ndarray) -> np.ndarray:
    """``log p`` (up to a common term) from the per-step exponents ``a`` ``(trials, T)``."""
    if mech.sampling not in SHUFFLED:
        q = mech.sample_rate
        return np.logaddexp(math.log1p(-q), math.log(q) + a).sum(axis=1) if q < 1 else a.sum(axis=1)
    per_epoch, steps = mech.batches_per_epoch, mech.steps
    epochs = -(-steps // per_epoch)
    padded = a
    if steps < epochs * per_epoch:  # batches a partial epoch did not reach: a = 0
        padded = np.zeros((len(a), epochs * per_epoch))
        padded[:, :steps] = a
    padded = padded.reshape(len(a), epochs, per_epoch)
    if mech.sampling == "shuffle-once":
        return _log_mean_exp(padded.sum(axis=1), axis=1)
    return _log_mean_exp(padded, axis=2).sum(axis=1)


def _log_mean_exp(a: np.ndarray, axis: int) -> np.ndarray:
    """``log mean exp`` along ``axis`` for finite ``a`` (scipy's ``logsumexp`` is several times slower here)."""
    top = a.max(axis=axis, keepdims=True)
    shifted = np.subtract(a, top)
    return np.log(np.exp(shifted, out=shifted).mean(axis=axis)) + np.squeeze(top, axis=axis)


def _ratio(mech, z: np.ndarray, d_a: np.ndarray, d_b: np.ndarray) -> np.ndarray:
    s2 = (mech.noise_std * mech.batch_size) ** 2
    flat = z.reshape(-1, z.shape[-1])  # one matrix-vector product (a stacked ``z @ d`` is several times slower)

    def exponents(d):
        return ((flat @ d).reshape(z.shape[:-1]) - 0.5 * float(d @ d)) / s2
    return _log_density(mech, exponents(d_b)) - _log_density(mech, exponents(d_a))


def steps_log_likelihood_ratio(mech, outputs: np.ndarray, data_a: Dataset, data_b: Dataset) -> np.ndarray:
    """``log p_S'(out) - log p_S(out)`` of released iterates, one value per trial."""
    c, d_a, d_b = _structure(mech, data_a, data_b)
    return _ratio(mech, step_sums(mech, outputs) - mech.batch_size * c, d_a, d_b)


def _canary_steps(mech, size: int, rng: np.random.Generator) -> np.ndarray:
    """0/1 ``(size, T)``: the steps whose batch holds the canary, drawn as the sampling draws them."""
    steps = mech.steps
    if mech.sampling not in SHUFFLED:
        return (rng.random((size, steps)) < mech.sample_rate).astype(float)
    per_epoch = mech.batches_per_epoch
    epochs = -(-steps // per_epoch)
    if mech.sampling == "shuffle-once":
        tau = np.repeat(rng.integers(0, per_epoch, (size, 1)), epochs, axis=1)
    else:
        tau = rng.integers(0, per_epoch, (size, epochs))
    hit = np.zeros((size, epochs * per_epoch))
    hit[np.arange(size)[:, None], tau + per_epoch * np.arange(epochs)] = 1.0
    return hit[:, :steps]


def steps_reference_scores(mech, data_a: Dataset, data_b: Dataset, size: int, seed: int = 0,
                           draws: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``size`` scores of :func:`steps_log_likelihood_ratio` per dataset, from the known laws.

    ``draws`` scores per dataset (default ``10 size``, within ``[1e5, 1e6]``)
    are simulated from the laws themselves (the canary's batches and the
    noise in the plane of the canary's two gradients, where the score
    lives), never from the mechanism's trials, and summarised by their
    quantiles at levels ``(i + 1/2) / size``: ``size`` values whose count
    beyond any threshold is close to ``size`` times its probability. A
    threshold chosen on them for ``size`` certification trials is the one the
    ceiling (docs/theory.md 3.4) would pick, and is independent of every
    trial that certifies a bound. The last :data:`REFERENCES_KEPT` asked for
    are kept (read-only arrays; of at most :data:`REFERENCE_KEPT_SIZE` scores
    a dataset, so that at most 32 MB stay held): a sequential audit asks again
    at every look.
    """
    draws = draws or min(max(10 * size, 100_000), 1_000_000)
    c, d_a, d_b = _structure(mech, data_a, data_b)
    # a sequential audit asks again at every look (the same size and seed): kept, read-only, per process
    key = (mech, c.tobytes(), d_a.tobytes(), d_b.tobytes(), size, seed, draws)
    if key in _REFERENCES:
        return _REFERENCES[key]
    levels = (np.arange(size) + 0.5) / size
    drawn = tuple(np.quantile(scores, levels) for scores in _simulate(mech, data_a, data_b, draws, seed))
    for scores in drawn:
        scores.setflags(write=False)
    return remember(_REFERENCES, key, drawn, size=REFERENCES_KEPT) if size <= REFERENCE_KEPT_SIZE else drawn


_REFERENCES: dict = {}  #: reference scores already drawn in this process, oldest first
REFERENCES_KEPT = 2  #: draws of reference scores kept per process (the last asked for)
REFERENCE_KEPT_SIZE = 1_000_000  #: reference scores of more trials a dataset than this are drawn again each time


def _simulate(mech, data_a: Dataset, data_b: Dataset, size: int, seed: int,
              stream: int = 27) -> tuple[np.ndarray, np.ndarray]:
    """``size`` simulated scores per dataset (see :func:`steps_reference_scores`); ``stream`` keeps the
    simulated law's draws (:data:`LAW_STREAM`) apart from the reference scores' of any seed."""
    _, d_a, d_b = _structure(mech, data_a, data_b)
    basis, _ = np.linalg.qr(np.stack([d_a, d_b], axis=1))  # an orthonormal basis of the plane (d, 2)
    plane_a, plane_b = d_a @ basis, d_b @ basis
    s = mech.noise_std * mech.batch_size
    rng = np.random.default_rng([seed, stream])
    scores = []
    for offset in (plane_a, plane_b):
        parts = []
        for start in range(0, size, 50_000):
            rows = min(50_000, size - start)
            z = rng.standard_normal((rows, mech.steps, basis.shape[1]))
            z *= s
            z += _canary_steps(mech, rows, rng)[..., None] * offset
            parts.append(_ratio(mech, z, plane_a, plane_b))
        scores.append(np.concatenate(parts))
    return scores[0], scores[1]


def steps_score_law(mech, data_a: Dataset, data_b: Dataset) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The law of :func:`steps_log_likelihood_ratio` under ``S`` and ``S'``: ``(values, mass_a, mass_b)``.

    Sorted values with their probabilities under each dataset, at most
    ``LAW_BINS`` of them; each value stands for a group of neighbours and is
    the lowest of its group, so thresholds only move down (the ceiling can
    only be lower). Computed once per instance and kept.

    Subsampled batches with parallel canary offsets: exact. The score is a
    sum of ``T`` i.i.d. terms ``f(x_t)`` of the projection ``x_t`` of ``z_t``
    on the canary, whose law under each dataset is a two-component Gaussian
    mixture. ``f`` is tabulated on a fine grid of ``x``, its values rounded
    to a lattice and the one-step law convolved ``T`` times by FFT.

    Shuffled batches: simulated, not exact. The score is not a sum of
    one-dimensional terms, so its law is the empirical law of
    ``SIMULATED_DRAWS`` (``10^6``) scores per dataset drawn from the exact
    laws by :func:`_simulate` (the canary's batch positions and the Gaussian
    noise in the plane of its gradients; never the mechanism's trials), with
    a fixed seed on a random stream of its own (``LAW_STREAM``), merged like
    the exact law. Its sampling error is that of the tail rates the ceiling
    is decided by: a rate near ``1e-4`` is estimated from about
    ``10^6 * 1e-4 = 100`` draws, a relative error of about
    ``1 / sqrt(100) = 10%``, about 0.1 in epsilon. For ``dp-sgd`` with
    ``n=1000, dim=1, batch_size=10, steps=100, noise_std=0.1`` (one shuffled
    epoch, the default canary; the ceiling is set by a false-negative rate
    of 7e-5 to 8e-5) the shipped law gives 2.47 at ``9 * 10^4`` trials
    (``delta=1e-5``, confidence 0.95; 2.25 with each rate bounded alone,
    docs/theory.md 3.2); over 8 seeds of the simulation the ceiling's
    standard deviation was 0.07 (bounded alone). The law takes about 7 s to
    compute on one core, then is kept. The returned :class:`ScoreLaw` says
    which of the two it is (``source``).
    """
    c, d_a, d_b = _structure(mech, data_a, data_b)
    simulated = mech.sampling in SHUFFLED
    kind = ("simulated", SIMULATED_DRAWS) if simulated else ("exact",)
    key = (*kind, mech, c.tobytes(), d_a.tobytes(), d_b.tobytes())
    if key not in _LAWS:  # audits of one instance come in runs: the law is computed once
        if simulated:
            remember(_LAWS, key, ScoreLaw(*_simulated_law(mech, data_a, data_b), source=(
                f"simulated from the exact laws, {SIMULATED_DRAWS:,} draws per dataset (about +-0.1 in epsilon)")),
                     size=8)
        else:
            remember(_LAWS, key, ScoreLaw(*_score_law(mech, d_a, d_b)), size=8)
    return _LAWS[key]


_LAWS: dict = {}
SIMULATED_DRAWS = 1_000_000  #: scores per dataset behind a simulated law (2e6 took about 14 s per law)
LAW_STREAM = 28  #: the random stream of simulated laws (reference scores use 27)


def _simulated_law(mech, data_a: Dataset, data_b: Dataset, draws: int | None = None,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The empirical law of ``draws`` (default ``SIMULATED_DRAWS``) simulated scores per dataset, merged like
    the exact law."""
    scores_a, scores_b = _simulate(mech, data_a, data_b, draws or SIMULATED_DRAWS, seed, stream=LAW_STREAM)
    pooled = np.concatenate([scores_a, scores_b])
    order = np.argsort(pooled, kind="stable")
    from_a = order < scores_a.size
    return _merged(pooled[order], from_a / scores_a.size, ~from_a / scores_b.size)


def _score_law(mech, d_a: np.ndarray, d_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    norm_a = float(np.linalg.norm(d_a))
    if norm_a == 0:
        raise NotExact("the canary's gradient equals the others': the datasets give the same law")
    v = d_a / norm_a
    b = float(d_b @ v)
    if not np.allclose(d_b, b * v, atol=1e-12):
        raise NotExact("the canary's gradients in S and S' are not parallel")
    s, q, steps = mech.noise_std * mech.batch_size, mech.sample_rate, mech.steps
    x = np.linspace(min(0.0, b, norm_a) - 14 * s, max(0.0, b, norm_a) + 14 * s, 400_001)
    mid = 0.5 * (x[1:] + x[:-1])

    def log_p(shift):  # log(1 - q + q exp(a)) for the offset ``shift`` along v
        a = (mid * shift - 0.5 * shift * shift) / s**2
        return np.logaddexp(math.log1p(-q), math.log(q) + a) if q < 1 else a

    f = log_p(b) - log_p(norm_a)

    def mass(shift):
        return (1 - q) * np.diff(stats.norm.cdf(x / s)) + q * np.diff(stats.norm.cdf((x - shift) / s))
    span = float(f.max() - f.min()) * steps
    grid = max(span / 2**21, 1e-4)
    index = np.rint(f / grid).astype(np.int64)
    offset = int(index.min())
    pmf_a = np.bincount(index - offset, weights=mass(norm_a))
    pmf_b = np.bincount(index - offset, weights=mass(b))
    size = steps * (pmf_a.size - 1) + 1
    length = 1 << int(math.ceil(math.log2(size)))

    def compose(pmf):
        return np.clip(np.fft.irfft(np.fft.rfft(pmf, length) ** steps, length)[:size], 0.0, None)
    law_a, law_b = compose(pmf_a), compose(pmf_b)
    values = (np.arange(size) + steps * offset) * grid
    keep = np.flatnonzero((law_a > 1e-30) | (law_b > 1e-30))
    return _merged(values[keep[0]:keep[-1] + 1], law_a[keep[0]:keep[-1] + 1], law_b[keep[0]:keep[-1] + 1])


def _merged(values: np.ndarray, law_a: np.ndarray, law_b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted ``values`` and their masses merged into at most ``LAW_BINS`` groups of neighbours, normalised."""
    groups = -(-values.size // LAW_BINS)
    pad = groups * -(-values.size // groups) - values.size
    merged = [np.pad(array, (0, pad)).reshape(-1, groups).sum(axis=1) for array in (law_a, law_b)]
    lows = values[::groups]  # each merged value is the lowest of its group: thresholds only move down
    return lows, merged[0] / merged[0].sum(), merged[1] / merged[1].sum()
