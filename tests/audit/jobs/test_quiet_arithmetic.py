"""NumPy's warnings from the arithmetic of scores do not reach the screen (issue 73): outputs near 1e300 overflow
the squares of the Gaussian and shrinkage fits, which are then not applicable (said in the portfolio table) or
refused with a sentence, never printed as ``RuntimeWarning: overflow encountered in square``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpaudit
from dpaudit.core.errors import ParameterError


def huge(records, rng):
    return [float(records.sum()) * 1e300 + rng.normal() * 1e305, rng.normal()]


PAIR = (np.zeros((3, 1)), np.ones((3, 1)))


def test_overflowing_scores_warn_nothing_and_the_portfolio_says_why():
    mech = dpaudit.from_callable(huge, output_dim=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # any NumPy warning fails the test
        result = dpaudit.audit(mech, dataset_pair=PAIR, trials=4_000, seed=0)
    assert result.epsilon_lower_bound >= 0
    reasons = [c["reason"] for c in result.attack["portfolio"] if not c["applicable"]]
    assert any("not finite" in reason for reason in reasons)  # said in the table, not warned


def test_an_anytime_score_that_is_not_finite_is_refused_with_a_sentence():
    mech = dpaudit.from_callable(huge, output_dim=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ParameterError, match="not finite numbers"):
            dpaudit.audit(mech, dataset_pair=PAIR, design=dpaudit.Anytime(budget=2_000), score="gaussian", seed=0)
