"""Streaming certification: counts added up chunk by chunk equal the estimators on whole arrays."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.auditing.statistics.estimators import epsilon_lower_bound, gdp_lower_bound, profile_lower_bound
from dpaudit.auditing.jobs.streaming import PROFILE_EPSILONS, ArraySource, StreamingCertifier, certify_source
from dpaudit.mechanisms import ParameterError


def _scores(seed: int, shift: float, size: int = 50_000):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(size // 10), rng.standard_normal(size // 10) + shift,
            rng.standard_normal(size), rng.standard_normal(size) + shift)


@pytest.mark.parametrize("shift", [1.0, -1.5, 0.0])
@pytest.mark.parametrize("threshold", ["split", "union"])
def test_chunked_counts_equal_whole_arrays(shift, threshold):
    # Exact equality, not a tolerance: the same integer counts enter the same bounds.
    cal_a, cal_b, cert_a, cert_b = _scores(7, shift)
    # planned: the certification trials to come, as epsilon_lower_bound plans for its own arrays
    certifier = StreamingCertifier(cal_a, cal_b, delta=1e-5, confidence=0.95, threshold=threshold,
                                   planned=(cert_a.size, cert_b.size))
    for side, scores in (("b", cert_b), ("a", cert_a)):
        for chunk in np.array_split(scores, 13):
            certifier.add(side, chunk)
    streamed = certifier.finish()
    calibration = (cal_a, cal_b)
    whole_eps = epsilon_lower_bound(cert_a, cert_b, delta=1e-5, threshold=threshold, calibration=calibration)
    whole_gdp = gdp_lower_bound(cert_a, cert_b, delta=1e-5, threshold=threshold, calibration=calibration)
    whole_profile = profile_lower_bound(cert_a, cert_b, epsilons=PROFILE_EPSILONS, calibration=calibration)
    assert streamed.epsilon == whole_eps
    assert streamed.gdp == whole_gdp
    assert streamed.profile == whole_profile
    assert streamed.trials == {"a": cert_a.size, "b": cert_b.size}
    if shift == 1.0:
        assert streamed.epsilon.epsilon_lower_bound > 1.0


def test_figures_use_binned_counts():
    cal_a, cal_b, cert_a, cert_b = _scores(3, 2.0)
    result = certify_source(ArraySource(cal_a, cal_b, cert_a, cert_b), delta=1e-5, confidence=0.95,
                            threshold="split")
    roc, histogram = result.distributions["roc"], result.distributions["histogram"]
    edges = np.asarray(histogram["edges"])
    assert np.array_equal(histogram["a"], np.histogram(cert_a, edges)[0])
    assert np.array_equal(histogram["b"], np.histogram(cert_b, edges)[0])
    # thresholds are calibration quantiles, so the ROC starts near (1, 1) (a certification score
    # below the lowest calibration score has probability about 1 / 10,000 per trial) and falls
    assert roc["fpr"][0] > 0.99 and roc["tpr"][0] > 0.99
    # N(0,1) against N(2,1): AUC = Phi(2 / sqrt 2) = 0.921; at FPR 1e-3 the TPR is Phi(2 - 3.09) = 0.138.
    # 50,000 trials per side: the AUC's sampling error is about 0.001 and the trapezoid over 200
    # thresholds adds less than 0.005; about 50 false positives at 1e-3 move the TPR by about +-0.03.
    assert abs(roc["auc"] - 0.921) < 0.01
    assert 0.09 < roc["tpr_at_fpr"] < 0.18 and roc["fpr_level"] == 1e-3
    assert np.all(np.diff(roc["fpr"]) <= 0) and np.all(np.asarray(roc["tpr"]) >= np.asarray(roc["fpr"]))


def test_bad_chunks_are_refused():
    cal_a, cal_b, _, _ = _scores(1, 1.0, 1000)
    certifier = StreamingCertifier(cal_a, cal_b, delta=1e-5, confidence=0.95)
    with pytest.raises(ParameterError, match="side must be 'a' or 'b'"):
        certifier.add("c", cal_a)
    with pytest.raises(ParameterError, match="finite"):
        certifier.add("a", np.array([np.nan]))
    with pytest.raises(ParameterError, match="no certification scores for side 'a'"):
        certifier.finish()
