"""The report says how many trials calibrated when a score asked for more than ``calibration_fraction``."""

from __future__ import annotations

import dpaudit
from dpaudit.reports.html import html
from tests import discrete_algorithms as algorithms


def test_the_html_report_shows_the_calibration_trials_a_score_asked_for():
    algorithm = algorithms.randomized_response(1.0)
    result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0)
    assert "calibration fraction 0.1 (6000 trials per dataset calibrated)" in html(result)
