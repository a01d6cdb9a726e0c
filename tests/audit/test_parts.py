"""How an audit's trials are split into calibration and certification chunks (``audit.jobs.parts``)."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.auditing.jobs.parts import calibration_chunks, calibration_trials, chunk_sizes, requested_calibration
from dpaudit.core.errors import ParameterError


def _score(share=None):
    def score(outputs):
        return np.zeros(len(outputs))
    if share is not None:
        score.calibration_share = share
    return score


def test_widened_calibration_keeps_the_first_part_s_chunks_and_adds_its_own():
    assert chunk_sizes(25_000, 10_000) == [10_000, 10_000, 5_000]
    # the first 2,500 trials are one chunk whatever follows: a rerun finds the same chunk under the same key
    assert calibration_chunks(2_500, 7_500, 10_000) == [2_500, 5_000]
    assert calibration_chunks(2_500, 2_500, 10_000) == [2_500]
    assert sum(calibration_chunks(10_001, 30_000, 10_000)) == 30_000


def test_the_largest_share_asked_for_is_drawn_and_never_less_than_the_setting():
    assert requested_calibration(100_000, 10_000, [_score(), _score(0.3), _score(0.2)]) == 30_000
    assert requested_calibration(100_000, 40_000, [_score(0.3)]) == 40_000  # a larger setting is kept
    assert requested_calibration(100_000, 10_000, [_score()]) == 10_000
    assert requested_calibration(100_000, 10_000, []) == 10_000
    with pytest.raises(ParameterError, match="calibration_share"):
        requested_calibration(100_000, 10_000, [_score(0.9)])
    assert calibration_trials(100_000, 0.3) == 30_000
    with pytest.raises(ParameterError, match="trials=1 "):
        calibration_trials(1, 0.3)
