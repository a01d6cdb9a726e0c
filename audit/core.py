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

from attacks.canaries import CanaryPair
from attacks.scores import fit_score
from audit.estimators import epsilon_lower_bound, gdp_lower_bound, profile_lower_bound
from mechanisms.errors import ParameterError
from mechanisms.validation import check_int

__all__ = ["calibration_trials", "certify_scores", "audit_pair", "PROFILE_EPSILONS"]

PROFILE_EPSILONS = tuple(np.round(np.linspace(0.0, 8.0, 33), 4))


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


def audit_pair(pair: CanaryPair, *, trials: int, delta: float, confidence: float = 0.95,
               score: str = "projection", threshold: str = "split", calibration_fraction: float = 0.1,
               seed: int = 0) -> dict[str, Any]:
    """Audit one pair with ``trials`` runs on each dataset; returns the estimator results.

    Four independent streams are spawned from ``seed``: calibration and
    certification trials on ``S`` and on ``S'``.
    """
    trials = check_int("trials", trials, minimum=2)
    n_cal = calibration_trials(trials, calibration_fraction)
    streams = np.random.SeedSequence(seed).spawn(4)
    mech = pair.mechanism
    cal_out_a = mech.sample(pair.dataset_a, trials=n_cal, seed=streams[0])
    cal_out_b = mech.sample(pair.dataset_b, trials=n_cal, seed=streams[1])
    scorer = fit_score(score, pair, cal_out_a, cal_out_b, seed=seed)
    cert_a = scorer(mech.sample(pair.dataset_a, trials=trials - n_cal, seed=streams[2]))
    cert_b = scorer(mech.sample(pair.dataset_b, trials=trials - n_cal, seed=streams[3]))
    results = certify_scores(scorer(cal_out_a), scorer(cal_out_b), cert_a, cert_b, delta=delta,
                             confidence=confidence, threshold=threshold, seed=seed)
    results["scores"] = (cert_a, cert_b)
    return results
