"""One audit of one canary pair, in memory: sample, score, certify.

The runner (``audit.runner``) does the same in stored, parallel chunks;
this module holds the steps both share. Calibration trials (for fitting
scores and choosing thresholds) and certification trials come from
independent seed streams and are never mixed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.scores import fit_score
from dpaudit.audit.estimators import epsilon_lower_bound, gdp_lower_bound, profile_lower_bound
from dpaudit.mechanisms.errors import ParameterError
from dpaudit.mechanisms.validation import check_int

__all__ = ["calibration_trials", "certify_scores", "audit_pair", "chunk_sizes", "unit_seed", "PROFILE_EPSILONS"]
_SIDES = {"a": 0, "b": 1}
_PARTS = {"cal": 0, "cert": 1}

PROFILE_EPSILONS = tuple(np.round(np.linspace(0.0, 8.0, 33), 4))


def unit_seed(root: int, index: int, side: str, part: str, chunk: int) -> np.random.SeedSequence:
    """The seed of one chunk: independent of workers, backend and order of completion."""
    return np.random.SeedSequence(root, spawn_key=(index, _SIDES[side], _PARTS[part], chunk))


def chunk_sizes(total: int, size: int) -> list[int]:
    """``total`` trials in chunks of at most ``size``."""
    return [min(size, total - k * size) for k in range(math.ceil(total / size))]


def calibration_trials(trials: int, fraction: float) -> int:
    """Trials per dataset set aside for calibration."""
    if not 0 < fraction < 1:
        raise ParameterError(f"calibration_fraction must be in (0, 1), got calibration_fraction={fraction}")
    count = int(math.ceil(fraction * trials))
    if count < 1 or count >= trials:
        raise ParameterError(f"trials={trials} is too few to set aside a calibration part")
    return count


def certify_scores(cal_a, cal_b, cert_a, cert_b, *, delta: float, confidence: float,
                   threshold: str, seed: int = 0) -> dict[str, Any]:
    """Every certified quantity from calibration and certification scores."""
    calibration = (cal_a, cal_b)
    eps = epsilon_lower_bound(cert_a, cert_b, delta=delta, confidence=confidence, threshold=threshold,
                              calibration=calibration, seed=seed)
    gdp = gdp_lower_bound(cert_a, cert_b, delta=delta, confidence=confidence, threshold=threshold,
                          calibration=calibration, seed=seed)
    profile = profile_lower_bound(cert_a, cert_b, epsilons=PROFILE_EPSILONS, confidence=confidence,
                                  calibration=calibration, seed=seed)
    return {"epsilon": eps, "gdp": gdp, "profile": profile}


def _sample(pair: CanaryPair, side: str, part: str, total: int, seed: int, chunk_size: int, scorer=None):
    dataset = pair.dataset_a if side == "a" else pair.dataset_b
    index = pair.index or 0
    parts = [pair.mechanism.sample(dataset, trials=size, seed=unit_seed(seed, index, side, part, k))
             for k, size in enumerate(chunk_sizes(total, chunk_size))] if scorer is None else [
        scorer(pair.mechanism.sample(dataset, trials=size, seed=unit_seed(seed, index, side, part, k)))
        for k, size in enumerate(chunk_sizes(total, chunk_size))]
    return np.concatenate(parts)


def audit_pair(pair: CanaryPair, *, trials: int, delta: float, confidence: float = 0.95,
               score: str = "projection", threshold: str = "split", calibration_fraction: float = 0.1,
               seed: int = 0, chunk_size: int = 10_000) -> dict[str, Any]:
    """Audit one pair with ``trials`` runs on each dataset; returns the estimator results.

    Trials are drawn in chunks with the runner's seeds (:func:`unit_seed`), so
    memory is bounded by the chunk size and the scores equal those of
    ``dpaudit run`` with the same seed and chunk size.
    """
    trials = check_int("trials", trials, minimum=2)
    n_cal = calibration_trials(trials, calibration_fraction)
    fitted = score not in ("projection", "exact")
    if fitted:
        cal_out_a = _sample(pair, "a", "cal", n_cal, seed, chunk_size)
        cal_out_b = _sample(pair, "b", "cal", n_cal, seed, chunk_size)
        scorer = fit_score(score, pair, cal_out_a, cal_out_b, seed=seed)
        cal_a, cal_b = scorer(cal_out_a), scorer(cal_out_b)
    else:
        scorer = fit_score(score, pair)
        cal_a = _sample(pair, "a", "cal", n_cal, seed, chunk_size, scorer)
        cal_b = _sample(pair, "b", "cal", n_cal, seed, chunk_size, scorer)
    cert_a = _sample(pair, "a", "cert", trials - n_cal, seed, chunk_size, scorer)
    cert_b = _sample(pair, "b", "cert", trials - n_cal, seed, chunk_size, scorer)
    results = certify_scores(cal_a, cal_b, cert_a, cert_b, delta=delta, confidence=confidence,
                             threshold=threshold, seed=seed)
    results["scores"] = (cert_a, cert_b)
    return results
